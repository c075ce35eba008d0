//go:build linux

package local

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// runnerArgv0 marks a runner: a process the machine init starts inside the
// sandbox, hardened before it gets anything to do, that runs one operation
// (a command, or a file operation) handed to it by the init.
const runnerArgv0 = "sandbox-local-runner"

// The machine init's descriptors after control (3) and status (4).
const (
	// machineListenFD is the listening socket the host created.
	machineListenFD = 5
	// machineSlotFD is the locked work-directory slot of the sandbox's
	// overlays, held for the machine's whole life.
	machineSlotFD = 6
	// machineDirFD is the sandbox's state directory on the host: the
	// init keeps it after the pivot, for its lock and the logs of
	// background commands; nothing inside the sandbox can name it.
	machineDirFD = 7
)

// runnerFD is a runner's socket to the init; opFDs is the number of
// descriptors of one operation (control, status, stdin, stdout, stderr).
const (
	runnerFD = 3
	opFDs    = 5
)

// runnerReady is what a runner knows once it has hardened itself.
type runnerReady struct {
	landlock int
}

// Machine requests.
const (
	reqRun  = "run"  // one operation, with its five descriptors
	reqStop = "stop" // end every process and the machine
	reqPs   = "ps"   // list the machine's processes
	reqKill = "kill" // signal one process
	reqLogs = "logs" // the output of a background command, as a descriptor
)

// machineRequest is one request to a machine init, after a 4-byte
// big-endian length, with the descriptors of a run attached as
// SCM_RIGHTS.
type machineRequest struct {
	Version int    `json:"version"`
	Op      string `json:"op"`
	// Shared asks for a runner in the host's network; Any takes one in
	// the sandbox's own mode (file operations use no network).
	Shared bool `json:"shared,omitempty"`
	Any    bool `json:"any,omitempty"`
	// Background runs the command detached, its output into a log
	// that logs reads.
	Background bool `json:"background,omitempty"`
	// PID and Signal are kill's and logs' process; Follow makes logs
	// report the end of the process.
	PID    int  `json:"pid,omitempty"`
	Signal int  `json:"signal,omitempty"`
	Follow bool `json:"follow,omitempty"`
	// GraceNS is how long stop waits after SIGTERM before SIGKILL.
	GraceNS int64 `json:"grace_ns,omitempty"`
}

// machineReply is a line from the init to a client: for a run, Started
// once the operation was handed to a runner (before it, nothing ran and
// the client may try again), then Exit (the runner's wait status) or Err;
// for the other requests their answer.
type machineReply struct {
	Started bool                `json:"started,omitempty"`
	Exit    string              `json:"exit,omitempty"`
	Err     string              `json:"err,omitempty"`
	Setup   bool                `json:"setup,omitempty"`
	Kind    string              `json:"kind,omitempty"`
	Procs   []providers.Process `json:"procs,omitempty"`
	// Done ends a stop, a kill or a logs request; Code is a
	// background command's exit status once it ended.
	Done bool `json:"done,omitempty"`
	Code *int `json:"code,omitempty"`
}

// machineVersion changes whenever the machine's protocol or the runners'
// setup change meaning; it is part of the init's socket name.
const machineVersion = 1

// maxMachineRequest bounds the size of one request.
const maxMachineRequest = 1 << 16

// stopGrace is how long a stop waits for processes to end after SIGTERM.
const stopGrace = 3 * time.Second

// machineTick is how often an idle machine checks its auto-stop.
const machineTick = 500 * time.Millisecond

// spareIdle is how long a machine without operations keeps its prepared
// runners: an idle sandbox then holds the init alone.
const spareIdle = 30 * time.Second

// machine is the state of a running machine init.
type machine struct {
	cfg  *initConfig
	ln   *net.UnixListener
	dir  *os.File // the sandbox's state directory on the host
	idle time.Duration
	uid  int
	// nets start processes in the host's network (true) and in the
	// sandbox's own (false).
	nets map[bool]*netStarter

	mu       sync.Mutex
	active   int
	last     time.Time
	stopping bool
	spares   map[bool]*spare    // the next runner of each network mode
	children map[int]*child     // runners by pid, until reaped
	bg       map[int]*bgCommand // background commands by pid
	done     chan struct{}
	doneOnce sync.Once
	// diskOver says that the disk quota's cut-off lasts (see watchDisk).
	diskOver atomic.Bool
}

// finish ends serve: the machine has stopped.
func (m *machine) finish() {
	m.doneOnce.Do(func() { close(m.done) })
}

// child is a runner the init started.
type child struct {
	proc   *os.Process
	status unix.WaitStatus
	exited chan struct{}
}

// bgCommand is a command run in the background: its runner became it.
type bgCommand struct {
	started time.Time
	c       *child
}

// runMachine is the machine's whole life: it builds the sandbox (its root,
// mounts and network), pivots into it, hardens itself with the sandbox's
// Landlock domain (which every process of the sandbox then shares, so that
// they may signal each other and reach each other's abstract sockets),
// reports readiness, and hands operations to runners until it is stopped,
// idle for its auto-stop interval, or killed. It is PID 1 of the sandbox's
// PID namespace: its exit ends every process of the sandbox.
func runMachine(cfg *initConfig, rep *reporter, ctl, status *os.File) int {
	// Nothing in the sandbox may read this process's memory or
	// descriptors, nor end it with a signal.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		rep.setupFail(fmt.Errorf("non-dumpable: %w", err))
		return 125
	}
	ignoreSignals()
	reaped := make(chan os.Signal, 64)
	signal.Notify(reaped, unix.SIGCHLD)

	m := &machine{cfg: cfg, idle: time.Duration(cfg.IdleNS), uid: os.Getuid(), last: time.Now(),
		spares: map[bool]*spare{}, children: map[int]*child{}, bg: map[int]*bgCommand{}, done: make(chan struct{})}
	m.dir = os.NewFile(machineDirFD, "state")
	lf := os.NewFile(machineListenFD, "listener")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		rep.setupFail(fmt.Errorf("machine socket: %w", err))
		return 125
	}
	ln, ok := l.(*net.UnixListener)
	if !ok {
		rep.setupFail(errors.New("machine socket is not a Unix socket"))
		return 125
	}
	ln.SetUnlinkOnClose(false)
	m.ln = ln
	// The binary, for the runners: named through /proc/self/fd once
	// the host's tree is gone.
	exe, err := unix.Open("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		rep.setupFail(fmt.Errorf("open the init's binary: %w", err))
		return 125
	}
	cfg.exeFD = exe
	if err := buildRoot(cfg); err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		rep.setupFail(fmt.Errorf("set hostname: %w", err))
		return 125
	}
	if cfg.DefaultUser != "" {
		if err := ensureUser(cfg.DefaultUser); err != nil {
			rep.setupFail(fmt.Errorf("the sandbox's user: %w", err))
			return 125
		}
	}
	m.nets = map[bool]*netStarter{true: {}}
	private, err := newPrivateNet()
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	m.nets[false] = private
	abi, err := applyLandlock(cfg)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	rep.landlock = abi
	go m.reap(reaped)
	if cfg.Limits.Disk > 0 {
		go m.watchDisk(diskQuota{limit: int64(cfg.Limits.Disk), reserve: int64(cfg.Limits.DiskReserve), grace: diskGrace})
	}
	m.spares[cfg.SharedNet] = m.startSpare(cfg.SharedNet)
	rep.send(statusMsg{Done: true})
	status.Close()
	ctl.Close()
	return m.serve()
}

// ignoreSignals makes every signal that would end or stop the init
// ignored: as PID 1 of its namespace it only receives, from inside, the
// signals it handles, and the Go runtime handles most of them. The
// synchronous ones (SEGV, BUS, FPE, ILL) too: the runtime ignores them
// when kill(2) sends them, and still panics on a real fault.
func ignoreSignals() {
	signal.Ignore(unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGUSR1, unix.SIGUSR2,
		unix.SIGPIPE, unix.SIGALRM, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGXCPU, unix.SIGXFSZ,
		unix.SIGVTALRM, unix.SIGPROF, unix.SIGIO, unix.SIGPWR, unix.SIGSYS, unix.SIGTRAP, unix.SIGABRT,
		unix.SIGSTKFLT, unix.SIGWINCH, unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL)
}

// reap waits for every child of the init: its runners, whose status it
// records, and every orphan of the sandbox, which PID 1 inherits.
func (m *machine) reap(wake <-chan os.Signal) {
	for range wake {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			m.mu.Lock()
			c := m.children[pid]
			delete(m.children, pid)
			m.mu.Unlock()
			if c != nil {
				c.status = ws
				close(c.exited)
				_ = c.proc.Release()
			}
		}
	}
}

// serve accepts requests until the machine stops.
func (m *machine) serve() int {
	go func() {
		for {
			c, err := m.ln.AcceptUnix()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			m.mu.Lock()
			if m.stopping {
				m.mu.Unlock()
				c.Close()
				continue
			}
			m.active++
			m.mu.Unlock()
			go m.handle(c)
		}
	}()
	t := time.NewTicker(machineTick)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return 0
		case <-t.C:
		}
		m.mu.Lock()
		quiet := m.active == 0
		idleFor := time.Since(m.last)
		m.mu.Unlock()
		if quiet && idleFor >= spareIdle {
			m.dropSpares()
		}
		if m.idle <= 0 {
			continue
		}
		if quiet && idleFor >= m.idle && m.retire(false) {
			m.shutdown(stopGrace)
			return 0
		}
	}
}

// retire unlinks the init's socket and record, under the lock clients
// take to start a machine, unless an operation arrived meanwhile; with
// force (a stop the host asked for, holding that lock) it retires at
// once. A client that connected just before sees the connection end
// without a Started reply and tries again with a new machine.
func (m *machine) retire(force bool) bool {
	// A stop asked by the host comes from a holder of the lock.
	if !force {
		lock, err := openAt(m.dir, machineLock, os.O_RDWR|os.O_CREATE)
		if err == nil {
			defer lock.Close()
			for unix.Flock(int(lock.Fd()), unix.LOCK_EX) == unix.EINTR {
			}
		}
	}
	m.mu.Lock()
	if !force && m.active > 0 {
		m.mu.Unlock()
		return false
	}
	m.stopping = true
	m.mu.Unlock()
	if b, err := readAt(m.dir, machinePidFile); err == nil {
		var pid int
		if _, err := fmt.Sscanf(string(b), "%d", &pid); err == nil && pid == m.cfg.HostPID {
			_ = unix.Unlinkat(int(m.dir.Fd()), machinePidFile, 0)
			_ = unix.Unlinkat(int(m.dir.Fd()), machineSockName(m.cfg.Identity), 0)
		}
	}
	m.ln.Close()
	return true
}

// shutdown ends every process of the sandbox but the runners: SIGTERM,
// then SIGKILL after grace; then waits a moment for the runners, which
// report their commands' ends meanwhile. The init's exit kills whatever
// is left.
func (m *machine) shutdown(grace time.Duration) {
	m.mu.Lock()
	m.stopping = true
	for mode, sp := range m.spares {
		if sp != nil {
			sp.kill()
		}
		delete(m.spares, mode)
	}
	m.mu.Unlock()
	m.killOthers(unix.SIGTERM, grace)
	m.killOthers(unix.SIGKILL, time.Second)
	end := time.Now().Add(2 * time.Second)
	for time.Now().Before(end) {
		m.mu.Lock()
		n := len(m.children)
		m.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killOthers signals the sandbox's processes (see signalOthers) until
// none is left or wait has passed.
func (m *machine) killOthers(sig unix.Signal, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for m.signalOthers(sig) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// signalOthers sends sig to every process of the sandbox but the init and
// its runners still running an operation, and returns how many it
// signalled.
func (m *machine) signalOthers(sig unix.Signal) int {
	m.mu.Lock()
	skip := map[int]bool{1: true}
	for pid := range m.children {
		if _, isBG := m.bg[pid]; !isBG {
			skip[pid] = true
		}
	}
	m.mu.Unlock()
	n := 0
	for _, pid := range procPIDs() {
		if skip[pid] {
			continue
		}
		if unix.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// procPIDs lists the processes of the init's PID namespace.
func procPIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// openAt opens name in the directory dir.
func openAt(dir *os.File, name string, flag int) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, flag|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readAt reads the file name in the directory dir.
func readAt(dir *os.File, name string) ([]byte, error) {
	f, err := openAt(dir, name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// spare is one runner, started and (once ready) hardened, waiting for its
// operation.
type spare struct {
	c     *child
	sock  *os.File   // init's end of the socket pair
	ready chan error // receives nil once ready, or why it failed
}

// startSpare starts a runner in the network of the mode asked for.
func (m *machine) startSpare(shared bool) *spare {
	sp := &spare{ready: make(chan error, 1)}
	fail := func(err error) *spare {
		sp.ready <- err
		return sp
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("runner socket: %w", err))
	}
	sp.sock = os.NewFile(uintptr(fds[0]), "runner")
	peer := os.NewFile(uintptr(fds[1]), "init")
	cfg := *m.cfg
	cfg.Mode = modeSpare
	cfg.SharedNet = shared
	cfg.IdleNS = 0
	line, err := json.Marshal(&cfg)
	if err != nil {
		peer.Close()
		return fail(err)
	}
	attr := &os.ProcAttr{
		Env:   []string{},
		Files: []*os.File{nil, nil, nil, peer},
		Sys:   &syscall.SysProcAttr{},
	}
	if m.uid != 0 {
		attr.Sys.AmbientCaps = initAmbientCaps()
	}
	c, err := m.start(shared, attr)
	peer.Close()
	if err != nil {
		sp.sock.Close()
		return fail(fmt.Errorf("start a runner: %w", err))
	}
	sp.c = c
	go func() {
		if _, err := sp.sock.Write(append(line, '\n')); err != nil {
			sp.ready <- fmt.Errorf("configure a runner: %w", err)
			return
		}
		var msg statusMsg
		if err := json.NewDecoder(sp.sock).Decode(&msg); err != nil {
			sp.ready <- errors.New("the sandbox's runner ended while it was being prepared")
			return
		}
		if !msg.Done {
			sp.ready <- &spareError{msg}
			return
		}
		sp.ready <- nil
	}()
	return sp
}

// start starts the binary as a runner in the network of the mode shared,
// and records it as the init's child.
func (m *machine) start(shared bool, attr *os.ProcAttr) (*child, error) {
	// Registered before the reaper may see it: it holds the lock.
	m.mu.Lock()
	defer m.mu.Unlock()
	proc, err := m.nets[shared].startProcess("/proc/self/exe", []string{runnerArgv0}, attr)
	if err != nil {
		return nil, err
	}
	c := &child{proc: proc, exited: make(chan struct{})}
	m.children[proc.Pid] = c
	return c, nil
}

// spareError is a runner's report of a failure to harden itself.
type spareError struct{ m statusMsg }

func (e *spareError) Error() string { return e.m.Err }

// take returns a ready runner for the mode asked for (starting one if
// none is prepared) and the mode it took. Its successor is started by
// replenish once the operation started, so that preparing it does not
// compete with the operation's start for the CPU.
func (m *machine) take(req machineRequest) (*spare, bool, error) {
	mode := req.Shared
	if req.Any {
		mode = m.cfg.SharedNet
	}
	for attempt := 0; ; attempt++ {
		m.mu.Lock()
		sp := m.spares[mode]
		delete(m.spares, mode)
		m.mu.Unlock()
		if sp == nil {
			sp = m.startSpare(mode)
		}
		err := <-sp.ready
		if err == nil {
			select {
			case <-sp.c.exited:
				err = errors.New("the prepared runner died")
			default:
				if m.diskOver.Load() {
					confineFilesOf(sp.c.proc.Pid, true)
				}
				return sp, mode, nil
			}
		}
		sp.kill()
		var se *spareError
		if errors.As(err, &se) || attempt > 0 {
			return nil, mode, err
		}
	}
}

// replenish prepares the next runner of mode unless one is, or the
// machine is stopping.
func (m *machine) replenish(mode bool) {
	m.mu.Lock()
	if m.spares[mode] != nil || m.stopping {
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	sp := m.startSpare(mode)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.spares[mode] != nil || m.stopping {
		sp.kill()
		return
	}
	m.spares[mode] = sp
}

// dropSpares ends the prepared runners of an idle machine and returns the
// init's free memory to the host; the next operation starts a runner.
func (m *machine) dropSpares() {
	m.mu.Lock()
	dropped := len(m.spares) > 0
	for mode, sp := range m.spares {
		if sp != nil {
			sp.kill()
		}
		delete(m.spares, mode)
	}
	m.mu.Unlock()
	if dropped {
		debug.FreeOSMemory()
	}
}

// kill ends a runner and releases it.
func (sp *spare) kill() {
	if sp.c != nil {
		_ = sp.c.proc.Signal(syscall.SIGKILL)
	}
	if sp.sock != nil {
		sp.sock.Close()
	}
}

// handle answers one connection.
func (m *machine) handle(c *net.UnixConn) {
	release := sync.OnceFunc(func() {
		m.mu.Lock()
		m.active--
		m.last = time.Now()
		m.mu.Unlock()
	})
	defer release()
	defer c.Close()
	reply := func(r machineReply) {
		b, _ := json.Marshal(r)
		_, _ = c.Write(append(b, '\n'))
	}
	if err := checkPeer(c, m.uid); err != nil {
		reply(machineReply{Err: err.Error(), Setup: true})
		return
	}
	req, files, err := readMachineRequest(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		reply(machineReply{Err: "machine: " + err.Error(), Setup: true})
		return
	}
	switch req.Op {
	case reqRun:
		m.run(c, req, files, reply, release)
		files = nil
	case reqStop:
		m.retire(true)
		grace := time.Duration(req.GraceNS)
		if grace <= 0 {
			grace = stopGrace
		}
		m.shutdown(grace)
		reply(machineReply{Done: true})
		m.finish()
	case reqPs:
		reply(machineReply{Procs: m.processes(), Done: true})
	case reqKill:
		if err := m.signal(req.PID, unix.Signal(req.Signal)); err != nil {
			reply(machineReply{Err: err.Error(), Kind: kindNotFound})
			return
		}
		reply(machineReply{Done: true})
	case reqLogs:
		m.logs(c, req, reply)
	default:
		reply(machineReply{Err: fmt.Sprintf("unknown request %q", req.Op), Setup: true})
	}
}

// run hands one operation to a runner and reports its end.
func (m *machine) run(c *net.UnixConn, req machineRequest, files []*os.File, reply func(machineReply), release func()) {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) != opFDs {
		reply(machineReply{Err: fmt.Sprintf("machine: got %d descriptors, want %d", len(files), opFDs), Setup: true})
		return
	}
	sp, mode, err := m.take(req)
	if err != nil {
		r := machineReply{Err: err.Error(), Setup: true}
		var se *spareError
		if errors.As(err, &se) {
			r.Kind = se.m.Kind
		}
		reply(r)
		return
	}
	go m.replenish(mode)
	pid := sp.c.proc.Pid
	if req.Background {
		log, err := m.openLog(pid)
		if err != nil {
			sp.kill()
			reply(machineReply{Err: "background command: " + err.Error(), Setup: true})
			return
		}
		files[3].Close()
		files[4].Close()
		files[3], files[4] = log, log
		m.mu.Lock()
		m.bg[pid] = &bgCommand{started: time.Now(), c: sp.c}
		m.mu.Unlock()
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	err = unix.Sendmsg(int(sp.sock.Fd()), []byte{'G'}, unix.UnixRights(fds...), nil, 0)
	for _, f := range files {
		f.Close()
	}
	files = files[:0]
	sp.sock.Close()
	if err != nil {
		sp.kill()
		<-sp.c.exited
		reply(machineReply{Err: "hand the operation to its runner: " + err.Error(), Setup: true})
		return
	}
	reply(machineReply{Started: true})
	// A file operation ends with its client: the end of the client's
	// side (a cancellation, a dead CLI) kills it at once. A command's
	// runner watches its control pipe instead, and may outlive the
	// client to keep the outputs of what the command left running.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(gone)
	}()
	select {
	case <-sp.c.exited:
		reply(machineReply{Exit: exitString(sp.c.status)})
	case <-gone:
		if req.Any {
			sp.kill()
		}
	}
	release()
}

// exitString describes a wait status as os.ProcessState does.
func exitString(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		return "signal: " + ws.Signal().String()
	}
	return "unknown status"
}

// exitCode is a wait status as a shell reports it.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// logName is the log of the background command pid in the state
// directory.
func logName(pid int) string { return logsDir + "/" + strconv.Itoa(pid) + ".log" }

// openLog creates the log of the background command pid.
func (m *machine) openLog(pid int) (*os.File, error) {
	_ = unix.Mkdirat(int(m.dir.Fd()), logsDir, 0o700)
	return openAt(m.dir, logName(pid), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND)
}

// logs sends the log of a background command as a descriptor; with Follow
// it then waits for the command's end and reports its status.
func (m *machine) logs(c *net.UnixConn, req machineRequest, reply func(machineReply)) {
	m.mu.Lock()
	b := m.bg[req.PID]
	m.mu.Unlock()
	if b == nil {
		reply(machineReply{Err: fmt.Sprintf("no background command with pid %d in this sandbox (logs are kept for commands started with exec --background since the sandbox last started)", req.PID), Kind: kindNotFound})
		return
	}
	f, err := openAt(m.dir, logName(req.PID), os.O_RDONLY)
	if err != nil {
		reply(machineReply{Err: "open the log: " + err.Error()})
		return
	}
	defer f.Close()
	var code *int
	select {
	case <-b.c.exited:
		n := exitCode(b.c.status)
		code = &n
	default:
	}
	body, _ := json.Marshal(machineReply{Started: true, Code: code})
	if _, _, err := c.WriteMsgUnix(append(body, '\n'), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return
	}
	if code != nil || !req.Follow {
		return
	}
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(gone)
	}()
	select {
	case <-b.c.exited:
		n := exitCode(b.c.status)
		reply(machineReply{Done: true, Code: &n})
	case <-gone:
	}
}

// processes lists the sandbox's processes: every one but the init and the
// runners of foreground operations, and the background commands that
// ended since the machine started.
func (m *machine) processes() []providers.Process {
	m.mu.Lock()
	hide := map[int]bool{1: true}
	for pid := range m.children {
		if m.bg[pid] == nil {
			hide[pid] = true
		}
	}
	type ended struct {
		pid  int
		b    *bgCommand
		code int
	}
	var done []ended
	for pid, b := range m.bg {
		select {
		case <-b.c.exited:
			done = append(done, ended{pid, b, exitCode(b.c.status)})
		default:
		}
	}
	bgs := make(map[int]bool, len(m.bg))
	for pid := range m.bg {
		bgs[pid] = true
	}
	m.mu.Unlock()
	boot := bootTime()
	var out []providers.Process
	for _, pid := range procPIDs() {
		if hide[pid] {
			continue
		}
		p, ok := readProcess(pid, boot)
		if !ok {
			continue
		}
		p.Background = bgs[pid]
		out = append(out, p)
	}
	for _, d := range done {
		code := d.code
		out = append(out, providers.Process{PID: d.pid, State: "exited", Started: d.b.started, Background: true, ExitCode: &code})
	}
	slices.SortFunc(out, func(a, b providers.Process) int { return a.PID - b.PID })
	return out
}

// bootTime is the host's boot time, from /proc/stat.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}

// clockTicks is USER_HZ, the unit of the start times in /proc/pid/stat.
const clockTicks = 100

// readProcess describes the process pid from /proc.
func readProcess(pid int, boot time.Time) (providers.Process, bool) {
	base := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(base + "/stat")
	if err != nil {
		return providers.Process{}, false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	j := strings.IndexByte(s, '(')
	if i < 0 || j < 0 || j > i {
		return providers.Process{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return providers.Process{}, false
	}
	p := providers.Process{PID: pid, State: f[0], Name: s[j+1 : i]}
	p.PPID, _ = strconv.Atoi(f[1])
	if ticks, err := strconv.ParseUint(f[19], 10, 64); err == nil && !boot.IsZero() {
		p.Started = boot.Add(time.Duration(ticks) * time.Second / clockTicks).UTC().Truncate(time.Second)
	}
	if cmd, err := os.ReadFile(base + "/cmdline"); err == nil {
		p.Argv = strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		if len(p.Argv) == 1 && p.Argv[0] == "" {
			p.Argv = nil
		}
	}
	var st unix.Stat_t
	if unix.Stat(base, &st) == nil {
		p.UID = int(st.Uid)
	}
	return p, true
}

// signal sends sig to one process of the sandbox: never to the init, nor
// to a runner of a foreground operation (its command is the target).
func (m *machine) signal(pid int, sig unix.Signal) error {
	m.mu.Lock()
	c := m.children[pid]
	isBG := m.bg[pid] != nil
	m.mu.Unlock()
	if pid <= 1 || c != nil && !isBG {
		return fmt.Errorf("no process with pid %d in this sandbox", pid)
	}
	if sig == 0 {
		sig = unix.SIGTERM
	}
	if err := unix.Kill(pid, sig); err != nil {
		if err == unix.ESRCH {
			return fmt.Errorf("no process with pid %d in this sandbox", pid)
		}
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

// checkPeer accepts only clients running as the init's own user, in the
// host's PID namespace (never a process of a sandbox).
func checkPeer(c *net.UnixConn, uid int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("machine: refusing a client of uid %d", cred.Uid)
	}
	if cred.Pid == 0 {
		// The client is not in this PID namespace nor below it: the
		// host (a sandbox's processes have their pids here).
		return nil
	}
	return fmt.Errorf("machine: refusing a client inside a sandbox (pid %d)", cred.Pid)
}

// readMachineRequest reads one request and its descriptors.
func readMachineRequest(c *net.UnixConn) (machineRequest, []*os.File, error) {
	var req machineRequest
	hdr := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(opFDs*4))
	n, oobn, _, _, err := c.ReadMsgUnix(hdr, oob)
	if err != nil {
		return req, nil, fmt.Errorf("read request: %w", err)
	}
	var files []*os.File
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return req, nil, fmt.Errorf("read descriptors: %w", err)
	}
	for _, msg := range msgs {
		fds, err := unix.ParseUnixRights(&msg)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "op"))
		}
	}
	if _, err := io.ReadFull(c, hdr[n:]); err != nil {
		return req, files, fmt.Errorf("read request: %w", err)
	}
	size := binary.BigEndian.Uint32(hdr)
	if size > maxMachineRequest {
		return req, files, fmt.Errorf("request of %d bytes is too large", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return req, files, fmt.Errorf("read request: %w", err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, files, fmt.Errorf("decode request: %w", err)
	}
	if req.Version != machineVersion {
		return req, files, fmt.Errorf("request version %d, the machine speaks %d", req.Version, machineVersion)
	}
	return req, files, nil
}

// netStarter starts processes in one network namespace: the init's own
// (the host's) when it has no thread, else the one its locked thread
// entered.
type netStarter struct {
	reqs chan startReq
}

type startReq struct {
	path string
	argv []string
	attr *os.ProcAttr
	out  chan startRes
}

type startRes struct {
	proc *os.Process
	err  error
}

// newPrivateNet makes the sandbox's own network namespace, with loopback
// up, on a thread that stays in it and starts the processes meant for it:
// a process is born in the network namespace of the thread that forks it.
func newPrivateNet() (*netStarter, error) {
	s := &netStarter{reqs: make(chan startReq)}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the init.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("private network: %w", err)
			return
		}
		if err := loopbackUp(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for r := range s.reqs {
			p, err := os.StartProcess(r.path, r.argv, r.attr)
			r.out <- startRes{p, err}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return s, nil
}

// startProcess starts a process in the starter's network namespace.
func (s *netStarter) startProcess(path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	if s.reqs == nil {
		return os.StartProcess(path, argv, attr)
	}
	out := make(chan startRes, 1)
	s.reqs <- startReq{path, argv, attr, out}
	r := <-out
	return r.proc, r.err
}

// runRunner is a runner's life: it reads its configuration from the init,
// hardens itself (no capabilities, limits, seccomp; it is in the
// machine's Landlock domain already, with no_new_privs), reports ready,
// then receives one operation's descriptors, moves them to where an init
// has them and runs the operation.
func runRunner() int {
	// The init ignores these, and an ignored signal stays ignored
	// through fork and exec (the Go runtime keeps an inherited SIG_IGN
	// of SIGHUP, SIGINT and the job-control stops): caught here, they
	// are back to their defaults in the command this runner executes.
	signal.Notify(make(chan os.Signal, 1), unix.SIGHUP, unix.SIGINT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	sock := runnerFD
	closeOnExecFrom(sock)
	f := os.NewFile(uintptr(sock), "init")
	rep := &reporter{w: f}
	// The init sends nothing after the configuration until this runner
	// is ready, so the buffered reader cannot swallow the descriptors.
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return 125
	}
	var cfg initConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		rep.setupFail(fmt.Errorf("decode configuration: %w", err))
		return 125
	}
	cfg.inDomain = true
	abi, err := harden(&cfg)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	rep.send(statusMsg{Done: true})
	// The socket moves out of the way of the descriptors it brings: it
	// sits where control goes.
	moved, err := unix.FcntlInt(uintptr(sock), unix.F_DUPFD_CLOEXEC, 16)
	f.Close()
	if err != nil {
		return 125
	}
	got, err := receiveOp(moved)
	unix.Close(moved)
	if !got {
		return 0 // the init retired this runner
	}
	if err != nil {
		return 125
	}
	return runInit(&runnerReady{landlock: abi})
}

// receiveOp waits on the socket sock for one operation's descriptors and
// moves them to where an init has them: control, status, stdin, stdout,
// stderr. got is false when the sender closed its end without sending
// anything.
func receiveOp(sock int) (got bool, err error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(opFDs*4))
	var n, oobn int
	for {
		n, oobn, _, _, err = unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || n == 0 {
		return false, err
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, msg := range msgs {
			if got, err := unix.ParseUnixRights(&msg); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if len(fds) != opFDs {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return true, fmt.Errorf("got %d descriptors, want %d", len(fds), opFDs)
	}
	// Out of the way first (one may sit where another goes), then to
	// their places. sock must sit above them all.
	high := make([]int, opFDs)
	for i, fd := range fds {
		h, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 16)
		if err != nil {
			return true, err
		}
		unix.Close(fd)
		high[i] = h
	}
	for i, target := range []int{ctlFD, statusFD, 0, 1, 2} {
		if err := unix.Dup3(high[i], target, 0); err != nil {
			return true, err
		}
		unix.Close(high[i])
	}
	return true, nil
}
