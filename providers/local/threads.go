//go:build linux

package local

import (
	"runtime"
	"strconv"
	"sync"
)

// reservedThreads is how many idle OS threads the init (before it serves
// operations) and every runner (once its signal handling took its own)
// make the Go runtime keep. What blocks a thread for long is bounded: the
// init's signal handler, a runner's wait for its next operation, a relay
// whose caller reads slowly; everything that waits for as long as a
// command runs (a runner's wait for its command and the caller's end, its
// output relays, the drains of what commands left running) waits in the
// runtime's poller instead. The runtime takes an idle thread before
// it creates a new one. Their threads count towards the pids limit (see
// machinePidsAllowance).
const reservedThreads = 4

// reserveThreads starts n OS threads now and leaves them idle in the
// runtime's pool. The init and the runners live in the sandbox's pids
// cgroup: once a fork bomb fills it, the kernel refuses every new thread,
// and a Go program that cannot create one when it needs it aborts. With
// threads made beforehand, they keep relaying output, reporting exits and
// enforcing timeouts while the limit is full.
//
// Each goroutine locks itself to a thread and parks, so the runtime must
// start another thread for the next; unlocked again, they exit and their
// threads return to the pool, which the runtime never shrinks.
func reserveThreads(n int) {
	var started, release sync.WaitGroup
	release.Add(1)
	for range n {
		started.Add(1)
		go func() {
			runtime.LockOSThread()
			started.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	started.Wait()
	release.Done()
}

// machineProcs bounds how many threads the init and each runner run Go
// code on at once (GOMAXPROCS; otherwise one per host CPU). Their work
// (handing over operations, relaying output, which moves in splice and
// other system calls, during which the runtime hands the processor on)
// is light; with a second processor, every goroutine made ready woke a
// second thread to run it, and a cold `sandbox exec` paid for those
// wake-ups (bench/run.sh exec: 3 % with 2).
const machineProcs = 1

// machineEnv is the whole environment of an init or a runner: nothing of
// the host's, the runtime bounded to machineProcs, and slack, the timer
// slack of the commands it starts (see slack.go; left out when 0).
func machineEnv(slack int) []string {
	env := []string{"GOMAXPROCS=" + strconv.Itoa(machineProcs)}
	if slack > 0 {
		env = append(env, slackEnv+"="+strconv.Itoa(slack))
	}
	return env
}
