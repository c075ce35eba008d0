//go:build linux

package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// TestRunnersServeManyOperations checks that a machine's runners are
// reused: operations one after the other run under the same few runners
// (a command's parent is its runner), not under a new process each.
func TestRunnersServeManyOperations(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	ctx := context.Background()
	parents := map[string]int{}
	for range 12 {
		parents[strings.TrimSpace(mustRun(t, p, id, "echo $PPID"))]++
		if _, err := p.Stat(ctx, id, "/workspace"); err != nil {
			t.Fatal(err)
		}
		// As between two CLI calls: the init has read the runner's
		// word that it is free (its socket and the runner's pipe are
		// read apart) before the next operation comes; back to back
		// on a loaded machine, the next may come first and get a new
		// runner (CI saw 7 runners for 12 commands so).
		time.Sleep(50 * time.Millisecond)
	}
	// Mostly one or two runners, a few more on a loaded machine. A
	// runner per operation would be 12.
	if len(parents) > 6 {
		t.Errorf("12 commands ran under %d runners (%v); want them reused", len(parents), parents)
	}
}

// TestReusedRunnerKeepsOperationsApart checks what a reused runner must
// not carry from one operation to the next: a command's leftover, still
// writing to the output it inherited, never reaches a later operation's
// output, and keeps running (its output drained, never broken) while the
// runner serves others, background commands included.
func TestReusedRunnerKeepsOperationsApart(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	ctx := context.Background()
	// The leftover writes to its stdout and stderr every 10 ms and
	// counts its writes in a file, replaced whole each time (a read
	// between a truncation and its write would find it empty).
	mustRun(t, p, id, `(i=0; while :; do i=$((i+1)); echo "leak $i"; echo "leak $i" >&2; echo $i > /tmp/leftover.next; mv /tmp/leftover.next /tmp/leftover.count; sleep 0.01; done) & echo started`)
	mustRun(t, p, id, "until [ -s /tmp/leftover.count ]; do sleep 0.01; done")
	for i := range 20 {
		r := run(t, p, id, "echo mine "+strconv.Itoa(i)+"; echo err "+strconv.Itoa(i)+" >&2")
		if r.err != nil || r.stdout != "mine "+strconv.Itoa(i)+"\n" || r.stderr != "err "+strconv.Itoa(i)+"\n" {
			t.Fatalf("operation %d: stdout %q, stderr %q, %v; want its own output alone", i, r.stdout, r.stderr, r.err)
		}
		got, err := readAll(t, p, id, "/tmp/leftover.count")
		if err != nil || len(got) == 0 {
			t.Fatalf("read the leftover's count: %q, %v", got, err)
		}
	}
	if _, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "sleep 60", Background: true}); err != nil {
		t.Fatalf("background command: %v", err)
	}
	count := func() int {
		b, err := readAll(t, p, id, "/tmp/leftover.count")
		n, cerr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || cerr != nil {
			t.Fatalf("read the leftover's count: %q, %v, %v", b, err, cerr)
		}
		return n
	}
	before := count()
	time.Sleep(300 * time.Millisecond)
	if after := count(); after <= before {
		t.Errorf("the leftover stopped writing (%d, then %d): its output broke", before, after)
	}
}

// TestStoppedOrDeadRunnerReplaced checks that a runner a command stopped
// or killed while it waited for its next operation does not take one: the
// operation goes to another runner.
func TestStoppedOrDeadRunnerReplaced(t *testing.T) {
	tests := []struct{ name, signal string }{
		{"stopped", "STOP"},
		{"killed", "KILL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t)
			id := newSandbox(t, p, providers.Spec{})
			// $PPID is the runner, which is idle again by the time
			// the signal comes; the mark says that it came.
			// The mark is looked for from the host, which takes no
			// runner.
			runner := strings.TrimSpace(mustRun(t, p, id, `(sleep 0.3; kill -`+tc.signal+` $PPID; touch /workspace/signalled) >/dev/null 2>&1 & echo $PPID`))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for {
				if _, err := os.Stat(workspaceFile(p, id, "signalled")); err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("the runner was never signalled")
				}
				time.Sleep(20 * time.Millisecond)
			}
			for i := range 3 {
				var out strings.Builder
				res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "echo $PPID", Stdout: &out})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("operation %d after the runner was %s: %v, exit %d", i, tc.name, err, res.ExitCode)
				}
				if got := strings.TrimSpace(out.String()); got == runner {
					t.Errorf("operation %d ran under the %s runner %s", i, tc.name, runner)
				}
			}
		})
	}
}

// TestRunnersPerUser checks that operations of different users, one
// after the other, each run as their own user although runners are
// reused.
func TestRunnersPerUser(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	// user: uid; the default user is the invoking one (root's is root);
	// without subordinate ids the sandbox maps that id alone.
	me := strconv.Itoa(os.Getuid())
	users := map[string]string{"root": "0", "nobody": "65534", "": me}
	if !p.host().uids.ranged() {
		users = map[string]string{me: me, "": me}
	}
	for i := range 6 {
		for u, want := range users {
			if got := strings.TrimSpace(mustRun(t, p, id, "id -u", func(r *providers.ExecRequest) { r.User = u })); got != want {
				t.Fatalf("round %d, user %q: ran as uid %s, want %s", i, u, got, want)
			}
		}
	}
}

// TestStoppedRunnerDoesNotHoldItsCaller checks that a command that stops
// its own runner cannot keep its caller waiting past its timeout: the
// runner is killed once the caller gives up, and the machine serves the
// next operation.
func TestStoppedRunnerDoesNotHoldItsCaller(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	done := make(chan error, 1)
	go func() {
		_, err := p.Exec(context.Background(), id, providers.ExecRequest{Shell: "kill -STOP $PPID; sleep 100", Timeout: time.Second})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, providers.ErrTimeout) {
			t.Errorf("exec whose runner was stopped: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exec whose runner was stopped still waits 30 s after its 1 s timeout")
	}
	assertRuns(t, p, id, "the next operation")
}

// copyTestBinary copies this test binary into a test directory, written
// back to the disk and dropped from the page cache, and returns its path.
func copyTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.test")
	f, err := os.OpenFile(cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// Read back from the disk when it runs, as an installed binary is,
	// not from the pages its write left in the page cache.
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestUnmapCode checks that an idle init gives back the pages of its
// binary's code and constant data even when another process maps them
// too (the standby machine and the other machines run the same binary:
// MADV_PAGEOUT left those resident): after unmapCode, at most half of a
// process's resident read-only file pages are still resident, and the
// code still runs. What runs between the unmap and the count maps some
// back: the count itself, and under -race the race runtime's own thread
// (from a fourth locally to two fifths on a loaded CI host); a collection
// would add more, so there is none. An unmap that did nothing leaves
// them all.
// The process is a second one of this test binary, whose pages this one
// maps.
func TestUnmapCode(t *testing.T) {
	resident := func() int {
		smaps, err := os.ReadFile("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		total, readOnlyFile := 0, false
		for _, line := range strings.Split(string(smaps), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 5 && strings.Contains(f[0], "-"):
				readOnlyFile = len(f) >= 6 && f[4] != "0" && !strings.Contains(f[1], "w")
			case len(f) >= 2 && f[0] == "Rss:" && readOnlyFile:
				n, _ := strconv.Atoi(f[1])
				total += n
			}
		}
		return total
	}
	if os.Getenv("SANDBOX_TEST_UNMAP") == "1" {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		before := resident()
		unmapCode()
		after := resident()
		if after > before/2 {
			t.Errorf("resident read-only file pages: %d KiB before, %d KiB after; want at most half", before, after)
		}
		if got := strings.Repeat("ok", 2); got != "okok" {
			t.Errorf("code after the unmap: %q", got)
		}
		t.Logf("resident read-only file pages: %d KiB before, %d KiB after", before, after)
		return
	}
	exe := copyTestBinary(t)
	// This process maps every page of the copy too, as a standby
	// machine maps the code an idle sandbox's init ran.
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	shared, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(shared)
	sum := 0
	for i := 0; i < len(shared); i += os.Getpagesize() {
		sum += int(shared[i])
	}
	_ = sum
	cmd := exec.Command(exe, "-test.run", "^TestUnmapCode$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDBOX_TEST_UNMAP=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnmapCode") {
		t.Errorf("the unmap in a second process of the test binary: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestRunnerThreadsHardened: every thread of a runner that served an
// operation runs with no_new_privs and the seccomp filter, holds no
// capability and has an empty bounding set (the threads a runner reserves
// against a full pids limit are hardened with it, by the calls that apply
// to every thread; a runner's goroutines, and so its forks of commands,
// run on any of its threads);
// every thread of its machine's init (which installs no seccomp filter:
// it starts runners and switches networks) runs with no_new_privs.
func TestRunnerThreadsHardened(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	runner, rec := servingRunner(t, p, id)
	for _, proc := range []struct {
		name   string
		pid    int
		runner bool
	}{{"runner", runner, true}, {"init", rec.pid, false}} {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(proc.pid) + "/task")
		if err != nil {
			t.Fatal(err)
		}
		if proc.runner && len(tasks) <= reservedThreads {
			t.Errorf("the runner has %d threads, want more than the %d it reserves", len(tasks), reservedThreads)
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(proc.pid) + "/task/" + task.Name() + "/status")
			if err != nil {
				continue // the thread ended
			}
			want := map[string]string{"NoNewPrivs": "1"}
			if proc.runner {
				want["Seccomp"], want["CapEff"], want["CapPrm"], want["CapBnd"] = "2", "0000000000000000", "0000000000000000", "0000000000000000"
			}
			for field, v := range want {
				if got := statusLine(b, field); got != v {
					t.Errorf("%s %d thread %s: %s %q, want %q", proc.name, proc.pid, task.Name(), field, got, v)
				}
			}
		}
	}
}

// servingRunner runs a command in sandbox id and returns the host pid of
// the runner that ran it, and the sandbox's machine.
func servingRunner(t *testing.T, p *Provider, id string) (int, machineRecord) {
	t.Helper()
	nsPID := strings.TrimSpace(mustRun(t, p, id, "echo $PPID"))
	rec := runningMachine(t, p, id)
	// The runner is the init's child whose pid in the sandbox is nsPID.
	runners := hostProcesses("status", func(pid int, b []byte) bool {
		return statusLine(b, "PPid") == strconv.Itoa(rec.pid) && strings.HasSuffix(statusLine(b, "NSpid"), "\t"+nsPID)
	})
	if len(runners) != 1 {
		t.Fatalf("runners of the init %d with pid %s in the sandbox: %v, want one", rec.pid, nsPID, runners)
	}
	return runners[0], rec
}

// rootServingRunner is servingRunner in a new sandbox, for a test that
// looks into the machine's undumpable processes, which takes root: without
// it, the test logs that what takes root is covered by the root run.
func rootServingRunner(t *testing.T, what string) (runner int, rec machineRecord, ok bool) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Log(what + " takes root; covered by the root run in CI")
		return 0, machineRecord{}, false
	}
	p := newTestProvider(t)
	runner, rec = servingRunner(t, p, newSandbox(t, p, providers.Spec{}))
	return runner, rec, true
}

// TestIdleRunnerWaitsInPoller: a runner that served an operation waits
// for the next in the runtime's poller (a thread in epoll_pwait), not in
// a blocking receive on its socket to the init, which kept the runtime's
// monitor thread waking, every few tens of microseconds, between one
// operation and the next.
func TestIdleRunnerWaitsInPoller(t *testing.T) {
	runner, _, ok := rootServingRunner(t, "reading where another user's threads wait (/proc/PID/task/TID/syscall)")
	if !ok {
		return
	}
	var calls map[int]int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		calls = threadSyscalls(t, runner)
		if calls[unix.SYS_EPOLL_PWAIT] > 0 && calls[unix.SYS_RECVMSG] == 0 {
			return
		}
	}
	t.Fatalf("the idle runner's threads are in the system calls %v (number: threads), want one in epoll_pwait (%d) and none in recvmsg (%d)", calls, unix.SYS_EPOLL_PWAIT, unix.SYS_RECVMSG)
}

// threadSyscalls counts the threads of process pid by the system call
// each is in (/proc/PID/task/TID/syscall); a running thread counts as -1.
func threadSyscalls(t *testing.T, pid int) map[int]int {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[int]int{}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/syscall")
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			t.Fatal(err)
		}
		nr, err := strconv.Atoi(strings.Fields(string(b))[0])
		if err != nil {
			nr = -1 // "running"
		}
		calls[nr]++
	}
	return calls
}

// statusLine is the value of field in a /proc status file.
func statusLine(b []byte, field string) string {
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestCleanFileMappings: unmapCode takes the read-only private mappings
// of a file that hold no page of their own, and leaves the rest: one whose
// pages were written before it was made read-only (a loader's
// relocations; the race detector's runtime has such), writable ones,
// shared ones, anonymous ones.
func TestCleanFileMappings(t *testing.T) {
	mapping := func(header string, anon int) string {
		return header + "\nSize:                 16 kB\nRss:                  16 kB\nAnonymous:      " + strconv.Itoa(anon) + " kB\nSwap:                  0 kB\n"
	}
	smaps := mapping("00400000-00402000 r--p 00000000 fe:00 42    /bin/x", 0) +
		mapping("00402000-00500000 r-xp 00002000 fe:00 42    /bin/x", 0) +
		mapping("00500000-00600000 r--p 00100000 fe:00 42    /bin/x", 8) +
		mapping("00600000-00610000 rw-p 00200000 fe:00 42    /bin/x", 0) +
		mapping("00610000-00620000 r--s 00000000 fe:00 43    /dev/shm/y", 0) +
		mapping("7f0000000000-7f0000100000 r--p 00000000 00:00 0", 0) +
		mapping("7f0000100000-7f0000101000 r--p 00000000 fe:00 44    /lib/z.so", 0)
	want := [][2]uint64{{0x400000, 0x402000}, {0x402000, 0x500000}, {0x7f0000100000, 0x7f0000101000}}
	if got := cleanFileMappings(smaps); !slices.Equal(got, want) {
		t.Errorf("cleanFileMappings = %x, want %x", got, want)
	}
}
