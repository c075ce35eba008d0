package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// holderPID returns the recorded holder of id, failing when none is.
func holderPID(t *testing.T, p *Provider, id string) int {
	t.Helper()
	rec, err := readHolderRecord(filepath.Join(p.dir, id))
	if err != nil {
		t.Fatalf("no holder recorded: %v", err)
	}
	return rec.pid
}

// waitGone waits until pid no longer exists.
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists after %v", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warmSandbox creates a sandbox and runs two commands, so that it has a
// holder, and returns its id.
func warmSandbox(t *testing.T, p *Provider, spec providers.Spec) string {
	t.Helper()
	id := newSandbox(t, p, spec)
	giveHolder(t, p, id)
	return id
}

// giveHolder runs commands in the new sandbox id until it has a holder and
// returns the holder's pid.
func giveHolder(t *testing.T, p *Provider, id string) int {
	t.Helper()
	mustRun(t, p, id, "true")
	if _, err := readHolderRecord(filepath.Join(p.dir, id)); err == nil {
		t.Fatal("the first operation started a holder")
	}
	// A second operation starts the holder, unless a cold operation
	// still holds the mount lock (or a process forked by a parallel test
	// shares its descriptor for a moment): then it runs cold too.
	for range 5 {
		mustRun(t, p, id, "true")
		if _, err := readHolderRecord(filepath.Join(p.dir, id)); err == nil {
			break
		}
	}
	return holderPID(t, p, id)
}

// TestHolderCoherence: while a holder runs, every operation — exec in the
// sandbox's network mode and in the other one, file writes and reads —
// goes through its one overlay mount, so each sees what the others wrote
// (two live overlay mounts of one upper layer would not).
func TestHolderCoherence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := warmSandbox(t, p, providers.Spec{})
	holder := holderPID(t, p, id)
	if r := run(t, p, id, "ls /usr/local/x"); r.err != nil || r.code == 0 {
		t.Fatalf("ls of a missing file: %+v", r)
	}
	on := func(r *providers.ExecRequest) { r.Network = providers.NetworkOn }
	if r := run(t, p, id, "touch /usr/local/x", on); r.err != nil || r.code != 0 {
		t.Fatalf("touch with the network on: %+v", r)
	}
	if r := run(t, p, id, "ls /usr/local/x"); r.err != nil || r.code != 0 {
		t.Errorf("a file created with the network on is not seen with it off: %+v", r)
	}
	writeString(t, p, id, "/usr/local/y", "from write")
	if got := mustRun(t, p, id, "cat /usr/local/y"); got != "from write" {
		t.Errorf("exec after WriteFile: %q", got)
	}
	mustRun(t, p, id, "echo from exec > /etc/z")
	if b, err := readAll(t, p, id, "/etc/z"); err != nil || string(b) != "from exec\n" {
		t.Errorf("ReadFile after exec: %q, %v", b, err)
	}
	if err := p.Remove(ctx, id, "/usr/local/x", false); err != nil {
		t.Fatal(err)
	}
	if r := run(t, p, id, "ls /usr/local/x", on); r.err != nil || r.code == 0 {
		t.Errorf("a removed file is still seen: %+v", r)
	}
	if again := holderPID(t, p, id); again != holder {
		t.Errorf("the holder changed from %d to %d", holder, again)
	}
}

func TestHolderReusedAndStoppedByDelete(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	first := giveHolder(t, p, id)
	if got := mustRun(t, p, id, "echo hi"); got != "hi\n" {
		t.Errorf("third exec: %q", got)
	}
	if again := holderPID(t, p, id); again != first {
		t.Errorf("third exec started holder %d, want the first one %d reused", again, first)
	}
	if err := p.Delete(context.Background(), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	waitGone(t, first, 5*time.Second)
	if _, err := os.Lstat(filepath.Join(p.dir, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox directory after Delete: %v", err)
	}
}

func TestHolderKilledIsReplaced(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := warmSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "echo kept > /workspace/f")
	first := holderPID(t, p, id)
	if err := unix.Kill(first, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, first, 5*time.Second)
	if got := mustRun(t, p, id, "cat /workspace/f"); got != "kept\n" {
		t.Errorf("exec after the holder died: %q", got)
	}
	if second := holderPID(t, p, id); second == first {
		t.Error("no new holder was recorded")
	}
}

func TestHolderConcurrentExecs(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := warmSandbox(t, p, providers.Spec{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			r := run(t, p, id, fmt.Sprintf("echo out%d; echo err%d >&2; exit %d", i, i, i%7))
			if r.err != nil || r.code != i%7 || r.stdout != fmt.Sprintf("out%d\n", i) || r.stderr != fmt.Sprintf("err%d\n", i) {
				t.Errorf("exec %d: %+v", i, r)
			}
		})
	}
	wg.Wait()
}

func TestHolderIdleExit(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	p.holderIdle = 300 * time.Millisecond
	id := warmSandbox(t, p, providers.Spec{})
	first := holderPID(t, p, id)
	waitGone(t, first, 10*time.Second)
	if _, err := readHolderRecord(filepath.Join(p.dir, id)); err == nil {
		t.Error("a retired holder left its record")
	}
	if got := mustRun(t, p, id, "echo again"); got != "again\n" {
		t.Errorf("exec after the idle exit: %q", got)
	}
}

// TestHolderEndsWithItsSandbox: a holder whose sandbox vanished without a
// Delete (its state directory removed) exits on its own.
func TestHolderEndsWithItsSandbox(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	pid := giveHolder(t, p, id)
	if err := os.Remove(filepath.Join(p.dir, id, metaFile)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 5*time.Second)
	if err := removeTree(filepath.Join(p.dir, id)); err != nil {
		t.Error(err)
	}
}

// TestHolderOperationHardened: the operation init a holder hands a command
// to (its PID 1) is hardened on every thread, and the holder itself is
// neither visible nor reachable from inside.
func TestHolderOperationHardened(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := warmSandbox(t, p, providers.Spec{})
	// Every thread of PID 1 has no capabilities and no_new_privs; the
	// thread that starts commands also has an empty bounding set (as in
	// a cold init: the bounding set only matters across an execve).
	got := mustRun(t, p, id, `
set -- /proc/1/task/*/status
for s in "$@" /proc/self/status; do
	grep -E '^(CapPrm|CapEff|CapAmb|NoNewPrivs):' "$s" | awk '{print $1, $2}'
done | sort -u
grep CapBnd /proc/1/status | awk '{print $1, $2}'
echo threads=$#
cat /proc/1/cmdline | tr '\0' ' '; echo`)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	want := []string{"CapAmb: 0000000000000000", "CapEff: 0000000000000000", "CapPrm: 0000000000000000", "NoNewPrivs: 1", "CapBnd: 0000000000000000"}
	if len(lines) < len(want)+2 || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("capabilities and no_new_privs of every thread:\n%s", got)
	}
	if !strings.HasPrefix(lines[len(want)], "threads=") || lines[len(want)] == "threads=1" {
		t.Errorf("no threads of PID 1 were checked: %s", lines[len(want)])
	}
	if !strings.HasPrefix(lines[len(want)+1], spareArgv0) {
		t.Errorf("PID 1 is %q, want the operation init", lines[len(want)+1])
	}
	if r := run(t, p, id, "kill -9 -1; echo ok"); r.err != nil {
		t.Errorf("kill -1: %+v", r)
	}
	if got := mustRun(t, p, id, "echo alive"); got != "alive\n" {
		t.Errorf("the sandbox after a kill -1: %q", got)
	}
	if r := run(t, p, id, "touch /x"); r.code == 0 {
		t.Error("the root is writable")
	}
}

// TestHolderTimeoutAndCancel: a timeout or a cancellation of an operation
// run by a holder's spare kills its whole process tree.
func TestHolderTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := warmSandbox(t, p, providers.Spec{})
	start := time.Now()
	r := run(t, p, id, "sleep 30 & sleep 30", func(r *providers.ExecRequest) { r.Timeout = 300 * time.Millisecond })
	if !errors.Is(r.err, providers.ErrTimeout) || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: %+v after %v", r, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "sleep 30"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
	if got := mustRun(t, p, id, "echo next"); got != "next\n" {
		t.Errorf("exec after a timeout: %q", got)
	}
}

// TestColdPath runs the essentials with holders off: the path of every
// first operation of a sandbox.
func TestColdPath(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	p.coldOnly = true
	id := newSandbox(t, p, providers.Spec{})
	for range 2 {
		if r := run(t, p, id, "exit 3"); r.err != nil || r.code != 3 {
			t.Errorf("exit 3: %+v", r)
		}
	}
	// The system layers are volatile overlays: a second cold mount of
	// the same work directories clears the first one's dirty marker and
	// sees what it wrote.
	mustRun(t, p, id, "echo kept > /etc/cold-marker")
	if got := mustRun(t, p, id, "cat /etc/cold-marker"); got != "kept\n" {
		t.Errorf("a file written by one cold command, read by the next: %q", got)
	}
	caps := mustRun(t, p, id, "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u; grep NoNewPrivs /proc/self/status | awk '{print $2}'")
	if caps != "0000000000000000\n1\n" {
		t.Errorf("caps and NNP: %q", caps)
	}
	if _, err := readHolderRecord(filepath.Join(p.dir, id)); err == nil {
		t.Error("the cold path started a holder")
	}
}

// TestHolderExitKillsBackground: a command run by a holder's spare leaves
// nothing behind, whether it exits or times out; the spare kills and reaps
// the rest of the operation before it reports, so Exec returns without
// waiting for the spare's own exit.
func TestHolderExitKillsBackground(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := warmSandbox(t, p, providers.Spec{})
	r := run(t, p, id, "setsid sh -c '"+waitForGo+"; touch /workspace/left' >/dev/null 2>&1 & ("+waitForGo+"; touch /workspace/sub) >/dev/null 2>&1 & exit 0")
	if r.err != nil || r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	r = run(t, p, id, "setsid sh -c '"+waitForGo+"; touch /workspace/late' >/dev/null 2>&1 & sleep 30",
		func(r *providers.ExecRequest) { r.Timeout = 300 * time.Millisecond })
	if !errors.Is(r.err, providers.ErrTimeout) {
		t.Fatalf("timeout: %+v", r)
	}
	assertNoneSurvived(t, p, id, "left", "sub", "late")
}

// TestEtcBase: the hostname (and, for root, the sanitized shadow files)
// come from one base layer shared by every sandbox: a new sandbox writes
// none of them into its own layer, a change made in one sandbox lands in
// its own layer only, and the base never changes.
func TestEtcBase(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	base, shadow := p.etcBaseDir()
	if base == "" {
		t.Fatal("no base layer for /etc")
	}
	if shadow != (p.uid == 0) {
		t.Errorf("base holds the shadow files: %v, want %v (uid %d)", shadow, p.uid == 0, p.uid)
	}
	a := newSandbox(t, p, providers.Spec{})
	b := newSandbox(t, p, providers.Spec{})
	check := "cat /etc/hostname"
	if shadow {
		check += "; cut -d: -f2 /etc/shadow | sort -u"
	}
	want := "sandbox\n"
	if shadow {
		want += "*\n"
	}
	if got := mustRun(t, p, a, check); got != want {
		t.Errorf("%s in a new sandbox: %q, want %q", check, got, want)
	}
	for _, name := range append([]string{"hostname"}, "shadow", "gshadow") {
		if _, err := os.Lstat(filepath.Join(p.dir, a, upperDir, "etc", name)); err == nil {
			t.Errorf("a new sandbox has its own /etc/%s", name)
		}
	}
	mustRun(t, p, a, "echo renamed > /etc/hostname")
	if got := mustRun(t, p, a, "cat /etc/hostname"); got != "renamed\n" {
		t.Errorf("changed hostname: %q", got)
	}
	if got := mustRun(t, p, b, "cat /etc/hostname"); got != "sandbox\n" {
		t.Errorf("another sandbox's hostname after the change: %q", got)
	}
	if got, err := os.ReadFile(filepath.Join(base, "hostname")); err != nil || string(got) != "sandbox\n" {
		t.Errorf("the base's hostname after the change: %q, %v", got, err)
	}
	// A second provider on the same state finds the same base.
	q, err := New(providers.Config{StateDir: filepath.Dir(p.dir)})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := q.etcBaseDir(); again != base {
		t.Errorf("second provider's base %q, want %q", again, base)
	}
}

// TestWorkSlotsAreShared: the overlay work directories belong to the
// provider, not to a sandbox: a new sandbox makes none, a busy slot is
// skipped for the next free one, a sandbox's upper layer keeps what the
// previous mount of a reused slot wrote, and a delete leaves the slots.
// Not parallel: a fork by another test holds a just-released slot lock
// until its child execs, and the slot numbers asserted here would move.
func TestWorkSlotsAreShared(t *testing.T) {
	p := newTestProvider(t)
	p.coldOnly = true
	a := newSandbox(t, p, providers.Spec{})
	entries, err := os.ReadDir(filepath.Join(p.dir, a))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{homeDirName, metaFile, upperDir, workspaceDir}; !slices.Equal(names, want) {
		t.Errorf("a new sandbox's directory holds %v, want %v", names, want)
	}
	mustRun(t, p, a, "echo a > /etc/slot-marker")
	// A command's init keeps its slot until it has exited, after the
	// command returned.
	p.bg.wg.Wait()

	// Slot 0 busy (as a running command or a holder holds it): the next
	// command, in another sandbox, takes slot 1.
	n, held, err := acquireSlot(p.dir, p.layers, p.spread)
	if err != nil || n != 0 {
		t.Fatalf("acquireSlot = %d, %v; want slot 0", n, err)
	}
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	b := info.ID
	if got := mustRun(t, p, b, "cat /etc/slot-marker 2>&1 || true"); !strings.Contains(got, "No such file") {
		t.Errorf("sandbox b sees a's file: %q", got)
	}
	if _, err := os.Stat(slotDir(p.dir, 1)); err != nil {
		t.Errorf("the command beside a busy slot 0 did not use slot 1: %v", err)
	}
	held.Close()
	p.bg.wg.Wait()

	// Slot 0 again, after b's mount there: a still has its file, and b's
	// writes stay b's.
	mustRun(t, p, b, "echo b > /etc/slot-marker")
	p.bg.wg.Wait()
	if got := mustRun(t, p, a, "cat /etc/slot-marker"); got != "a\n" {
		t.Errorf("a's file after b used the slots: %q", got)
	}
	if err := p.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(slotDir(p.dir, 0)); err != nil {
		t.Errorf("a delete removed the provider's slot: %v", err)
	}
	if _, err := os.Stat(slotDir(p.dir, 2)); err == nil {
		t.Error("sequential commands made a third slot")
	}
}

// TestWorkDirectoriesRetired: what a mount leaves in its work directory
// goes to the trash before the next mount, and the reaper Close starts
// removes it. Where the file system spreads directories (ext2/3/4: the
// provider directory and the work slots carry the top-directory flag),
// every mount gets a new work directory; elsewhere the same one keeps
// getting a new work/work.
func TestWorkDirectoriesRetired(t *testing.T) {
	p := newTestProvider(t)
	p.coldOnly = true
	id := newSandbox(t, p, providers.Spec{})
	layer := filepath.Join(slotDir(p.dir, 0), "usr")
	watched := layer
	if !p.spread {
		watched = filepath.Join(layer, "work")
	}
	var inodes []uint64
	for range 2 {
		mustRun(t, p, id, "true")
		p.bg.wg.Wait()
		var st unix.Stat_t
		if err := unix.Stat(watched, &st); err != nil {
			t.Fatal(err)
		}
		inodes = append(inodes, st.Ino)
	}
	if inodes[0] == inodes[1] {
		t.Errorf("%s is the same directory after a second mount (spread %v)", watched, p.spread)
	}
	if p.spread {
		for _, d := range []string{p.dir, slotDir(p.dir, 0)} {
			fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
			unix.Close(fd)
			if err != nil || flags&topDirFlag == 0 {
				t.Errorf("%s: flags %#x, %v; want the top-directory flag", d, flags, err)
			}
		}
		entries, _ := os.ReadDir(slotDir(p.dir, 0))
		if len(entries) != len(p.layers) {
			t.Errorf("the slot holds %d entries, want one per layer (%d): a new work directory was left beside its layer's", len(entries), len(p.layers))
		}
	}
	if left := trashEntries(filepath.Join(p.dir, trashDir)); len(left) == 0 {
		t.Error("the retired work directories are not in the trash")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitTrashEmpty(t, p)
}
