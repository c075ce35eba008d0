package local

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spareArgv0 marks an operation init prepared in advance by a holder.
const spareArgv0 = "sandbox-local-spare"

// The holder's descriptors after control (3) and status (4).
const (
	// holderListenFD is the listening socket the host created.
	holderListenFD = 5
	// holderSlotFD is the locked work-directory slot of the holder's
	// overlays, held for its whole life.
	holderSlotFD = 6
	// holderMountFD holds the sandbox's mount lock exclusively for the
	// holder's whole life: no cold init mounts the layers meanwhile.
	holderMountFD = 7
)

// spareFD is a spare's socket to its holder; opFDs is the number of
// descriptors of one operation (control, status, stdin, stdout, stderr).
const (
	spareFD = 3
	opFDs   = 5
)

// spareReady is what a spare knows once it has entered the sandbox and
// hardened itself.
type spareReady struct {
	landlock int
}

// holdRequest is one operation sent to a holder, after a 4-byte big-endian
// length, with the operation's five descriptors attached as SCM_RIGHTS.
type holdRequest struct {
	Version int `json:"version"`
	// Shared asks for a spare in the host's network; Any takes whichever
	// spare is ready (file operations do not use the network).
	Shared bool `json:"shared,omitempty"`
	Any    bool `json:"any,omitempty"`
}

// holdReply is a line from the holder to a client: Started once the
// operation was handed to a spare (before it, nothing ran and the client
// may try again), then Exit (the spare's wait status) or Err.
type holdReply struct {
	Started bool   `json:"started,omitempty"`
	Exit    string `json:"exit,omitempty"`
	Err     string `json:"err,omitempty"`
	Setup   bool   `json:"setup,omitempty"`
	Kind    string `json:"kind,omitempty"`
}

// holdVersion changes whenever the holder's protocol or the spares' setup
// change meaning; it is part of the holder's socket name.
const holdVersion = 2

// maxHoldRequest bounds the size of one request.
const maxHoldRequest = 1 << 16

// holder is the state of a running holder.
type holder struct {
	cfg  *initConfig
	ln   *net.UnixListener
	idle time.Duration
	uid  int

	mu     sync.Mutex
	active int
	last   time.Time
	spares map[bool]*spare // the next spare of each network mode
	wg     sync.WaitGroup
}

// runHolder is the holder's whole life: it builds the sandbox's tree once
// (without pivoting: each spare pivots in its own copy of this mount
// namespace and is exec'd from the host's binary, never from files the
// sandbox can change), reports readiness, keeps a spare of the sandbox's
// network mode prepared, and hands operations to spares until it has been
// idle long enough or its sandbox is gone. It is PID 1 of its PID
// namespace: its exit ends every spare and command.
func runHolder(cfg *initConfig, rep *reporter, ctl, status *os.File) int {
	if err := buildTree(cfg); err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		rep.setupFail(fmt.Errorf("non-dumpable: %w", err))
		return 125
	}
	lf := os.NewFile(holderListenFD, "listener")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		rep.setupFail(fmt.Errorf("holder socket: %w", err))
		return 125
	}
	ln, ok := l.(*net.UnixListener)
	if !ok {
		rep.setupFail(errors.New("holder socket is not a Unix socket"))
		return 125
	}
	ln.SetUnlinkOnClose(false)
	h := &holder{cfg: cfg, ln: ln, idle: time.Duration(cfg.IdleNS), uid: os.Getuid(), last: time.Now(), spares: map[bool]*spare{}}
	if h.idle <= 0 {
		h.idle = defaultHolderIdle
	}
	h.spares[cfg.SharedNet] = h.startSpare(cfg.SharedNet)
	rep.send(statusMsg{Done: true})
	status.Close()
	ctl.Close()
	return h.serve()
}

// serve accepts operations until the holder retires.
func (h *holder) serve() int {
	go func() {
		for {
			c, err := h.ln.AcceptUnix()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			h.mu.Lock()
			h.active++
			h.mu.Unlock()
			h.wg.Add(1)
			go h.handle(c)
		}
	}()
	t := time.NewTicker(holderTick)
	defer t.Stop()
	for range t.C {
		if _, err := os.Lstat(filepath.Join(h.cfg.StateDir, metaFile)); errors.Is(err, fs.ErrNotExist) {
			// The sandbox was deleted: end everything at once.
			return 0
		}
		h.mu.Lock()
		idle := h.active == 0 && time.Since(h.last) >= h.idle
		h.mu.Unlock()
		if idle && h.retire() {
			return 0
		}
	}
	return 0
}

// retire unlinks the holder's socket, under the lock clients take to start
// a holder, unless an operation arrived meanwhile. A client that connected
// just before sees the connection end without a Started reply and tries
// again with a new holder.
func (h *holder) retire() bool {
	dir := h.cfg.StateDir
	lock, err := os.OpenFile(filepath.Join(dir, holderLock), os.O_RDWR, 0)
	if err != nil {
		return true
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return true
	}
	h.mu.Lock()
	busy := h.active > 0
	h.mu.Unlock()
	if busy {
		return false
	}
	if rec, err := readHolderRecord(dir); err == nil && rec.pid == hostPID() {
		_ = os.Remove(filepath.Join(dir, holderPidFile))
		_ = os.Remove(filepath.Join(dir, holderSockName(h.cfg.Identity)))
	}
	h.ln.Close()
	return true
}

// hostPID is the holder's pid as the host sees it: the holder keeps the
// host's /proc, where /proc/self names it by its host pid.
func hostPID() int {
	s, err := os.Readlink("/proc/self")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// spare is one operation init, started and (once ready) entered and
// hardened, waiting for its operation.
type spare struct {
	cmd    *exec.Cmd
	sock   *os.File      // holder's end of the socket pair
	ready  chan error    // receives nil once ready, or why it failed
	exited chan struct{} // closed once reaped
}

// startSpare starts a spare in new PID, mount, IPC and UTS namespaces (and
// network, unless shared), as the cold init has them.
func (h *holder) startSpare(shared bool) *spare {
	sp := &spare{ready: make(chan error, 1), exited: make(chan struct{})}
	fail := func(err error) *spare {
		sp.ready <- err
		close(sp.exited)
		return sp
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("spare socket: %w", err))
	}
	sp.sock = os.NewFile(uintptr(fds[0]), "spare")
	child := os.NewFile(uintptr(fds[1]), "holder")
	cfg := *h.cfg
	cfg.Mode = modeSpare
	cfg.SharedNet = shared
	cfg.StateDir, cfg.IdleNS = "", 0
	line, err := json.Marshal(&cfg)
	if err != nil {
		child.Close()
		return fail(err)
	}
	flags := uintptr(unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if !shared {
		flags |= unix.CLONE_NEWNET
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{spareArgv0},
		Env:        []string{},
		ExtraFiles: []*os.File{child},
		// No parent-death signal: it would follow the thread that
		// started the spare. The spare ends with the holder's PID
		// namespace.
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: flags},
	}
	if h.uid != 0 {
		cmd.SysProcAttr.AmbientCaps = initAmbientCaps()
	}
	err = cmd.Start()
	child.Close()
	if err != nil {
		sp.sock.Close()
		return fail(fmt.Errorf("start a spare: %w", err))
	}
	sp.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(sp.exited)
	}()
	go func() {
		if _, err := sp.sock.Write(append(line, '\n')); err != nil {
			sp.ready <- fmt.Errorf("configure a spare: %w", err)
			return
		}
		var m statusMsg
		if err := json.NewDecoder(sp.sock).Decode(&m); err != nil {
			sp.ready <- errors.New("the sandbox's operation init ended while it was being prepared")
			return
		}
		if !m.Done {
			sp.ready <- &spareError{m}
			return
		}
		sp.ready <- nil
	}()
	return sp
}

// spareError is a spare's report of a failure to enter the sandbox.
type spareError struct{ m statusMsg }

func (e *spareError) Error() string { return e.m.Err }

// take returns a ready spare for the mode asked for (starting one if none
// is prepared) and the mode it took. Its successor is started by replenish
// once the operation ends, so that preparing it does not compete with the
// operation for the CPU.
func (h *holder) take(req holdRequest) (*spare, bool, error) {
	mode := req.Shared
	if req.Any {
		mode = h.cfg.SharedNet
	}
	for attempt := 0; ; attempt++ {
		h.mu.Lock()
		sp := h.spares[mode]
		delete(h.spares, mode)
		if sp == nil {
			sp = h.startSpare(mode)
		}
		h.mu.Unlock()
		err := <-sp.ready
		if err == nil {
			select {
			case <-sp.exited:
				err = errors.New("the prepared operation init died")
			default:
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

// replenish prepares the next spare of mode unless one is.
func (h *holder) replenish(mode bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.spares[mode] == nil {
		h.spares[mode] = h.startSpare(mode)
	}
}

// kill ends a spare and releases it.
func (sp *spare) kill() {
	if sp.cmd != nil && sp.cmd.Process != nil {
		_ = sp.cmd.Process.Kill()
	}
	if sp.sock != nil {
		sp.sock.Close()
	}
}

// handle runs one operation for one connection.
func (h *holder) handle(c *net.UnixConn) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		h.active--
		h.last = time.Now()
		h.mu.Unlock()
	}()
	defer c.Close()
	reply := func(r holdReply) {
		b, _ := json.Marshal(r)
		_, _ = c.Write(append(b, '\n'))
	}
	if err := h.checkPeer(c); err != nil {
		reply(holdReply{Err: err.Error(), Setup: true})
		return
	}
	req, files, err := readHoldRequest(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		reply(holdReply{Err: "holder: " + err.Error(), Setup: true})
		return
	}
	sp, mode, err := h.take(req)
	defer h.replenish(mode)
	if err != nil {
		r := holdReply{Err: err.Error(), Setup: true}
		var se *spareError
		if errors.As(err, &se) {
			r.Kind = se.m.Kind
		}
		reply(r)
		return
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	err = unix.Sendmsg(int(sp.sock.Fd()), []byte{'G'}, unix.UnixRights(fds...), nil, 0)
	for _, f := range files {
		f.Close()
	}
	files = nil
	sp.sock.Close()
	if err != nil {
		sp.kill()
		<-sp.exited
		reply(holdReply{Err: "hand the operation to its init: " + err.Error(), Setup: true})
		return
	}
	reply(holdReply{Started: true})
	// The client writes nothing more: the end of its side (a timeout, a
	// cancellation, a dead CLI) kills the operation at once.
	go func() {
		_, _ = io.Copy(io.Discard, c)
		sp.kill()
	}()
	<-sp.exited
	reply(holdReply{Exit: sp.cmd.ProcessState.String()})
}

// checkPeer accepts only clients running as the holder's own user.
func (h *holder) checkPeer(c *net.UnixConn) error {
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
	if int(cred.Uid) != h.uid {
		return fmt.Errorf("holder: refusing a client of uid %d", cred.Uid)
	}
	return nil
}

// readHoldRequest reads one request and its descriptors.
func readHoldRequest(c *net.UnixConn) (holdRequest, []*os.File, error) {
	var req holdRequest
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
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
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
	if size > maxHoldRequest {
		return req, files, fmt.Errorf("request of %d bytes is too large", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return req, files, fmt.Errorf("read request: %w", err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, files, fmt.Errorf("decode request: %w", err)
	}
	if req.Version != holdVersion {
		return req, files, fmt.Errorf("request version %d, holder speaks %d", req.Version, holdVersion)
	}
	if len(files) != opFDs {
		return req, files, fmt.Errorf("got %d descriptors, want %d", len(files), opFDs)
	}
	return req, files, nil
}

// runSpare is a spare's life: it reads its configuration from the holder,
// enters the sandbox (per-operation mounts, pivot), brings up its network,
// hardens itself exactly as a cold init does (Landlock, no capabilities,
// no_new_privs, limits, seccomp), reports ready, then receives one
// operation's descriptors, moves them to where a cold init has them and
// runs the operation as a cold init would.
func runSpare() int {
	sock := spareFD
	closeOnExecFrom(sock)
	f := os.NewFile(uintptr(sock), "holder")
	rep := &reporter{w: f}
	// The holder sends nothing after the configuration until this spare
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
	abi, err := prepare(&cfg, enterRoot, setupNetwork)
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
		return 0 // the holder retired this spare
	}
	if err != nil {
		return 125
	}
	return runInit(&spareReady{landlock: abi})
}

// receiveOp waits on the socket sock for one operation's descriptors and
// moves them to where a cold init has them: control, status, stdin,
// stdout, stderr. got is false when the sender closed its end without
// sending anything.
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
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
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
