package local

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// A sandbox's holder is a long-lived init that keeps the sandbox's
// namespaces and mounts built, so that an Exec only starts a small
// per-command init (new PID and mount namespaces, fresh /proc, pivot,
// Landlock, no capabilities) instead of building everything again. Its files
// in the sandbox directory:
const (
	holderLock    = "holder.lock" // flock serialising starts, retirement and Delete
	holderPidFile = "holder.pid"  // "pid starttime" of the current holder
)

// defaultHolderIdle is how long a holder without commands stays before it
// exits; the next Exec starts a new one.
const defaultHolderIdle = 5 * time.Minute

// holderStopWait bounds how long Delete waits for a killed holder to exit.
const holderStopWait = 5 * time.Second

// holderSockName is the socket's name; it carries the protocol version.
func holderSockName() string { return "holder-v" + strconv.Itoa(holdVersion) + ".sock" }

// holderRecord identifies a holder process beyond its (recyclable) pid.
type holderRecord struct {
	pid   int
	start uint64 // start time in clock ticks since boot, from /proc/pid/stat
}

// readHolderRecord reads the holder's pid file in dir.
func readHolderRecord(dir string) (holderRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, holderPidFile))
	if err != nil {
		return holderRecord{}, err
	}
	var r holderRecord
	if _, err := fmt.Sscanf(string(b), "%d %d", &r.pid, &r.start); err != nil {
		return holderRecord{}, fmt.Errorf("holder pid file: %w", err)
	}
	return r, nil
}

// procStartTime reads the start time of pid (field 22 of /proc/pid/stat).
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// withDir calls fn with a short name of dir (through /proc/self/fd), since
// a socket address holds at most 108 bytes and state directories can be
// deeper than that.
func withDir(dir string, fn func(short string) error) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn("/proc/self/fd/" + strconv.Itoa(fd))
}

// dialHolder connects to the holder of the sandbox in dir.
func dialHolder(dir string) (*net.UnixConn, error) {
	var c *net.UnixConn
	err := withDir(dir, func(short string) error {
		var err error
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: short + "/" + holderSockName(), Net: "unix"})
		return err
	})
	return c, err
}

// lockHolder takes the sandbox's holder lock; closing the file releases it.
func lockHolder(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, holderLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// startHolder starts the sandbox's holder unless a live one answers, under
// the holder lock so that concurrent CLIs start one holder between them.
// The host creates the listening socket (mode 0600 in the sandbox's 0700
// directory) and hands it over. The holder is detached: its own session,
// no parent-death signal, stdio on /dev/null.
func (p *Provider) startHolder(dir, id string, sharedNet bool) error {
	lock, err := lockHolder(dir)
	if err != nil {
		return fmt.Errorf("local: sandbox %s: holder lock: %w", id, err)
	}
	defer lock.Close()
	if _, err := os.Lstat(filepath.Join(dir, metaFile)); err != nil {
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	if c, err := dialHolder(dir); err == nil {
		c.Close()
		return nil
	}
	sock := filepath.Join(dir, holderSockName())
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("local: sandbox %s: stale holder socket: %w", id, err)
	}
	var ln *net.UnixListener
	err = withDir(dir, func(short string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: short + "/" + holderSockName(), Net: "unix"})
		return err
	})
	if err != nil {
		return fmt.Errorf("local: sandbox %s: holder socket: %w", id, err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		os.Remove(sock)
		return fmt.Errorf("local: sandbox %s: holder socket: %w", id, err)
	}
	defer lnFile.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		os.Remove(sock)
		return fmt.Errorf("local: sandbox %s: holder socket: %w", id, err)
	}
	if err := p.spawnHolder(dir, id, sharedNet, lnFile); err != nil {
		os.Remove(sock)
		return err
	}
	return nil
}

// spawnHolder starts the holder process on lnFile and waits until it is
// ready, then records it.
func (p *Provider) spawnHolder(dir, id string, sharedNet bool, lnFile *os.File) error {
	slotN, slot, err := acquireSlot(dir, p.layers)
	if err != nil {
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	defer slot.Close()
	cfg := &initConfig{Mode: modeHold, StateDir: dir, IdleNS: int64(p.holderIdle)}
	p.fillConfig(dir, slotN, cfg, sharedNet)
	line, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("local: encode holder configuration: %w", err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ctlW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		return err
	}
	defer statR.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{initArgv0},
		Env:        []string{},
		ExtraFiles: []*os.File{ctlR, statW, lnFile, slot},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  cloneFlags(sharedNet),
			UidMappings: idMap(p.uid),
			GidMappings: idMap(p.gid),
			Setsid:      true,
		},
	}
	if p.uid != 0 {
		// As for the cold init (see launch); the holder keeps only
		// CAP_SYS_ADMIN and CAP_SETPCAP once the tree is built.
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_SETPCAP}
	}
	err = cmd.Start()
	ctlR.Close()
	statW.Close()
	if err != nil {
		return startError(id, err)
	}
	// Reap it whenever it ends, in a process that lives that long.
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	_, _ = ctlW.Write(append(line, '\n'))
	ctlW.Close()
	var m statusMsg
	if err := json.NewDecoder(statR).Decode(&m); err != nil || !m.Done {
		_ = cmd.Process.Kill()
		<-exited
		if m.Setup {
			return setupErr(id, m)
		}
		return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: "the sandbox holder ended without reporting"}
	}
	start, err := procStartTime(cmd.Process.Pid)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, holderPidFile), fmt.Appendf(nil, "%d %d\n", cmd.Process.Pid, start), 0o600)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("local: sandbox %s: record holder: %w", id, err)
	}
	return nil
}

// stopHolder kills the sandbox's holder, if one runs, and waits for it to
// end. The pid is trusted only through a pidfd whose process has the
// recorded start time, so a recycled pid is never signalled.
func stopHolder(dir string) error {
	lock, err := lockHolder(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	rec, err := readHolderRecord(dir)
	if err != nil {
		return nil
	}
	defer os.Remove(filepath.Join(dir, holderPidFile))
	fd, err := unix.PidfdOpen(rec.pid, 0)
	if err != nil {
		return nil // already gone
	}
	defer unix.Close(fd)
	if st, err := procStartTime(rec.pid); err != nil || st != rec.start {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stop the sandbox holder: %w", err)
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(holderStopWait)
	for time.Now().Before(deadline) {
		n, err := unix.Poll(pfd, int(time.Until(deadline).Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			break
		}
	}
	return nil
}

// execWarm runs one command through the sandbox's holder, starting the
// holder if none answers. ok is false when the command was not handed to a
// holder (none could be started or reached): the caller then takes the cold
// path, and nothing has run.
func (p *Provider) execWarm(ctx, runCtx context.Context, dir, id string, cfg *initConfig, sharedNet bool, req providers.ExecRequest) (res providers.ExecResult, ok bool, err error) {
	conn, err := dialHolder(dir)
	if err != nil {
		if err := p.startHolder(dir, id, sharedNet); err != nil {
			return res, false, nil
		}
		if conn, err = dialHolder(dir); err != nil {
			return res, false, nil
		}
	}
	defer conn.Close()
	body, err := json.Marshal(holdRequest{Version: holdVersion, Argv: cfg.Argv, Env: cfg.Env, Cwd: cfg.Cwd})
	if err != nil {
		return res, true, fmt.Errorf("local: encode command: %w", err)
	}
	st, err := newWarmStdio(req)
	if err != nil {
		return res, true, fmt.Errorf("local: exec in %s: %w", id, err)
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	msg = append(msg, body...)
	rights := unix.UnixRights(int(st.send[0].Fd()), int(st.send[1].Fd()), int(st.send[2].Fd()))
	_, _, err = conn.WriteMsgUnix(msg, rights, nil)
	st.closeSent()
	if err != nil {
		st.abort()
		return res, false, nil
	}
	st.run(req)
	done := make(chan struct{})
	if runCtx.Done() != nil {
		go func() {
			select {
			case <-runCtx.Done():
				// The holder kills the command when our side ends.
				_ = conn.CloseWrite()
			case <-done:
			}
		}()
	}
	dec := json.NewDecoder(conn)
	var last statusMsg
	got := false
	for {
		var m statusMsg
		if err := dec.Decode(&m); err != nil {
			break
		}
		last, got = m, true
	}
	close(done)
	st.wait()
	died := func() error {
		return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: "the sandbox holder ended without reporting the command's status"}
	}
	out := execOutcome(id, ctx, runCtx, req.Timeout, last, got, died)
	return out.ExecResult, true, out.err
}

// warmStdio are the descriptors handed to the holder for one command: the
// caller's own files where it gave *os.File (zero copy), else pipes the
// provider copies, else /dev/null.
type warmStdio struct {
	send    [3]*os.File // passed to the holder, closed once sent
	stdinW  *os.File    // provider's end of a stdin pipe
	outR    [2]*os.File // provider's ends of stdout and stderr pipes
	opened  []*os.File  // files this struct opened or created
	copying sync.WaitGroup
}

// newWarmStdio prepares the descriptors of req's streams.
func newWarmStdio(req providers.ExecRequest) (*warmStdio, error) {
	st := &warmStdio{}
	fail := func(err error) (*warmStdio, error) {
		st.closeSent()
		st.abort()
		return nil, err
	}
	switch in := req.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return fail(err)
		}
		st.send[0] = f
		st.opened = append(st.opened, f)
	case *os.File:
		st.send[0] = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		st.send[0], st.stdinW = r, w
		st.opened = append(st.opened, r)
	}
	for i, out := range []io.Writer{req.Stdout, req.Stderr} {
		switch w := out.(type) {
		case nil:
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				return fail(err)
			}
			st.send[i+1] = f
			st.opened = append(st.opened, f)
		case *os.File:
			st.send[i+1] = w
		default:
			r, pw, err := os.Pipe()
			if err != nil {
				return fail(err)
			}
			st.send[i+1], st.outR[i] = pw, r
			st.opened = append(st.opened, pw)
		}
	}
	return st, nil
}

// closeSent closes the descriptors this struct opened for the holder; the
// caller's own files stay open.
func (st *warmStdio) closeSent() {
	for _, f := range st.opened {
		f.Close()
	}
	st.opened = nil
}

// abort closes the provider's ends when the command never started.
func (st *warmStdio) abort() {
	if st.stdinW != nil {
		st.stdinW.Close()
	}
	for _, r := range st.outR {
		if r != nil {
			r.Close()
		}
	}
}

// run starts copying between the caller's streams and the pipes.
func (st *warmStdio) run(req providers.ExecRequest) {
	if st.stdinW != nil {
		go feed(st.stdinW, req.Stdin)
	}
	for i, w := range []io.Writer{req.Stdout, req.Stderr} {
		r := st.outR[i]
		if r == nil {
			continue
		}
		st.copying.Add(1)
		go func() {
			defer st.copying.Done()
			_, _ = io.Copy(w, r)
			r.Close()
		}()
	}
}

// wait returns once the output copies ended: the command's PID namespace is
// gone by then, so nothing holds the pipes' write ends.
func (st *warmStdio) wait() { st.copying.Wait() }
