//go:build linux

package local

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"

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
	Version int
	Op      string
	// Shared asks for a runner in the host's network; Any takes one in
	// the sandbox's own mode (file operations use no network).
	Shared bool
	Any    bool
	// User is the user the operation runs as: runners become their
	// user before an operation comes, and serve only that user.
	User string
	// Background runs the command detached, its output into a log
	// that logs reads.
	Background bool
	// PID and Signal are kill's and logs' process; Follow makes logs
	// report the end of the process.
	PID    int
	Signal int
	Follow bool
	// GraceNS is how long stop waits after SIGTERM before SIGKILL.
	GraceNS int64
}

// machineReply is a message from the init to a client: for a run, Started
// once the operation was handed to a runner (before it, nothing ran and
// the client may try again), then Exit (the runner's wait status) or Err;
// for the other requests their answer.
type machineReply struct {
	Started bool
	Exit    string
	Err     string
	Setup   bool
	Kind    string
	Procs   []providers.Process
	// Done ends a stop, a kill or a logs request; Code is a
	// background command's exit status once it ended.
	Done bool
	Code *int
}

// machineVersion changes whenever the machine's protocol or the runners'
// setup change meaning. It names the init's socket (machineSockName): a
// CLI of another build of the same version talks to a running machine,
// which an upgrade of the binary so leaves running; a CLI of another
// version stops it and starts it again. TestWireShape fails until it is
// changed with the shape of the messages; a change of what a field means,
// or of the order a message is encoded in, must change it too.
const machineVersion = 4

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
	pool     map[spareKey][]*spare // idle runners (see spares.go)
	children map[int]*child        // runners by pid, until reaped
	bg       map[int]*bgCommand    // background commands by pid
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

// runMachine is the machine's whole life: it starts its first runner,
// builds the sandbox (its root, mounts and network) meanwhile, pivots into
// it, restricts itself with Landlock, lets the runner restrict itself,
// reports readiness, and hands operations to runners until it is stopped,
// idle for its auto-stop interval, or killed. It is PID 1 of the sandbox's
// PID namespace: its exit ends every process of the sandbox.
func runMachine(cfg *initConfig, rep *reporter, ctlr *bufio.Reader, ctl, status *os.File, sb *standby) int {
	if sb == nil {
		var err error
		if sb, err = newMachine(); err != nil {
			rep.setupFail(err)
			return 125
		}
	}
	m := sb.m
	m.cfg, m.idle, m.last = cfg, time.Duration(cfg.IdleNS), time.Now()
	cfg.exeFD = sb.exe
	m.dir = os.NewFile(machineDirFD, "state")
	// Its stderr goes to the sandbox's state from now on: a fatal error
	// of its runtime, which ends the machine, is told there.
	if f, err := openAt(m.dir, lastWordsFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC); err == nil {
		_ = unix.Dup3(int(f.Fd()), 2, unix.O_CLOEXEC)
		f.Close()
	}
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
	// The cgroup root, reached through a descriptor once the host's tree
	// is gone: the machine joins its work cgroups once the host placed
	// it in its own (the start byte).
	cgRoot, err := openCgroupRoot(cfg)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	// The first runner (a new process of this binary, milliseconds to
	// start) starts now, before the root is built, and gets its
	// configuration, and restricts itself, only once the machine is
	// complete: it lives in this mount namespace, so pivot_root moves it
	// into the root with this process. (Never while the root is built: a
	// process forked during pivot_root could keep the host's root.) The
	// host moves it, and this process, into the sandbox's cgroups (a
	// migration waits for an RCU grace period, milliseconds; the runner
	// into their work children, see cgroupWork) while the machine is
	// built, and says so with the start byte; neither starts anything
	// before, so every process of the machine runs inside them. A
	// standby machine started one already, in its cgroups.
	first := spareKey{shared: cfg.SharedNet, user: cfg.DefaultUser}
	release := sb.release
	firstSpare := sb.first
	if firstSpare == nil || sb.key != first {
		if !first.shared {
			if err := sb.awaitNet(); err != nil {
				rep.setupFail(err)
				return 125
			}
		}
		firstSpare = m.startSpareHeld(first, release)
	}
	rep.send(statusMsg{Forked: true})
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
	if err := rootOwnsAccounts(cfg); err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := sb.awaitNet(); err != nil {
		rep.setupFail(err)
		return 125
	}
	if b, err := ctlr.ReadByte(); err != nil || b != startByte {
		rep.setupFail(errors.New("the host did not place the machine in its cgroups"))
		return 125
	}
	if err := m.joinWork(cgRoot, cfg.WorkCgroups); err != nil {
		rep.setupFail(err)
		return 125
	}
	// The host checked its cached list of the host's secrets meanwhile:
	// the machine must see none of them, and they must be masked before
	// Landlock forbids mounts.
	gate, err := readMachineGate(ctlr)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := applyMasks(cfg.maskSrc, gate.Masks); err != nil {
		rep.setupFail(err)
		return 125
	}
	cfg.Masks = append(cfg.Masks, gate.Masks...)
	if err := os.Remove(cfg.maskSrc); err != nil {
		rep.setupFail(err)
		return 125
	}
	abi, err := applyLandlock(cfg)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	rep.landlock = abi
	go m.reap(sb.reaped)
	if cfg.Limits.Disk > 0 {
		go m.watchDisk(diskQuota{limit: int64(cfg.Limits.Disk), reserve: int64(cfg.Limits.DiskReserve), grace: diskGrace})
	}
	close(release) // the first runner's configuration goes now
	m.park(first, firstSpare)
	if sb.first != nil && sb.first != firstSpare {
		m.park(sb.key, sb.first)
	}
	if err := m.record(); err != nil {
		rep.setupFail(fmt.Errorf("record the machine: %w", err))
		return 125
	}
	rep.send(statusMsg{Done: true})
	status.Close()
	ctl.Close()
	// Threads the building took for itself (the signal handler's, the
	// private network's) are locked to it: the idle reserve is made
	// whole again before the first command, which may fill the pids
	// limit, can run.
	reserveThreads(reservedThreads)
	return m.serve()
}

// openCgroupRoot opens the cgroup root of cfg's work cgroups, for
// joinWork; -1 when it has none (cgroup v2 or none, or a claimed standby,
// which joined its own).
func openCgroupRoot(cfg *initConfig) (int, error) {
	if len(cfg.WorkCgroups) == 0 {
		return -1, nil
	}
	fd, err := unix.Open(cfg.CgroupRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("the machine's cgroups: %w", err)
	}
	return fd, nil
}

// joinWork moves the threads of the machine's process starters into its
// cgroupWork cgroups (the directories of the limit files work, relative to
// the cgroup root root, which it closes; nothing when root is -1), which
// bound every process of the sandbox but the init: every runner is born in
// them from then on (the host placed the first one already). Writing 0 to
// a cgroup v1 tasks file moves the writing thread alone, without the
// global lock a process's move takes.
func (m *machine) joinWork(root int, work []cgroupPath) error {
	if root < 0 {
		return nil
	}
	defer unix.Close(root)
	var dirs []string
	for _, f := range work {
		if !slices.Contains(dirs, f.Dir) {
			dirs = append(dirs, f.Dir)
		}
	}
	for _, dir := range dirs {
		if err := m.joinOne(root, dir, work); err != nil {
			return fmt.Errorf("the machine's cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// joinOne moves the process starters' threads into the cgroup dir. Until
// they are in, it may be empty, and a delete's sweep of empty cgroups
// (removeEmpty) may remove it: it is made again, with its limit files from
// work.
func (m *machine) joinOne(root int, dir string, work []cgroupPath) error {
	write := func(name, val string) error {
		fd, err := unix.Openat(root, dir+"/"+name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte(val))
		return err
	}
	join := func() error {
		for _, s := range m.nets {
			var err error
			s.do(func() { err = write("tasks", "0") })
			if err != nil {
				return err
			}
		}
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := join()
		if err == nil || !cgroupGone(err) || attempt == 2 {
			return err
		}
		if err := unix.Mkdirat(root, dir, 0o755); err != nil && err != unix.EEXIST {
			return err
		}
		for _, f := range work {
			if f.Dir == dir {
				if err := write(f.Name, f.Val); err != nil {
					return err
				}
			}
		}
	}
}

// readMachineGate reads the machineGate that follows a machine's
// configuration and start byte.
func readMachineGate(r *bufio.Reader) (machineGate, error) {
	body, err := readFrame(r)
	if err != nil {
		return machineGate{}, errors.New("the host did not start the machine")
	}
	return decodeGate(body)
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

// record writes the init's record (machinePidFile) in the sandbox's
// directory, as it is about to say it is ready. The init writes it, not
// the process that started it: that one may be killed once it sent the
// configuration, and the init goes on to serve whoever connects next;
// unrecorded, it would count as stopped, and a stop would leave it
// running.
func (m *machine) record() error {
	f, err := openAt(m.dir, machinePidFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d %d\n", m.cfg.HostPID, m.cfg.HostStart)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlinkat(int(m.dir.Fd()), machinePidFile, 0)
	}
	return err
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
		if rec, err := parseRecord(string(b)); err == nil && rec.pid == m.cfg.HostPID {
			_ = unix.Unlinkat(int(m.dir.Fd()), machinePidFile, 0)
			_ = unix.Unlinkat(int(m.dir.Fd()), machineSockName(), 0)
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
	m.mu.Unlock()
	m.releaseSpares()
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
	return readAtFD(int(dir.Fd()), name)
}

// readAtFD reads the file name in the directory open as dirFD.
func readAtFD(dirFD int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirFD, name, os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return readFD(fd, name)
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
		_, _ = c.Write(appendFrame(nil, encodeReply(&r)))
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

// clientGone is closed once the client on c closed its side of the
// connection (a cancellation, a dead CLI).
func clientGone(c *net.UnixConn) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(gone)
	}()
	return gone
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
	started := machineReply{Started: true, Code: code}
	if _, _, err := c.WriteMsgUnix(appendFrame(nil, encodeReply(&started)), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return
	}
	if code != nil || !req.Follow {
		return
	}
	gone := clientGone(c)
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
	b, err := readFile("/proc/stat")
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
	stat, err := readFile(base + "/stat")
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
	if cmd, err := readFile(base + "/cmdline"); err == nil {
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
	if req, err = decodeRequest(body); err != nil {
		return req, files, err
	}
	if req.Version != machineVersion {
		return req, files, fmt.Errorf("request version %d, the machine speaks %d", req.Version, machineVersion)
	}
	return req, files, nil
}

// netStarter starts processes in one network namespace from a thread of
// its own, locked to it for the init's life: a process is born in the
// network namespace, and (cgroup v1) the cgroups, of the thread that forks
// it, and the init moves these threads alone into the sandbox's limits
// (see joinWork).
type netStarter struct {
	calls chan func()
}

// newStarter starts a netStarter whose thread first runs enter (nil for
// none), which says whether it may serve.
func newStarter(enter func() error) (*netStarter, error) {
	s := &netStarter{calls: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the init. A locked
		// thread never makes the runtime's new threads either (the
		// runtime's template thread does), so none is born where
		// this one is moved.
		runtime.LockOSThread()
		if enter != nil {
			if err := enter(); err != nil {
				ready <- err
				return
			}
		}
		ready <- nil
		for call := range s.calls {
			call()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return s, nil
}

// newPrivateNet makes the sandbox's own network namespace, with loopback
// up, on a starter's thread that stays in it.
func newPrivateNet() (*netStarter, error) {
	return newStarter(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("private network: %w", err)
		}
		return loopbackUp()
	})
}

// do runs f on the starter's thread and returns once it returned.
func (s *netStarter) do(f func()) {
	done := make(chan struct{})
	s.calls <- func() {
		f()
		close(done)
	}
	<-done
}

// startProcess starts a process from the starter's thread.
func (s *netStarter) startProcess(path string, argv []string, attr *os.ProcAttr) (proc *os.Process, err error) {
	// With the monitor's slack: a runner's threads start with it (see
	// slack.go).
	s.do(func() { withSlack(monitorSlack, func() { proc, err = os.StartProcess(path, argv, attr) }) })
	return proc, err
}

// ownCgroupNamespace gives the calling runner a cgroup namespace rooted
// at the cgroups it is in (the sandbox's; its work cgroups on cgroup v1),
// so that what it runs sees "/" there and not the host's tree, with the
// names of the host's sandboxes. A namespace belongs to a thread: every
// thread unshares (each gets one rooted alike; a thread made later
// inherits its maker's). Before the hardening, which drops the capability
// it takes; once the runner is where it stays.
func ownCgroupNamespace() error {
	if _, _, e := psx.Syscall3(unix.SYS_UNSHARE, unix.CLONE_NEWCGROUP, 0, 0); e != 0 {
		return fmt.Errorf("cgroup namespace: %w", e)
	}
	return nil
}

// runRunner is a runner's life: it reads its configuration from the init,
// hardens itself (a Landlock domain of its own, with no_new_privs; no
// capabilities; limits; seccomp), becomes its user and reports ready; then
// it serves operations as the init hands them over: it receives one
// operation's descriptors, moves them to where an init has them, runs the
// operation and tells the init that it is free again, until an operation
// that ends it (a background command, a terminal) or the init lets it go.
func runRunner() int {
	// The init ignores these, and an ignored signal stays ignored
	// through fork and exec (the Go runtime keeps an inherited SIG_IGN
	// of SIGHUP, SIGINT and the job-control stops): caught here, they
	// are back to their defaults in the command this runner executes.
	signal.Notify(make(chan os.Signal, 1), unix.SIGHUP, unix.SIGINT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	// The runner starts without stdio: /dev/null holds those places, so
	// that nothing the runner opens ever lands where an operation's
	// descriptors go.
	if err := holdFDs(0, 1, 2); err != nil {
		return 125
	}
	// After the signal handling, whose threads are taken for good.
	reserveThreads(reservedThreads)
	sock := runnerFD
	closeOnExecFrom(sock)
	f := os.NewFile(uintptr(sock), "init")
	rep := &reporter{w: f}
	// The init sends nothing after the configuration until this runner
	// is ready, so the buffered reader cannot swallow the descriptors.
	body, err := readFrame(bufio.NewReader(f))
	if err != nil {
		return 125
	}
	cfg, err := decodeConfig(body)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := ownCgroupNamespace(); err != nil {
		rep.setupFail(err)
		return 125
	}
	abi, err := harden(&cfg)
	if err != nil {
		rep.setupFail(err)
		return 125
	}
	u, err := becomeUser(cfg.User)
	if err != nil {
		kind := ""
		if errors.Is(err, errNoUser) {
			kind = kindInvalid
		}
		rep.send(statusMsg{Err: err.Error(), Kind: kind})
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
	if err := holdFDs(ctlFD, statusFD); err != nil {
		return 125
	}
	null, err := openHigh(os.DevNull)
	if err != nil {
		return 125
	}
	r := &runner{landlock: abi, user: cfg.User, u: u, sock: moved, null: null}
	// What earlier commands left running may still write to their
	// outputs, which this runner drains (see runForeground) until they
	// are gone.
	defer r.leftovers.wait()
	// The runner waits for its next operation in the runtime's poller
	// (see awaitOp), not in a blocking receive.
	next, err := watch(moved, "init")
	if err != nil {
		return 125
	}
	for {
		r.prepare()
		awaitOp(next)
		got, err := receiveOp(moved)
		if !got {
			return 0 // the init let this runner go
		}
		if err != nil {
			return 125
		}
		r.told = false
		code, again := r.serve()
		if !again {
			return code
		}
		if !r.tellFree() {
			return code
		}
	}
}

// runner is a runner's state from one operation to the next.
type runner struct {
	landlock int
	user     string       // the user it became, as the init named it
	u        *sandboxUser // that user, unless it stayed the machine's own
	// leftovers are the drains of outputs that commands left running
	// still hold.
	leftovers drains
	sock      int  // the socket to the init
	told      bool // the init knows that this operation ends
	// null is /dev/null, kept open for holdFDsWith; outs are the relays
	// of the next foreground command, made while the runner waits for
	// it (prepare).
	null int
	outs []*relay
}

// tellFree tells the init that the runner takes the next operation, once
// per operation. A runner tells it before it reports the operation's end
// to the host (the host's next operation then finds it free); the init's
// next operation waits in the socket until this one is done.
func (r *runner) tellFree() bool {
	if r.told {
		return true
	}
	r.told = true
	b := byte(reusedByte)
	if r.leftovers.any() {
		b = drainingByte
	}
	_, err := unix.Write(r.sock, []byte{b})
	return err == nil
}

// serve runs the operation whose descriptors receiveOp put in place.
// again says that the operation ended and its descriptors are released
// (the runner can take another); otherwise code is the runner's exit
// status.
func (r *runner) serve() (code int, again bool) {
	// Nothing but stdio may reach the command: neither pipe, nor any
	// descriptor the runner holds.
	closeOnExecFrom(ctlFD)
	rep := &reporter{w: fdFile(statusFD), landlock: r.landlock}
	ctl := bufio.NewReader(fdFile(ctlFD))
	cfg, err := readConfig(ctl)
	if err != nil {
		rep.setupFail(err)
		return 125, false
	}
	if cfg.User != r.user {
		rep.setupFail(fmt.Errorf("a runner of user %q got an operation of user %q", r.user, cfg.User))
		return 125, false
	}
	if r.u != nil {
		cfg.Env = userEnv(cfg.Env, *r.u, cfg.KeepHome)
	}
	again = true
	switch {
	case cfg.Mode == modeExec && cfg.Background:
		code, again = runBackground(&cfg, rep), false
	case cfg.Mode == modeExec && cfg.TTY:
		code, again = runOnTerminal(&cfg, rep), false
	case cfg.Mode == modeExec:
		rep.beforeLast = func() { r.tellFree() }
		code = r.runForeground(&cfg, rep)
	case cfg.Mode == modeFile:
		rep.beforeLast = func() { r.tellFree() }
		code = serveFile(&cfg, rep, ctl)
	default:
		rep.setupFail(fmt.Errorf("unknown operation mode %q", cfg.Mode))
		code, again = 125, false
	}
	// The operation's descriptors go (the host sees their ends); their
	// places stay taken.
	if err := holdFDsWith(r.null, ctlFD, statusFD, 0, 1, 2); err != nil {
		return code, false
	}
	return code, again
}

// holdFDs puts /dev/null in the places fds: what was there is closed,
// and the places stay taken.
func holdFDs(fds ...int) error {
	null, err := openHigh(os.DevNull)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	return holdFDsWith(null, fds...)
}

// holdFDsWith is holdFDs with null, a descriptor of /dev/null above every
// place it fills.
func holdFDsWith(null int, fds ...int) error {
	for _, fd := range fds {
		if err := unix.Dup3(null, fd, unix.O_CLOEXEC); err != nil {
			return fmt.Errorf("hold descriptor %d: %w", fd, err)
		}
	}
	return nil
}

// openHigh opens name for reading and writing, close-on-exec, at a
// descriptor above every place holdFDs fills (even when it opened in one
// of them).
func openHigh(name string) (int, error) {
	low, err := unix.Open(name, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	fd, err := unix.FcntlInt(uintptr(low), unix.F_DUPFD_CLOEXEC, 16)
	unix.Close(low)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	return fd, nil
}

// fdFile reads and writes a descriptor by its number, without an
// *os.File (whose finalizer would close the number once it holds
// another operation's descriptor).
type fdFile int

func (f fdFile) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f fdFile) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(int(f), b[done:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// rightsOf are the descriptors that the control messages oob carry.
func rightsOf(oob []byte) []int {
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, msg := range msgs {
			if got, err := unix.ParseUnixRights(&msg); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	return fds
}

// awaitOp waits until the socket to the init, watched as next (see
// watch), holds the next operation or is closed. It parks in the
// runtime's poller: a thread blocked in a receive would keep the
// runtime's monitor waking every few tens of microseconds for as long
// as the runner is idle (a tenth of a CPU, on the CPUs that the caller's
// next command and its CLI then run on).
func awaitOp(next *os.File) {
	_ = whenReady(next, func(fd int) bool { return pollNow(fd) != 0 })
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
	fds := rightsOf(oob[:oobn])
	if len(fds) != opFDs {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return true, fmt.Errorf("got %d descriptors, want %d", len(fds), opFDs)
	}
	// The places are held (holdFDs), so the descriptors arrive above
	// them all and go straight there; should one arrive in a place,
	// they all move out of the way first. sock must sit above them all.
	targets := [opFDs]int{ctlFD, statusFD, 0, 1, 2}
	if slices.ContainsFunc(fds, func(fd int) bool { return fd <= max(ctlFD, statusFD, 2) }) {
		for i, fd := range fds {
			h, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 16)
			if err != nil {
				return true, err
			}
			unix.Close(fd)
			fds[i] = h
		}
	}
	for i, target := range targets {
		if err := unix.Dup3(fds[i], target, 0); err != nil {
			return true, err
		}
		unix.Close(fds[i])
	}
	return true, nil
}
