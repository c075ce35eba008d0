package local

import (
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

// The holder's extra descriptors, after control (3) and status (4).
const (
	// holderListenFD is the listening socket the host created.
	holderListenFD = 5
	// holderSlotFD is the locked work-directory slot of the holder's
	// overlays, held for its whole life.
	holderSlotFD = 6
)

// holdRequest is one warm command, sent by the host after a 4-byte
// big-endian length, with the command's stdin, stdout and stderr attached
// as SCM_RIGHTS.
type holdRequest struct {
	Version int      `json:"version"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Cwd     string   `json:"cwd"`
}

// holdVersion changes whenever holdRequest or the command init changes
// meaning; a holder refuses other versions, and the socket's name carries
// it so that a new binary never talks to an old holder.
const holdVersion = 1

// maxHoldRequest bounds the size of one request.
const maxHoldRequest = 16 << 20

// holder is the state of a running holder.
type holder struct {
	cfg  *initConfig
	ln   *net.UnixListener
	idle time.Duration

	mu     sync.Mutex
	active int
	last   time.Time
	wg     sync.WaitGroup
}

// runHolder is the holder's whole life: it builds the sandbox's tree once
// (without pivoting: each command's init pivots in its own copy of this
// mount namespace, so it is exec'd from the host's binary and libraries,
// never from files the sandbox can modify), brings up the network, reduces
// itself to the capabilities the command inits need, reports readiness and
// serves commands until it has been idle long enough or its sandbox is gone.
// Its exit ends its PID namespace, and with it every command still running.
func runHolder(cfg *initConfig, rep *reporter, status *os.File) int {
	if err := buildTree(cfg); err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := setupNetwork(cfg); err != nil {
		rep.setupFail(err)
		return 125
	}
	if err := restrictHolder(); err != nil {
		rep.setupFail(err)
		return 125
	}
	lf := os.NewFile(holderListenFD, "listener")
	if lf == nil {
		rep.setupFail(errors.New("holder started without its socket"))
		return 125
	}
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
	rep.send(statusMsg{Done: true})
	status.Close()

	h := &holder{cfg: cfg, ln: ln, idle: time.Duration(cfg.IdleNS), last: time.Now()}
	if h.idle <= 0 {
		h.idle = defaultHolderIdle
	}
	return h.serve()
}

// serve accepts commands until the holder retires.
func (h *holder) serve() int {
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := h.ln.AcceptUnix()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return
				}
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
	tick := min(max(h.idle/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for range t.C {
		if _, err := os.Lstat(filepath.Join(h.cfg.StateDir, metaFile)); errors.Is(err, fs.ErrNotExist) {
			// The sandbox was deleted: end everything at once.
			return 0
		}
		h.mu.Lock()
		done := h.active == 0 && time.Since(h.last) >= h.idle
		h.mu.Unlock()
		if done {
			break
		}
	}
	// Retire: no new client may connect, those already queued are served.
	h.unlinkSocket()
	_ = h.ln.SetDeadline(time.Now().Add(50 * time.Millisecond))
	<-accepted
	h.wg.Wait()
	return 0
}

// unlinkSocket removes the holder's socket unless another holder already
// replaced it; the lock is the one the host takes to start a holder.
func (h *holder) unlinkSocket() {
	dir := h.cfg.StateDir
	lock, err := os.OpenFile(filepath.Join(dir, holderLock), os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return
	}
	// The pid file names the current holder: only that one may unlink.
	if rec, err := readHolderRecord(dir); err != nil || rec.pid != hostPID() {
		return
	}
	_ = os.Remove(filepath.Join(dir, holderSockName()))
	_ = os.Remove(filepath.Join(dir, holderPidFile))
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

// handle runs one command for one connection.
func (h *holder) handle(c *net.UnixConn) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		h.active--
		h.last = time.Now()
		h.mu.Unlock()
	}()
	defer c.Close()
	req, files, err := readHoldRequest(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		sendStatus(c, statusMsg{Err: "holder: " + err.Error(), Setup: true})
		return
	}
	cfg := *h.cfg
	cfg.Mode = modeCommand
	cfg.StateDir = ""
	cfg.IdleNS = 0
	cfg.Argv, cfg.Env, cfg.Cwd = req.Argv, req.Env, req.Cwd
	line, err := json.Marshal(&cfg)
	if err != nil {
		sendStatus(c, statusMsg{Err: "holder: " + err.Error(), Setup: true})
		return
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		sendStatus(c, statusMsg{Err: "holder: " + err.Error(), Setup: true})
		return
	}
	defer ctlW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		sendStatus(c, statusMsg{Err: "holder: " + err.Error(), Setup: true})
		return
	}
	defer statR.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{initArgv0},
		Env:        []string{},
		Stdin:      files[0],
		Stdout:     files[1],
		Stderr:     files[2],
		ExtraFiles: []*os.File{ctlR, statW},
		SysProcAttr: &syscall.SysProcAttr{
			// Its own PID namespace: the command's init is its PID 1,
			// and its exit kills whatever the command left behind.
			Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS,
		},
	}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	}
	err = cmd.Start()
	ctlR.Close()
	statW.Close()
	for _, f := range files {
		f.Close()
	}
	files = nil
	if err != nil {
		sendStatus(c, statusMsg{Err: "start the command's init: " + err.Error(), Setup: true})
		return
	}
	_, _ = ctlW.Write(append(line, '\n'))
	ctlW.Close()
	// The client never writes after its request: any end of its side
	// (a timeout, a cancel, a dead CLI) kills the command at once.
	go func() {
		_, _ = io.Copy(io.Discard, c)
		_ = cmd.Process.Kill()
	}()
	_, _ = io.Copy(c, statR)
	_ = cmd.Wait()
}

// sendStatus writes one status line to a client.
func sendStatus(w io.Writer, m statusMsg) {
	b, _ := json.Marshal(m)
	_, _ = w.Write(append(b, '\n'))
}

// readHoldRequest reads one request and its three descriptors.
func readHoldRequest(c *net.UnixConn) (holdRequest, []*os.File, error) {
	var req holdRequest
	hdr := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(3*4))
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
			files = append(files, os.NewFile(uintptr(fd), "stdio"))
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
	if len(files) != 3 {
		return req, files, fmt.Errorf("got %d descriptors, want 3", len(files))
	}
	return req, files, nil
}
