//go:build linux

package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// inode is the inode number of path (0 if it is missing).
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// dirtyWork makes in work what a volatile overlay mount leaves there.
func dirtyWork(t *testing.T, work string) {
	t.Helper()
	for _, d := range []string{"work/#1", "work/incompat/volatile"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "work/incompat/volatile/dirty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestRetireWork: a work directory a mount used is cleared for the next
// mount (replaced where directories spread, its work directory moved to
// the trash elsewhere); a fresh one is used as it is, not replaced — the
// replacement's directory is what waits for the disk.
func TestRetireWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		dirty        bool
		spread       bool
		sameInode    bool
		trashEntries int
	}{
		{name: "fresh, spread", spread: true, sameInode: true},
		{name: "used, spread", dirty: true, spread: true, trashEntries: 1},
		{name: "fresh", sameInode: true},
		{name: "used", dirty: true, sameInode: true, trashEntries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			work, trash := filepath.Join(base, "0", "etc"), filepath.Join(base, "trash")
			for _, d := range []string{work, trash} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if tc.dirty {
				dirtyWork(t, work)
			}
			before := inode(t, work)
			retireWork(work, trash, tc.spread)
			if !freshWork(work) {
				t.Errorf("after retireWork, %s holds %v", work, entries(t, work))
			}
			if got := inode(t, work) == before; got != tc.sameInode {
				t.Errorf("same directory after retireWork: %v, want %v", got, tc.sameInode)
			}
			if got := entries(t, trash); len(got) != tc.trashEntries {
				t.Errorf("trash holds %v, want %d entries", got, tc.trashEntries)
			}
		})
	}
}

// TestFreshenSlot: a free slot's used work directories are replaced by
// fresh ones (the used ones go to the trash), its fresh ones and a
// directory being replaced are left alone, and a slot in use (its lock
// held) is not touched.
func TestFreshenSlot(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	trash := filepath.Join(state, trashDir)
	if err := os.Mkdir(trash, 0o700); err != nil {
		t.Fatal(err)
	}
	for n := range 2 {
		if err := ensureSlot(state, []layer{{Name: "etc"}, {Name: "usr"}}, n, false); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(slotDir(state, n)+".lock", nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	free, busy := slotDir(state, 0), slotDir(state, 1)
	dirtyWork(t, filepath.Join(free, "etc"))
	dirtyWork(t, filepath.Join(free, "usr.k3x9"))
	dirtyWork(t, filepath.Join(busy, "etc"))
	lock, err := os.OpenFile(busy+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	usr, root := inode(t, filepath.Join(free, "usr")), inode(t, filepath.Join(free, rootLayerName))

	freshenSlot(state, trash, 0)
	freshenSlot(state, trash, 1)

	if !freshWork(filepath.Join(free, "etc")) {
		t.Errorf("the free slot's used etc still holds %v", entries(t, filepath.Join(free, "etc")))
	}
	if inode(t, filepath.Join(free, "usr")) != usr || inode(t, filepath.Join(free, rootLayerName)) != root {
		t.Error("a fresh work directory was replaced")
	}
	if freshWork(filepath.Join(free, "usr.k3x9")) {
		t.Error("a directory being replaced was touched")
	}
	if freshWork(filepath.Join(busy, "etc")) {
		t.Error("the work directory of a slot in use was replaced")
	}
	if got := entries(t, trash); len(got) != 1 {
		t.Errorf("trash holds %v, want the free slot's used etc alone", got)
	}
}

// TestPrepareAhead: a reaper of a provider whose directories spread
// first makes every free slot fresh and the next sandbox's directory;
// one whose directories do not (tmpfs, where a directory costs nothing)
// does neither.
func TestPrepareAhead(t *testing.T) {
	t.Parallel()
	for _, spread := range []bool{true, false} {
		state := t.TempDir()
		trash := filepath.Join(state, trashDir)
		if err := os.MkdirAll(trash, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := ensureSlot(state, []layer{{Name: "etc"}}, 0, false); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(slotDir(state, 0)+".lock", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(trash, trashLock), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		dirtyWork(t, filepath.Join(slotDir(state, 0), "etc"))
		if code := runReaper(trash, nil, spread); code != 0 {
			t.Fatalf("spread %v: runReaper = %d", spread, code)
		}
		fresh := freshWork(filepath.Join(slotDir(state, 0), "etc"))
		box := inode(t, filepath.Join(state, boxName)) != 0
		if fresh != spread || box != spread {
			t.Errorf("spread %v: fresh slot %v, box %v; want both %v", spread, fresh, box, spread)
		}
		if got := trashEntries(trash); spread && len(got) != 0 {
			t.Errorf("spread %v: the reaper left %v in the trash", spread, got)
		}
	}
}

// TestMakeSandboxDirTakesTheBox: a create renames the directory made
// ahead into place, with its times made new (an hour-old one would look
// like an interrupted create's to Collect), and makes its own once none
// is left; a provider whose directories do not spread makes its own.
func TestMakeSandboxDirTakesTheBox(t *testing.T) {
	t.Parallel()
	for _, spread := range []bool{true, false} {
		p := &Provider{dir: t.TempDir(), spread: spread}
		box := filepath.Join(p.dir, boxName)
		if err := os.Mkdir(box, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(box, old, old); err != nil {
			t.Fatal(err)
		}
		want := inode(t, box)
		first, second := filepath.Join(p.dir, "sb-aaaaaaaaaa"), filepath.Join(p.dir, "sb-bbbbbbbbbb")
		for _, d := range []string{first, second} {
			if err := p.makeSandboxDir(d); err != nil {
				t.Fatalf("spread %v: makeSandboxDir: %v", spread, err)
			}
		}
		if got := inode(t, first) == want; got != spread {
			t.Errorf("spread %v: the first sandbox got the box: %v", spread, got)
		}
		if inode(t, second) == 0 || inode(t, second) == want {
			t.Errorf("spread %v: the second sandbox has no directory of its own", spread)
		}
		info, err := os.Stat(first)
		if err != nil {
			t.Fatal(err)
		}
		if age := time.Since(info.ModTime()); age > time.Minute {
			t.Errorf("spread %v: the new sandbox's directory is %v old", spread, age)
		}
		if err := p.makeSandboxDir(first); err == nil {
			t.Errorf("spread %v: a second directory of one id was made", spread)
		}
	}
}

// TestDeleteAndStopPrepareAhead: where directories spread, after a delete
// and after a stop the reaper leaves every free slot's work directories fresh (the next start
// mounts in them as they are) and, after the delete, a directory the next
// create takes as its sandbox's.
func TestDeleteAndStopPrepareAhead(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	// As New finds it on ext2, 3 and 4; forced so that this holds
	// wherever the test directory lies.
	p.spread = true
	ctx := context.Background()
	reaped := func() {
		t.Helper()
		p.bg.wg.Wait()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := p.WaitReaped(wctx); err != nil {
			t.Fatal(err)
		}
	}
	allFresh := func(when string) {
		t.Helper()
		slots, _ := filepath.Glob(filepath.Join(p.dir, workPool, "[0-9]*"))
		for _, s := range slots {
			if filepath.Ext(s) == ".lock" {
				continue
			}
			for _, l := range entries(t, s) {
				if !freshWork(filepath.Join(s, l)) {
					t.Errorf("after the %s, %s/%s holds %v", when, s, l, entries(t, filepath.Join(s, l)))
				}
			}
		}
	}
	info, err := p.Create(ctx, providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, info.ID, "true")
	if err := p.Delete(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	reaped()
	allFresh("delete")
	box := inode(t, filepath.Join(p.dir, boxName))
	if box == 0 {
		t.Fatal("no directory was made ahead for the next sandbox")
	}
	id := newSandbox(t, p, providers.Spec{})
	if got := inode(t, filepath.Join(p.dir, id)); got != box {
		t.Errorf("the new sandbox's directory is inode %d, want the one made ahead (%d)", got, box)
	}
	mustRun(t, p, id, "echo hi > /tmp/x")
	stopSandbox(t, p, id)
	reaped()
	allFresh("stop")
	if got := mustRun(t, p, id, "cat /etc/hostname"); got == "" {
		t.Error("the sandbox did not start again in the fresh work directories")
	}
}
