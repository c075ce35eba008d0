//go:build linux

package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The machine keeps a pool of runners. A runner is started, hardened and
// made the user it runs as before any operation comes (that is the slow
// part: a new process of this binary), then serves operations one after
// the other: after each foreground command or file operation it tells the
// init that it is free again (reusedByte on its socket) and goes back to
// the pool of its network mode and user. A background command becomes its
// runner's process, and a command on a terminal ends its runner, so those
// take a runner that has served nothing yet.

// reusedByte is what a runner writes on its socket to the init when an
// operation ended and it can take another; drainingByte says the same of
// a runner that drains the outputs of what earlier commands left running
// (it takes no file operation: a file operation's runner is killed when
// its client goes away, which those would not survive). opByte is what
// the init sends with an operation's descriptors.
const (
	reusedByte   = 'R'
	drainingByte = 'L'
	opByte       = 'G'
)

// maxIdleRunners bounds the idle runners a machine keeps per network mode
// and user; more, left after a burst of concurrent operations, end.
const maxIdleRunners = 2

// replenishDelay is how long an operation that took a runner runs before
// a successor starts, and replenishIdle how long after it ended, if
// sooner (see replenishAfter).
const (
	replenishDelay = 20 * time.Millisecond
	replenishIdle  = 50 * time.Millisecond
)

// spareKey is what a runner is prepared for: its network (the host's or
// the sandbox's own) and the user it became.
type spareKey struct {
	shared bool
	user   string
}

// spare is one runner, started and (once ready) hardened, waiting for an
// operation.
type spare struct {
	c     *child
	sock  *net.UnixConn // init's end of the socket pair
	ready chan error    // receives nil once ready, or why it failed
	// prepared says that ready was received (nil); used that the
	// runner served an operation already; draining that it drains
	// what earlier commands left running.
	prepared, used, draining bool
}

// startSpare starts a runner for key.
func (m *machine) startSpare(key spareKey) *spare {
	return m.startSpareHeld(key, nil)
}

// startSpareHeld starts a runner for key, and sends it its configuration
// once release is closed (at once if it is nil): the machine's first
// runner starts while the machine is being built (see runMachine).
func (m *machine) startSpareHeld(key spareKey, release <-chan struct{}) *spare {
	sp := &spare{ready: make(chan error, 1)}
	fail := func(err error) *spare {
		sp.ready <- err
		return sp
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("runner socket: %w", err))
	}
	// The init's end waits in the runtime's poller, not on a thread of
	// its own: a thread blocked in a read for each busy runner is one
	// the runtime must create, which a full pids limit forbids.
	own := os.NewFile(uintptr(fds[0]), "runner")
	conn, err := net.FileConn(own)
	own.Close()
	if err != nil {
		unix.Close(fds[1])
		return fail(fmt.Errorf("runner socket: %w", err))
	}
	sp.sock = conn.(*net.UnixConn)
	peer := os.NewFile(uintptr(fds[1]), "init")
	attr := &os.ProcAttr{
		Env:   machineEnv(commandSlack()),
		Files: []*os.File{nil, nil, nil, peer},
		Sys:   &syscall.SysProcAttr{},
	}
	if m.uid != 0 {
		attr.Sys.AmbientCaps = initAmbientCaps()
	}
	c, err := m.start(key.shared, attr)
	peer.Close()
	if err != nil {
		sp.sock.Close()
		return fail(fmt.Errorf("start a runner: %w", err))
	}
	sp.c = c
	go func() {
		if release != nil {
			<-release
		}
		cfg := *m.cfg
		cfg.Mode = modeSpare
		cfg.SharedNet = key.shared
		cfg.User = key.user
		cfg.IdleNS = 0
		if err := writeConfig(sp.sock, &cfg); err != nil {
			sp.ready <- fmt.Errorf("configure a runner: %w", err)
			return
		}
		// Read unbuffered: nothing of what follows on the socket
		// may be taken with the status.
		msg, err := readStatus(sp.sock)
		if err != nil {
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

// spareError is a runner's report of a failure to prepare itself (to
// harden itself, or to become its user).
type spareError struct{ m statusMsg }

func (e *spareError) Error() string { return e.m.Err }

// keyOf is the kind of runner req needs.
func (m *machine) keyOf(req machineRequest) spareKey {
	mode := req.Shared
	if req.Any {
		mode = m.cfg.SharedNet
	}
	return spareKey{shared: mode, user: req.User}
}

// pop takes an idle runner for req from the pool of key: a command takes
// one that served before if there is one (the last parked first), so that
// the fresh one stays for what needs it; a background command takes a
// fresh one (it becomes its runner's process), a file operation one that
// drains nothing.
func (m *machine) pop(key spareKey, req machineRequest) *spare {
	m.mu.Lock()
	defer m.mu.Unlock()
	idle := m.pool[key]
	fits := func(sp *spare) bool {
		switch {
		case req.Background:
			return !sp.used
		case req.Any:
			return !sp.draining
		}
		return true
	}
	pick := -1
	for i := len(idle) - 1; i >= 0; i-- {
		if !fits(idle[i]) {
			continue
		}
		if pick < 0 || idle[i].used && !idle[pick].used {
			pick = i
		}
	}
	if pick < 0 {
		return nil
	}
	sp := idle[pick]
	m.pool[key] = append(idle[:pick:pick], idle[pick+1:]...)
	return sp
}

// take returns a ready runner for req (starting one if none is idle) and
// the kind it is. A successor is started by replenish once the operation
// started, so that the next operation finds one.
func (m *machine) take(req machineRequest) (*spare, spareKey, error) {
	key := m.keyOf(req)
	for attempt := 0; ; attempt++ {
		sp := m.pop(key, req)
		if sp == nil {
			sp = m.startSpare(key)
		}
		var err error
		if !sp.prepared {
			err = <-sp.ready
			sp.prepared = err == nil
		}
		if err == nil {
			select {
			case <-sp.c.exited:
				err = errors.New("the prepared runner died")
			default:
				// A process of the runner's user may have stopped
				// or killed it while it waited (signals are all it
				// can do to it): such a runner would never start
				// the operation.
				if runnerGone(sp.c.proc.Pid) {
					err = errors.New("the prepared runner was stopped or killed")
					break
				}
				if m.diskOver.Load() {
					confineFilesOf(sp.c.proc.Pid, true)
				}
				return sp, key, nil
			}
		}
		sp.kill()
		var se *spareError
		if errors.As(err, &se) || attempt > maxIdleRunners {
			return nil, key, err
		}
	}
}

// replenish prepares a runner of key unless one that served nothing yet
// is idle, or the machine is stopping.
func (m *machine) replenish(key spareKey) {
	m.mu.Lock()
	for _, sp := range m.pool[key] {
		if !sp.used {
			m.mu.Unlock()
			return
		}
	}
	stopping := m.stopping
	m.mu.Unlock()
	if stopping {
		return
	}
	m.park(key, m.startSpare(key))
}

// replenishAfter replenishes the pool of key once the operation that
// took a runner from it has run for replenishDelay, or ended
// replenishIdle ago: a runner starting meanwhile (a new process of this binary, a few
// milliseconds of CPU) would take the CPUs from the operation, which a
// short command, the first after a machine's start above all, feels most,
// and from what the client does next (often, in a script, its next
// command, or a stop, which makes the successor pointless).
func (m *machine) replenishAfter(key spareKey, ended <-chan struct{}) {
	t := time.NewTimer(replenishDelay)
	defer t.Stop()
	select {
	case <-ended:
		t.Reset(replenishIdle)
		<-t.C
	case <-t.C:
	}
	m.replenish(key)
}

// park puts a runner into the pool of key, unless the machine is stopping
// or the pool is full: then the runner is let go.
func (m *machine) park(key spareKey, sp *spare) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping || len(m.pool[key]) >= maxIdleRunners {
		sp.release()
		return
	}
	m.pool[key] = append(m.pool[key], sp)
}

// dropSpares lets the idle runners of an idle machine go and returns the
// init's free memory to the host; the next operation starts a runner.
func (m *machine) dropSpares() {
	if m.releaseSpares() {
		debug.FreeOSMemory()
		unmapCode()
	}
}

// releaseSpares lets every idle runner go (an idle or a stopping
// machine): each ends once it finished reporting the operation it served
// last (it is parked before its last report, see runner.tellFree, so it
// must not be killed) and what its commands left running no longer
// writes to it. It says whether there were any.
func (m *machine) releaseSpares() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	released := false
	for key, idle := range m.pool {
		for _, sp := range idle {
			sp.release()
			released = true
		}
		delete(m.pool, key)
	}
	return released
}

// unmapCode unmaps the pages of the init's read-only file mappings (its
// binary's code and constant data), which its start and operations
// touched: an idle machine then holds little more than its heap. A
// private file mapping that was never written keeps its content through
// MADV_DONTNEED: what the init touches again comes back from the page
// cache, which keeps the pages for the CLI's next run. A mapping that
// holds copies of its pages (Anonymous in smaps: written before it was
// made read-only, as a loader's relocations are) is left alone:
// MADV_DONTNEED would throw the copies away. (MADV_PAGEOUT, which also
// drops pages from the page cache, leaves every page resident that
// another process maps too, and the standby machine and the other
// machines run this binary: it left an idle sandbox's code resident.)
func unmapCode() {
	smaps, err := readFile("/proc/self/smaps")
	if err != nil {
		return
	}
	for _, m := range cleanFileMappings(string(smaps)) {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(m[0]), uintptr(m[1]-m[0]), unix.MADV_DONTNEED)
	}
}

// cleanFileMappings lists, from smaps, the address ranges of the
// read-only private file mappings that hold no page of their own
// (Anonymous: 0 kB).
func cleanFileMappings(smaps string) [][2]uint64 {
	var out [][2]uint64
	var cur [2]uint64
	candidate := false
	for _, line := range strings.Split(smaps, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			// address perms offset dev inode [path]
			candidate = false
			from, to, ok := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(from, 16, 64)
			end, err2 := strconv.ParseUint(to, 16, 64)
			if !ok || err1 != nil || err2 != nil || end <= start {
				continue
			}
			candidate = f[4] != "0" && !strings.Contains(f[1], "w") && strings.HasSuffix(f[1], "p")
			cur = [2]uint64{start, end}
			continue
		}
		if candidate && len(f) >= 2 && f[0] == "Anonymous:" {
			if f[1] == "0" {
				out = append(out, cur)
			}
			candidate = false
		}
	}
	return out
}

// kill ends a runner and releases it.
func (sp *spare) kill() {
	if sp.c != nil {
		_ = sp.c.proc.Signal(syscall.SIGKILL)
	}
	sp.release()
}

// release closes the init's end of a runner's socket: an idle runner
// then ends once what its earlier commands left running no longer writes
// to it.
func (sp *spare) release() {
	if sp.sock != nil {
		sp.sock.Close()
	}
}

// settled waits until the runner is done with its operation: true when
// it said that it can take another (and whether it drains leftovers),
// false when it ended (or became a background command).
func (sp *spare) settled() bool {
	var b [1]byte
	for {
		n, err := sp.sock.Read(b[:])
		if n == 1 {
			sp.draining = b[0] == drainingByte
			return b[0] == reusedByte || b[0] == drainingByte
		}
		if err != nil {
			return false
		}
	}
}

// logTo makes the log of sp's background command the operation's stdout
// and stderr (files), and records the command.
func (m *machine) logTo(sp *spare, files []*os.File) error {
	pid := sp.c.proc.Pid
	log, err := m.openLog(pid)
	if err != nil {
		return err
	}
	files[3].Close()
	files[4].Close()
	files[3], files[4] = log, log
	m.mu.Lock()
	m.bg[pid] = &bgCommand{started: time.Now(), c: sp.c}
	m.mu.Unlock()
	return nil
}

// stuckGrace is how long a runner whose caller went away may take to end
// the operation before the init looks whether it was stopped.
const stuckGrace = 2 * time.Second

// stopped says whether the runner is stopped (by a signal, or traced).
func (sp *spare) stopped() bool {
	state, _, err := procStat(sp.c.proc.Pid)
	return err == nil && (state == 'T' || state == 't')
}

// settle waits for the runner of a command whose caller went away (a
// cancellation, a timeout, a dead client) to end the operation, and
// parks it. A runner its own command stopped (with SIGSTOP) would never
// end it, nor release the caller's descriptors: it is killed.
func (m *machine) settle(key spareKey, sp *spare, settled <-chan bool) {
	t := time.NewTimer(stuckGrace)
	defer t.Stop()
	for {
		select {
		case again := <-settled:
			if again {
				m.park(key, sp)
			} else {
				sp.release()
			}
			return
		case <-t.C:
			if sp.stopped() {
				_ = sp.c.proc.Signal(syscall.SIGKILL)
			}
			t.Reset(stuckGrace)
		}
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
	var sp *spare
	var key spareKey
	for attempt := 1; ; attempt++ {
		var err error
		sp, key, err = m.take(req)
		if err != nil {
			// No runner could be started or prepared: the machine
			// runs, but has no room for another process (its pids
			// limit is full, most likely; the host says).
			r := machineReply{Err: "no process could be started for the operation: " + err.Error(), Kind: kindUnavailable}
			var se *spareError
			if errors.As(err, &se) {
				r = machineReply{Err: err.Error(), Kind: se.m.Kind, Setup: true}
				// A user the sandbox lacks is the request's fault.
				r.Setup = se.m.Kind != kindInvalid
			}
			reply(r)
			return
		}
		if req.Background {
			if err := m.logTo(sp, files); err != nil {
				sp.kill()
				reply(machineReply{Err: "background command: " + err.Error(), Setup: true})
				return
			}
		}
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		_, _, err = sp.sock.WriteMsgUnix([]byte{opByte}, unix.UnixRights(fds...), nil)
		if err == nil {
			break
		}
		// A runner that died while it waited: nothing was handed
		// over, so another may take the operation.
		sp.kill()
		if req.Background || attempt == machineAttempts {
			reply(machineReply{Err: "hand the operation to its runner: " + err.Error(), Setup: true})
			return
		}
	}
	for _, f := range files {
		f.Close()
	}
	files = files[:0]
	ended := make(chan struct{})
	defer close(ended)
	go m.replenishAfter(key, ended)
	if req.Background {
		sp.release() // the runner becomes the command
	}
	sp.used = true
	reply(machineReply{Started: true})
	// The runner says when it is done; a background command's never
	// does, it ends with the command.
	settled := make(chan bool, 1)
	if !req.Background {
		go func() { settled <- sp.settled() }()
	}
	// A file operation ends with its client: the end of the client's
	// side (a cancellation, a dead CLI) kills it at once. A command's
	// runner watches its control pipe instead, and may outlive the
	// client to keep the outputs of what the command left running.
	gone := clientGone(c)
	// A command may stop its own runner (kill -STOP $PPID, or -1): the
	// runner only waits and relays, so it is let go on, or the caller
	// would wait for ever.
	var stuck <-chan time.Time
	if !req.Background {
		t := time.NewTicker(stuckGrace)
		defer t.Stop()
		stuck = t.C
	}
	for done := false; !done; {
		done = true
		select {
		case <-stuck:
			if sp.stopped() {
				_ = sp.c.proc.Signal(syscall.SIGCONT)
			}
			done = false
		case <-sp.c.exited:
			sp.release()
			reply(machineReply{Exit: exitString(sp.c.status)})
		case again := <-settled:
			if again {
				m.park(key, sp)
				reply(machineReply{Exit: "exit status 0"})
			} else {
				sp.release()
				<-sp.c.exited
				reply(machineReply{Exit: exitString(sp.c.status)})
			}
		case <-gone:
			if req.Any {
				sp.kill()
			} else {
				go m.settle(key, sp, settled)
			}
		}
	}
	release()
}
