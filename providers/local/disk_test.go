//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

func TestJudgeDisk(t *testing.T) {
	t.Parallel()
	q := diskQuota{limit: 100, reserve: 10, grace: 5}
	tests := []struct {
		name             string
		usage, free, cut int64
		over             bool
		want             diskVerdict
	}{
		{name: "well under", usage: 50, free: 1000, want: diskUnder},
		{name: "at the quota", usage: 100, free: 1000, want: diskOver},
		{name: "past the quota", usage: 120, free: 1000, want: diskOver},
		{name: "host disk at the reserve", usage: 50, free: 10, want: diskOver},
		{name: "host disk nearly at the reserve", usage: 50, free: 11, want: diskUnder},
		{name: "host disk below the reserve", usage: 50, free: 0, want: diskOver},
		{name: "over, within the grace", usage: 104, free: 1000, over: true, cut: 100, want: diskOver},
		{name: "over, past the grace", usage: 106, free: 1000, over: true, cut: 100, want: diskStop},
		{name: "host full meanwhile, not the sandbox's writing", usage: 50, free: 0, over: true, cut: 50, want: diskOver},
		{name: "back under after deletions", usage: 60, free: 1000, over: true, cut: 100, want: diskUnder},
	}
	for _, tc := range tests {
		if got := judgeDisk(q, tc.usage, tc.free, tc.over, tc.cut); got != tc.want {
			t.Errorf("%s: judgeDisk(usage %d, free %d, over %v, cut %d) = %d, want %d", tc.name, tc.usage, tc.free, tc.over, tc.cut, got, tc.want)
		}
	}
}

// TestDiskWatchDue: the watch walks again when the free space fell by a
// step, counted from the most it saw since its last walk: space another
// process freed meanwhile (on the host's file system) does not hide what
// the sandbox writes after.
func TestDiskWatchDue(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	start := time.Now()
	type tick struct {
		after time.Duration
		free  uint64 // MiB
		files uint64
		want  bool
	}
	tests := []struct {
		name  string
		ticks []tick
	}{
		{"first tick walks", []tick{{0, 1000, 1e6, true}}},
		{"small falls do not", []tick{{0, 1000, 1e6, true}, {1, 990, 1e6, false}, {2, 980, 1e6, false}}},
		{"a step's fall does", []tick{{0, 1000, 1e6, true}, {1, 980, 1e6, false}, {2, 968, 1e6, true}}},
		{"a step's fall after space freed elsewhere", []tick{{0, 1000, 1e6, true}, {1, 1100, 1e6, false}, {2, 1060, 1e6, true}}},
		{"inodes", []tick{{0, 1000, 1e6, true}, {1, 1000, 1e6 + 5000, false}, {2, 1000, 1e6 + 900, true}}},
		{"an old walk", []tick{{0, 1000, 1e6, true}, {diskRewalk, 1000, 1e6, true}}},
	}
	for _, tc := range tests {
		w := &diskWatch{}
		for i, k := range tc.ticks {
			now := start.Add(k.after)
			got := w.due(now, k.free*mib, k.files, false)
			if got != k.want {
				t.Errorf("%s: tick %d (free %d MiB, %d inodes): due %v, want %v", tc.name, i, k.free, k.files, got, k.want)
			}
			if got {
				w.walked, w.free, w.files = now, k.free*mib, k.files
			}
		}
	}
}

// diskUsageEnv names the directory a re-executed TestDiskUsage measures
// (see diskUsageAsInit).
const diskUsageEnv = "SANDBOX_TEST_DISK_USAGE_OF"

// TestDiskUsage: every file is charged its blocks and at least one, a
// file of two names once, and unreadable directories are no way out for
// a walker with the init's capabilities.
func TestDiskUsage(t *testing.T) {
	if dir := os.Getenv(diskUsageEnv); dir != "" {
		n, err := diskUsageOf(dir)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("usage %d\n", n)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	empty, err := diskUsageOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a/big", "a/b/big"} {
		if err := os.WriteFile(filepath.Join(dir, f), big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "a/big"), filepath.Join(dir, "twice")); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(dir, "a", "empty"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a/big", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a", "b"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "a", "b"), 0o755) })
	got := diskUsageAsInit(t, dir)
	// Two MiB of data, 100 empty files, a symlink and two directories
	// charged a block each at least.
	lo := empty + 2<<20 + 103*diskBlock
	hi := lo + 64<<10
	if got < lo || got > hi {
		t.Errorf("usage %d, want between %d and %d", got, lo, hi)
	}
}

// diskUsageAsInit is diskUsage of dir as a sandbox's init walks it: with
// CAP_DAC_OVERRIDE over the owners of its files, so that a directory of
// mode 0 is read too. Root has it; an unprivileged user walks in a user
// namespace of its own where it is root (its files' owner mapped, like
// the owners of a sandbox's files in the init's), through a new process
// of this test.
func diskUsageAsInit(t *testing.T, dir string) int64 {
	t.Helper()
	if os.Getuid() == 0 {
		n, err := diskUsageOf(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestDiskUsage$", "-test.count=1")
	cmd.Env = append(os.Environ(), diskUsageEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.Output()
	var n int64
	if _, serr := fmt.Sscanf(string(out), "usage %d\n", &n); err != nil || serr != nil {
		t.Fatalf("diskUsage as root of a user namespace: %v, %v: %s", err, serr, out)
	}
	return n
}

// diskUsageOf is diskUsage of a path.
func diskUsageOf(path string) (int64, error) {
	d, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return diskUsage(d)
}

// fileSize is the size of a sandbox file (-1 when it cannot be read).
func fileSize(t *testing.T, p *Provider, id, path string) int64 {
	t.Helper()
	fi, err := p.Stat(context.Background(), id, path)
	if err != nil {
		return -1
	}
	return fi.Size
}

// waitWritable writes in the sandbox until a write succeeds again (the
// cut-off ended) or a while passed.
func waitWritable(t *testing.T, p *Provider, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := run(t, p, id, "echo back > /workspace/after")
		if r.err == nil && r.code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail after deleting: exit %d, %v, %q", r.code, r.err, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDiskQuota (issue 13, item 10): a sandbox's files stop growing at its
// quota, in the workspace, in its own layers and in a directory nobody may
// enter; reading and deleting go on; deleting ends the cut-off; the user is
// told why writes fail.
func TestDiskQuota(t *testing.T) {
	const quotaMB = 64
	// What a write may run past the quota: what it writes between two
	// looks of the init, on a slow machine.
	const slackMB = 256
	tests := []struct{ name, user, fill, where string }{
		{name: "workspace", where: "/workspace/big"},
		{name: "root layer", fill: "mkdir /srv", where: "/srv/big"},
		{name: "hidden directory", fill: "mkdir /workspace/h && head -c 40M /dev/zero > /workspace/h/f && chmod 000 /workspace/h", where: "/workspace/big"},
	}
	if os.Getuid() == 0 {
		// Writing into the host's /usr and a second user need more
		// ids than the one an unprivileged user without subordinate
		// ids has (TestEscapeUnprivileged runs this test so too).
		tests = append(tests, struct{ name, user, fill, where string }{name: "system layer", where: "/usr/local/big"},
			struct{ name, user, fill, where string }{name: "as a user", user: "tester", where: "/home/tester/big"})
	}
	p := newTestProvider(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := newSandbox(t, p, providers.Spec{User: tc.user, Resources: providers.Resources{DiskMB: quotaMB}})
			if tc.fill != "" {
				mustRun(t, p, id, tc.fill)
			}
			// One MiB at a time, as a program that logs or
			// downloads does: 1 GiB unless stopped.
			r := run(t, p, id, "i=0; while [ $i -lt 1024 ]; do head -c 1048576 /dev/zero >> "+tc.where+" || exit 7; i=$((i+1)); done")
			if r.err != nil || r.code != 7 {
				t.Fatalf("writing 1 GiB into a sandbox of %d MiB: exit %d, %v, %q", quotaMB, r.code, r.err, r.stderr)
			}
			size := fileSize(t, p, id, tc.where)
			if size < 8<<20 || size > (quotaMB+slackMB)<<20 {
				t.Errorf("%s grew to %d bytes, want between 8 MiB and %d + %d MiB", tc.where, size, quotaMB, slackMB)
			}
			if note := p.TakeNote(id); !strings.Contains(note, "over its disk quota") || !strings.Contains(note, "File too large") {
				t.Errorf("note %q, want one about the quota", note)
			}
			if r := run(t, p, id, "echo more > /workspace/small"); r.code == 0 {
				t.Errorf("a write succeeded past the quota")
			}
			if got := mustRun(t, p, id, "head -c 3 "+tc.where+" | od -An -c | tr -d ' \\n'"); got != `\0\0\0` {
				t.Errorf("reading past the quota: %q", got)
			}
			mustRun(t, p, id, "rm -f "+tc.where+"; chmod -f 700 /workspace/h; rm -rf /workspace/h")
			waitWritable(t, p, id)
			if _, err := os.Stat(filepath.Join(p.dir, id, diskOverFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the cut-off's note stays after it ended: %v", err)
			}
		})
	}
}

// TestDiskQuotaDefied: a sandbox whose commands lift their file size limit
// again and again to go on writing past the cut-off is stopped, its files
// kept, and told why; its next operation starts it again.
func TestDiskQuotaDefied(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{Resources: providers.Resources{DiskMB: 32}})
	r := run(t, p, id, "i=0; while [ $i -lt 2048 ]; do ulimit -S -f $(ulimit -H -f); head -c 1048576 /dev/zero >> /workspace/big; i=$((i+1)); done")
	if r.err == nil && r.code == 0 {
		t.Fatalf("2 GiB written into a sandbox of 32 MiB: size %d, note %q", fileSize(t, p, id, "/workspace/big"), p.TakeNote(id))
	}
	if note := p.TakeNote(id); !strings.Contains(note, "was stopped") {
		t.Errorf("note %q, want that the machine was stopped", note)
	}
	if size := fileSize(t, p, id, "/workspace/big"); size > 512<<20 {
		t.Errorf("the file grew to %d MiB", size>>20)
	}
	mustRun(t, p, id, "rm /workspace/big")
	waitWritable(t, p, id)
}

// TestDiskReserve: the state directory's file system keeps its reserve
// free whatever a sandbox's quota: a machine started when the disk is at
// the reserve cannot write, and no sandbox can be created.
func TestDiskReserve(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	stopSandbox(t, p, id)
	var st unix.Statfs_t
	if err := unix.Statfs(p.dir, &st); err != nil {
		t.Fatal(err)
	}
	// As if the disk were nearly full: more than its free space kept.
	p.diskReserve = int64(st.Bavail)*st.Bsize + 1<<30
	if _, err := p.Create(context.Background(), providers.Spec{}); !errors.Is(err, providers.ErrQuota) || !strings.Contains(err.Error(), "free") {
		t.Errorf("Create with the disk at its reserve: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := run(t, p, id, "head -c 1048576 /dev/zero > /workspace/f")
		if r.err == nil && r.code != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes go on with the host's disk at its reserve: exit %d, %v", r.code, r.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if note := p.TakeNote(id); !strings.Contains(note, "host's disk has only") {
		t.Errorf("note %q, want one naming the host's free space", note)
	}
}
