//go:build linux

package local

import (
	"runtime"
	"sync"
)

// reservedThreads is how many OS threads the init and every runner make
// the Go runtime start at once and keep. Each blocks in at most a handful
// of system calls at once (the relays of stdout and stderr, the wait for
// the command, the control pipe, the listener), and the runtime takes an
// idle thread before it creates a new one. Their threads count towards
// the pids limit (see machinePidsAllowance).
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
