package local

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// newPoolProvider is newTestProvider with pooled inits on; they go off
// again when the test function returns, before the cleanups delete its
// sandboxes (a delete's reaper would start one while the test directory
// is being removed).
func newPoolProvider(t *testing.T) (*Provider, func()) {
	t.Helper()
	p := newTestProvider(t)
	p.noPool = false
	return p, func() { p.noPool = true }
}

// startTestPool starts a pooled init for p, as a reaper would, and fails
// unless one was started.
func startTestPool(t *testing.T, p *Provider, idle time.Duration) int {
	t.Helper()
	pid := startPooled(filepath.Join(p.dir, poolDir), poolSockName(p.identity), idle)
	if pid == 0 {
		t.Fatal("no pooled init was started")
	}
	return pid
}

// poolSocket is the path of p's pooled init socket.
func poolSocket(p *Provider) string {
	return filepath.Join(p.dir, poolDir, poolSockName(p.identity))
}

// TestPooledInit: a new sandbox's first operation runs in the waiting
// pooled init, as hardened as a cold init, with a command line that names
// no host path; the init is used once, and the provider's reaper starts
// the next one.
func TestPooledInit(t *testing.T) {
	t.Parallel()
	p, off := newPoolProvider(t)
	defer off()
	pid := startTestPool(t, p, time.Minute)
	if startPooled(filepath.Join(p.dir, poolDir), poolSockName(p.identity), time.Minute) != 0 {
		t.Error("a second pooled init was started beside a waiting one")
	}
	id := newSandbox(t, p, providers.Spec{})
	probe := `tr '\0' ' ' </proc/1/cmdline; echo
grep -E '^(CapEff|NoNewPrivs):' /proc/1/status | awk '{print $2}' | tr '\n' ' '; echo
id -u; ls /`
	got := mustRun(t, p, id, probe)
	lines := strings.Split(got, "\n")
	if !strings.HasPrefix(lines[0], poolArgv0+" ") {
		t.Fatalf("PID 1 of the first operation is %q, want the pooled init", lines[0])
	}
	if strings.Contains(got, p.dir) {
		t.Errorf("the sandbox sees the state directory's path: %q", got)
	}
	if lines[1] != "0000000000000000 1 " {
		t.Errorf("PID 1's effective capabilities and no_new_privs: %q", lines[1])
	}
	cold := newTestProvider(t)
	cold.noPool = true
	coldID := newSandbox(t, cold, providers.Spec{})
	want := mustRun(t, cold, coldID, probe)
	if _, rest, _ := strings.Cut(want, "\n"); !strings.HasSuffix(got, rest) {
		t.Errorf("the pooled init's sandbox differs from a cold one's:\n%s\nwant (after the command line):\n%s", got, want)
	}
	waitGone(t, pid, 10*time.Second)
	if _, err := os.Lstat(poolSocket(p)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the used init's socket is still there: %v", err)
	}
	next := newSandbox(t, p, providers.Spec{})
	if got := mustRun(t, p, next, `tr '\0' ' ' </proc/1/cmdline`); got != initArgv0+" " {
		t.Errorf("with the pool empty, PID 1 is %q, want a cold init", got)
	}
	// The provider's reaper starts the next pooled init.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(poolSocket(p)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reaper started no pooled init")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPooledInitDiesWithItsCommand: SIGKILL of the process whose operation
// a pooled init runs (it has no parent-death signal: its parent is long
// gone) ends the init and everything the operation started.
func TestPooledInitDiesWithItsCommand(t *testing.T) {
	t.Parallel()
	p, off := newPoolProvider(t)
	defer off()
	pid := startTestPool(t, p, time.Minute)
	id := newSandbox(t, p, providers.Spec{})
	cmd := startHelper(t, p, id)
	if _, err := os.Lstat(poolSocket(p)); !errors.Is(err, fs.ErrNotExist) {
		_ = cmd.Process.Kill()
		t.Fatalf("the operation did not take the pooled init: its socket is still there (%v)", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitGone(t, pid, 10*time.Second)
	assertNoneSurvived(t, p, id, "cli")
}

// TestPooledInitIdleAndStale: an unused pooled init exits after its idle
// time and removes its socket; a socket nobody listens on any more is
// cleared by the next command, which runs cold, and a new pooled init can
// take the name.
func TestPooledInitIdleAndStale(t *testing.T) {
	t.Parallel()
	p, off := newPoolProvider(t)
	defer off()
	pid := startTestPool(t, p, 200*time.Millisecond)
	waitGone(t, pid, 10*time.Second)
	if _, err := os.Lstat(poolSocket(p)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the idle init left its socket: %v", err)
	}

	// A stale socket: bound, then its listener gone.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: poolSocket(p), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if startPooled(filepath.Join(p.dir, poolDir), poolSockName(p.identity), time.Minute) != 0 {
		t.Fatal("a pooled init was started over a socket that exists")
	}
	id := newSandbox(t, p, providers.Spec{})
	if got := mustRun(t, p, id, `tr '\0' ' ' </proc/1/cmdline`); got != initArgv0+" " {
		t.Errorf("with a stale socket, PID 1 is %q, want a cold init", got)
	}
	if _, err := os.Lstat(poolSocket(p)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale socket is still there: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(p.dir, poolDir))
	if len(entries) != 0 {
		t.Errorf("the pool directory holds %v", entries)
	}
	pid = startTestPool(t, p, time.Minute)
	if _, err := os.Lstat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Errorf("the new pooled init: %v", err)
	}
}

// TestPooledInitCgroups: where this process may manage cgroups (root in
// CI), a pooled init waits in cgroups of its own, so that the command that
// takes it does not pay for a move between cgroups; that command writes
// its sandbox's limits there and runs under them, and the cgroups go once
// the init has exited.
func TestPooledInitCgroups(t *testing.T) {
	t.Parallel()
	p, off := newPoolProvider(t)
	defer off()
	if p.cg.kind == cgroupNone || !p.cg.controllers["pids"] {
		t.Logf("no cgroup this user may manage (%s)", p.cg.describe())
		return
	}
	pid := startTestPool(t, p, time.Minute)
	dir := p.cg.dirOf("pids", poolPrefix+strconv.Itoa(pid))
	if got := readCg(t, filepath.Join(dir, "cgroup.procs")); got != strconv.Itoa(pid)+"\n" {
		t.Fatalf("the pooled init's cgroup holds %q, want only the init %d", got, pid)
	}
	id := newSandbox(t, p, providers.Spec{Resources: providers.Resources{Pids: 64}})
	done := make(chan result, 1)
	go func() {
		done <- run(t, p, id, "cat /proc/self/cgroup; touch /workspace/started; "+waitForGo)
	}()
	if !waitStarted(p, id) {
		t.Fatal("the command never started")
	}
	if got := readCg(t, filepath.Join(dir, "pids.max")); got != "64\n" {
		t.Errorf("pids.max of the pooled init's cgroup while its command runs = %q, want 64", got)
	}
	if got := readCg(t, filepath.Join(dir, "cgroup.procs")); strings.Count(got, "\n") < 2 {
		t.Errorf("the pooled init's cgroup while its command runs holds %q, want the init and the command", got)
	}
	if err := os.WriteFile(workspaceFile(p, id, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !strings.Contains(r.stdout, poolPrefix+strconv.Itoa(pid)) {
		t.Errorf("/proc/self/cgroup of the pooled init's command: %+v, want the init's own cgroup", r)
	}
	waitGone(t, pid, 10*time.Second)
	p.bg.wg.Wait()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the pooled init's cgroup outlived it: %v", err)
	}
}
