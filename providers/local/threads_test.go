//go:build linux

package local

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// threadCount is this process's number of OS threads.
func threadCount(t *testing.T) int {
	t.Helper()
	return threadsOf(t, "self")
}

// threadsOf is the number of OS threads of the process pid ("self" for
// this one).
func threadsOf(t *testing.T, pid string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(statusLine(b, "Threads"))
	if err != nil {
		t.Fatalf("the Threads line of /proc/%s/status: %v", pid, err)
	}
	return n
}

// TestReserveThreads: the reserved threads exist once it returns and stay
// after their goroutines ended.
func TestReserveThreads(t *testing.T) {
	const n = 24
	reserveThreads(n)
	if got := threadCount(t); got < n {
		t.Fatalf("%d threads after reserving %d", got, n)
	}
	reserveThreads(1)
	if got := threadCount(t); got < n {
		t.Fatalf("%d threads once the reserving goroutines ended, want at least %d", got, n)
	}
}

// TestInitThreadsBounded: a machine's init serves many operations at once,
// and a storm of orphans to reap, without a thread blocked for each. (Where
// the init lives in the sandbox's pids limit, cgroup v2, a thread it had to
// make while a fork bomb filled the limit would fail, and the Go runtime
// would end the init, and with it the machine, for it.)
func TestInitThreadsBounded(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "true")
	pid := strconv.Itoa(runningMachine(t, p, id).pid)
	// Its runtime runs Go code on machineProcs threads at most, however
	// many CPUs the host has. (Only root may look into the undumpable
	// init.)
	want := "GOMAXPROCS=1\x00" + slackEnv + "=" + strconv.Itoa(threadSlack()) + "\x00"
	if env, err := os.ReadFile("/proc/" + pid + "/environ"); os.Geteuid() == 0 && (err != nil || string(env) != want) {
		t.Errorf("the init's environment: %q (%v); want %q alone", env, err, want)
	}
	before := threadsOf(t, pid)
	const ops = 32
	var wg sync.WaitGroup
	for i := range ops {
		wg.Go(func() {
			// Each leaves orphans behind, which the init reaps.
			run(t, p, id, fmt.Sprintf("for j in $(seq 20); do (sleep 0.01 &); done; touch /tmp/op%d; sleep 1", i))
		})
	}
	mustRun(t, p, id, fmt.Sprintf("until [ $(ls /tmp | grep -c '^op') -ge %d ]; do sleep 0.01; done", ops))
	during := threadsOf(t, pid)
	t.Logf("init threads: %d before, %d during", before, during)
	wg.Wait()
	// One per operation is a thread blocked for each. The runtime
	// starts a thread when one sat in a system call for long, which on
	// a loaded host any may: CI saw 7 more while 16 operations ran.
	if during >= before+ops/2 {
		t.Errorf("the init went from %d threads to %d while it served %d operations; want it to serve them on the threads it has", before, during, ops)
	}
}

// TestRunnerThreadsBounded: a runner keeps draining the output of what its
// commands left running, for any number of them, on the threads it has. A
// thread blocked for each would have to be made when the next command
// runs, which a full pids limit forbids.
func TestRunnerThreadsBounded(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	threads := func(pid string) int {
		n, err := strconv.Atoi(strings.TrimSpace(mustRun(t, p, id, "sed -n 's/^Threads:\\s*//p' /proc/"+pid+"/status")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	base := threads(strings.TrimSpace(mustRun(t, p, id, "echo $PPID")))
	// Each leaves a writer of its stdout and stderr behind.
	runners := map[string]int{}
	for range 8 {
		runners[strings.TrimSpace(mustRun(t, p, id, "(while sleep 0.05; do echo x; echo y >&2; done) & echo $PPID"))]++
	}
	for pid, n := range runners {
		if got := threads(pid); got > base+2 {
			t.Errorf("runner %s: %d threads after %d commands that left output to drain, %d at first", pid, got, n, base)
		}
	}
}
