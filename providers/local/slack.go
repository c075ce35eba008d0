//go:build linux

package local

import (
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The Go runtime's monitor thread wakes every 20 µs while any goroutine of
// the program runs, which the kernel's timer slack (50 µs unless set
// otherwise) stretches to a tenth of a millisecond or so. A machine's init
// and runners work in bursts of about a millisecond: that was some 40
// wake-ups per cold `sandbox exec` (30 in the runner, 12 in the init;
// perf trace), each a context switch on the CPUs that the command and the
// CLI run on. A thread's timer slack is the one its creator had, and the
// monitor is the runtime's first thread: the init and the runners are
// started from a thread whose slack is monitorSlack, so their monitors
// wake about ten times less often. (Their other threads take it too;
// their timers are timeouts of milliseconds and more.)
//
// What runs for the sandbox's user (every command) is started from a
// thread set back to the slack of the process that started the machine,
// which the init and the runners get in slackEnv: the command's timers
// are what they would have been.

// monitorSlack is the timer slack (ns) the init and the runners start with.
const monitorSlack = 1_000_000

// slackEnv names, in the environment of an init and of a runner, the timer
// slack (ns) of the commands they start.
const slackEnv = "SANDBOX_TIMER_SLACK"

// threadSlack is the calling thread's timer slack, in ns (0 if unknown).
func threadSlack() int {
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0
	}
	return ns
}

// commandSlack is the timer slack of the commands this init or runner
// starts (slackEnv; 0 if it is not set).
func commandSlack() int {
	ns, err := strconv.Atoi(os.Getenv(slackEnv))
	if err != nil || ns <= 0 {
		return 0
	}
	return ns
}

// startCommand forks and executes the user's command at path (its argv
// and environment from cfg) in cwd, with files as its descriptors, from a
// thread with the commands' timer slack.
func startCommand(path, cwd string, cfg *initConfig, files []uintptr, sys *syscall.SysProcAttr) (pid int, err error) {
	withSlack(commandSlack(), func() {
		pid, err = syscall.ForkExec(path, cfg.Argv, &syscall.ProcAttr{Dir: cwd, Env: cfg.Env, Files: files, Sys: sys})
	})
	return pid, err
}

// withSlack runs start, which starts a process, on a thread whose timer
// slack is ns, so that the process starts with it; the thread gets its own
// back afterwards. With ns 0, start runs as it is.
func withSlack(ns int, start func()) {
	if ns <= 0 {
		start()
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if was := threadSlack(); was != ns && unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(ns), 0, 0, 0) == nil {
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(was), 0, 0, 0)
	}
	start()
}
