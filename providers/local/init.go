//go:build linux

package local

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/internal/procs"
)

// initArgv0 is the marker that turns the binary into the sandbox init: the
// provider starts /proc/self/exe with it as argv[0].
const initArgv0 = "sandbox-local-init"

// MaybeRunInit runs the sandbox init (or the reaper that empties the
// trash, see discard) and exits when the process was started as one by
// this provider; otherwise it returns at once. The program's main
// calls it first thing, and so does TestMain of every test binary that uses
// the provider.
func MaybeRunInit() {
	if (len(os.Args) == 2 || len(os.Args) == 3) && os.Args[0] == reapArgv0 {
		spread := len(os.Args) == 3 && os.Args[2] == reapSpread
		os.Exit(runReaper(os.Args[1], os.NewFile(reaperLockFD, "trash lock"), spread))
	}
	if len(os.Args) != 1 || (os.Args[0] != initArgv0 && os.Args[0] != runnerArgv0) {
		return
	}
	procs.Default()
	if os.Args[0] == runnerArgv0 {
		// A runner's goroutines run on any of its threads: its
		// hardening holds on every thread (see harden), so a command
		// forked from any of them is confined alike, and a wake-up (its
		// next operation, its command's exit, the end of an output)
		// needs no hand-over to one particular thread.
		os.Exit(runRunner())
	}
	// Everything the init does happens on this thread: runners are
	// started from it and inherit its namespaces and (emptied) bounding
	// set.
	runtime.LockOSThread()
	os.Exit(runInit())
}

// runInit is the life of an init (a machine's, or a weak-mode
// operation's); it returns the exit code.
func runInit() int {
	ctl := os.NewFile(ctlFD, "control")
	status := os.NewFile(statusFD, "status")
	if ctl == nil || status == nil {
		fmt.Fprintln(os.Stderr, "sandbox init: started without its control pipes")
		return 125
	}
	// Nothing but stdio may reach the command: neither pipe, nor any
	// descriptor the host process left without close-on-exec.
	closeOnExecFrom(ctlFD)
	return runConfigured(ctl, status, nil)
}

// runConfigured reads an init's configuration from ctl and lives the life
// it says; sb is a claimed standby machine's init (see standby.go), which
// can only become a machine.
func runConfigured(ctl, status *os.File, sb *standby) int {
	rep := &reporter{w: status}
	ctlr := bufio.NewReader(ctl)
	cfg, err := readConfig(ctlr)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	switch {
	case cfg.Mode == modeMachine:
		return runMachine(&cfg, rep, ctlr, ctl, status, sb)
	case sb != nil:
		rep.setupFail(fmt.Errorf("a standby machine claimed for %q", cfg.Mode))
		return 125
	case cfg.Mode == modeStandby:
		// Its pipes go (runStandby holds their places at once): a
		// claim brings the ones it will use.
		ctl.Close()
		status.Close()
		return runStandby(&cfg)
	}
	if !cfg.Weak {
		rep.setupFail(errors.New("an operation outside a sandbox's machine"))
		return 125
	}
	reserveThreads(reservedThreads)
	abi, err := prepare(&cfg, weakSetup)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	rep.landlock = abi
	switch cfg.Mode {
	case modeExec:
		if cfg.Gated {
			if b, err := ctlr.ReadByte(); err != nil || b != startByte {
				rep.setupFail(errors.New("the host did not start the command"))
				return 125
			}
		}
		return runCommand(&cfg, rep)
	case modeFile:
		return serveFile(&cfg, rep, ctlr)
	}
	rep.setupFail(fmt.Errorf("unknown init mode %q", cfg.Mode))
	return 125
}

// closeOnExecFrom marks fd and every descriptor above it close-on-exec:
// nothing an init inherited but the operation's stdio may reach its
// command.
func closeOnExecFrom(fd int) {
	if err := unix.CloseRange(uint(fd), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for n := fd; n < 1024; n++ {
			unix.CloseOnExec(n)
		}
	}
}

// reporter writes status messages to the host.
type reporter struct {
	w        io.Writer
	landlock int
	// beforeLast, when set, runs once before the operation's last
	// line (any but Open and PID) is written.
	beforeLast func()
}

func (r *reporter) send(m statusMsg) {
	if r.beforeLast != nil && !m.Open && m.PID == 0 {
		f := r.beforeLast
		r.beforeLast = nil
		f()
	}
	m.Landlock = r.landlock
	_, _ = r.w.Write(appendFrame(nil, encodeStatus(&m)))
}

// setupFail reports a failure to build the sandbox.
func (r *reporter) setupFail(err error) {
	m := statusMsg{Err: err.Error(), Setup: true}
	var se *setupError
	if errors.As(err, &se) && se.unavailable {
		m.Kind = kindUnavailable
	}
	r.send(m)
}

// fail reports a failed operation, classified by its errno.
func (r *reporter) fail(err error) {
	kind, errno := kindOfErrno(err)
	r.send(statusMsg{Err: describeErr(err), Kind: kind, Errno: errno})
}

// describeErr drops the operation prefix of a *PathError: the host names
// the operation and the sandbox path itself.
func describeErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		if pe.Path == "" {
			return pe.Err.Error()
		}
		return pe.Path + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Old + " -> " + le.New + ": " + le.Err.Error()
	}
	return err.Error()
}

// defaultPath is PATH when neither the sandbox nor the request sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// resolveCommand checks the working directory and finds the program of
// cfg's command. ok false means that the command cannot start: code is
// the status to exit with, already reported.
func resolveCommand(cfg *initConfig, rep *reporter) (path, cwd string, code int, ok bool) {
	if len(cfg.Argv) == 0 {
		rep.setupFail(errors.New("empty command"))
		return "", "", 125, false
	}
	cwd = cfg.Cwd
	if cwd == "" {
		cwd = "/workspace"
	}
	if fi, err := os.Stat(cwd); err != nil {
		rep.fail(fmt.Errorf("working directory %s: %w", cwd, unwrapPath(err)))
		return "", "", 125, false
	} else if !fi.IsDir() {
		rep.send(statusMsg{Err: "working directory " + cwd + ": not a directory", Kind: kindInvalid, Errno: int(unix.ENOTDIR)})
		return "", "", 125, false
	}
	path, code = lookPath(cfg.Argv[0], envValue(cfg.Env, "PATH"), cwd)
	switch code {
	case 127:
		fmt.Fprintf(os.Stderr, "sandbox: %s: command not found\n", cfg.Argv[0])
		return "", "", exitWith(rep, code), false
	case 126:
		fmt.Fprintf(os.Stderr, "sandbox: %s: permission denied\n", cfg.Argv[0])
		return "", "", exitWith(rep, code), false
	}
	return path, cwd, 0, true
}

// execFailed reports a command that could not be executed (126, or 127
// for a program that vanished) and returns its status.
func execFailed(rep *reporter, argv0 string, err error) int {
	code := 126
	if errors.Is(err, syscall.ENOENT) {
		code = 127
	}
	fmt.Fprintf(os.Stderr, "sandbox: %s: %v\n", argv0, err)
	return exitWith(rep, code)
}

// runCommand starts the command of a weak-mode init in a new session,
// reaps every process until the command itself exits, kills what it left
// (there is no PID namespace to end with the init) and reports its status.
func runCommand(cfg *initConfig, rep *reporter) int {
	path, cwd, code, ok := resolveCommand(cfg, rep)
	if !ok {
		return code
	}
	fmt.Fprint(os.Stderr, weakBanner)
	pid, err := startCommand(path, cwd, cfg, []uintptr{0, 1, 2}, &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		return execFailed(rep, cfg.Argv[0], err)
	}
	status := reapWeak(pid, cfg.stop)
	killDescendants()
	return exitWith(rep, status)
}

// exitWith reports the command's exit status and returns it.
func exitWith(rep *reporter, status int) int {
	rep.send(statusMsg{Exit: &status})
	return status
}

// reap waits for every child until pid exits and returns its status as a
// shell reports it (128+signal for a killed command).
func reap(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 125
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// lookPath finds file the way a shell does: a name with a slash is used as
// given (relative to cwd); otherwise the first executable in pathList wins.
// The code is 127 when nothing was found and 126 when only non-executable
// candidates were.
func lookPath(file, pathList, cwd string) (string, int) {
	if file == "" {
		return "", 127
	}
	if strings.Contains(file, "/") {
		return file, 0
	}
	if pathList == "" {
		pathList = defaultPath
	}
	code := 127
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if unix.Access(p, unix.X_OK) == nil {
			return p, 0
		}
		code = 126
	}
	return "", code
}

// envValue returns the value of key in a KEY=VALUE list.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// unwrapPath strips the *PathError around err.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// prepare runs an init's setup steps in order (building its view of the
// sandbox, its network) and then hardens the process, returning the
// Landlock ABI in force. Cold inits and a holder's spares share it, so both
// paths end equally hardened.
func prepare(cfg *initConfig, steps ...func(*initConfig) error) (int, error) {
	for _, step := range steps {
		if err := step(cfg); err != nil {
			return 0, err
		}
	}
	return harden(cfg)
}
