//go:build linux

package local

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// Terminals. The host opens a pseudo-terminal pair and hands the slave to
// the runner as the command's stdin, stdout and stderr; the runner starts
// the command as the leader of a new session with the slave as its
// controlling terminal (runOnTerminal) and closes its own copies, so that
// the master reads end once the command and what it left holding the
// terminal are gone. The host keeps the master: output, input and resizes
// (TIOCSWINSZ, which sends the command's foreground group SIGWINCH) go
// through it.

// drainWait is how long a read waits for more output once the command
// has ended (what it left running may hold the terminal).
const drainWait = 100 * time.Millisecond

var _ providers.Terminal = (*Provider)(nil)

// terminalRun is the part of a terminal that exec deals with: the slave,
// which the host closes once the runner holds it.
type terminalRun struct {
	slave *os.File
	once  sync.Once
}

// launched closes the host's copy of the slave (once).
func (t *terminalRun) launched() { t.once.Do(func() { t.slave.Close() }) }

// ExecTerminal runs a command on a pseudo-terminal (providers.Terminal).
// The weak mode, which has no machine to run it, refuses.
func (p *Provider) ExecTerminal(ctx context.Context, id string, req providers.ExecRequest, term providers.TerminalRequest) (providers.TerminalSession, error) {
	if p.weak {
		return nil, providers.Errorf(providers.ErrUnsupported, Name, "exec", "terminals need the sandbox's machine, which the weak mode (%s=1) has not", weakEnvVar)
	}
	if req.Background {
		return nil, providers.Errorf(providers.ErrInvalid, Name, "exec", "a command on a terminal cannot run in the background")
	}
	master, slave, err := openPTY()
	if err != nil {
		return nil, providers.Errorf(providers.ErrUnavailable, Name, "exec", "opening a terminal: %v", err)
	}
	s := &ptySession{master: master, done: make(chan struct{})}
	term = term.WithDefaults()
	if err := s.Resize(term.Cols, term.Rows); err != nil {
		master.Close()
		slave.Close()
		return nil, err
	}
	req.Env = term.Env(req.Env)
	req.Stdin, req.Stdout, req.Stderr, req.Timeout = slave, slave, slave, 0
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	tr := &terminalRun{slave: slave}
	go func() {
		defer cancel()
		s.res, s.err = p.exec(runCtx, id, req, tr)
		tr.launched()
		close(s.done)
	}()
	go s.wakeReaders()
	return s, nil
}

// ptySession is a command on a terminal (providers.TerminalSession).
type ptySession struct {
	master *os.File
	cancel context.CancelFunc
	// done is closed when exec returned res and err.
	done chan struct{}
	res  providers.ExecResult
	err  error

	closeOnce sync.Once
}

// Read returns the terminal's output; io.EOF once the command ended and
// the terminal has nothing more.
func (s *ptySession) Read(b []byte) (int, error) {
	ended := false
	select {
	case <-s.done:
		ended = true
		_ = s.master.SetReadDeadline(time.Now().Add(drainWait))
	default:
	}
	for {
		n, err := s.master.Read(b)
		switch {
		case err == nil || n > 0:
			return n, nil
		case errors.Is(err, syscall.EIO), errors.Is(err, os.ErrClosed):
			// Every slave is closed: the terminal has hung up.
			return 0, io.EOF
		case errors.Is(err, os.ErrDeadlineExceeded):
			if ended {
				return 0, io.EOF
			}
			// The command ended while this read waited: drain.
			ended = true
			_ = s.master.SetReadDeadline(time.Now().Add(drainWait))
			continue
		}
		return 0, err
	}
}

// Write types input into the terminal.
func (s *ptySession) Write(b []byte) (int, error) {
	n, err := s.master.Write(b)
	if err != nil && errors.Is(err, syscall.EIO) {
		return n, io.ErrClosedPipe
	}
	return n, err
}

// Resize sets the terminal's size.
func (s *ptySession) Resize(cols, rows uint16) error {
	ws := &unix.Winsize{Col: cols, Row: rows}
	return control(s.master, func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
}

// Wait waits for the command's end.
func (s *ptySession) Wait() (providers.ExecResult, error) {
	<-s.done
	return s.res, s.err
}

// Close kills the command if it runs, waits for its end and closes the
// terminal. A reader blocked in Read then gets io.EOF.
func (s *ptySession) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		_ = s.master.SetReadDeadline(time.Now())
		s.master.Close()
	})
	return nil
}

// wakeReaders makes blocked reads look again once the command ended.
func (s *ptySession) wakeReaders() {
	<-s.done
	_ = s.master.SetReadDeadline(time.Now().Add(drainWait))
}

// openPTY opens a pseudo-terminal pair: the master (non-blocking, in the
// runtime's poller, so that reads take deadlines) and its slave.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var n int
	err = control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return err
		}
		var err error
		n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err == nil {
		slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// control runs fn on f's descriptor without taking it out of the poller
// (as f.Fd would).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// runOnTerminal is runForeground for a command on a terminal: the
// runner's stdin is the terminal's slave, which becomes the command's
// stdin, stdout, stderr and controlling terminal in a session of its own.
// The runner closes its copies at once, so that the host's reads end
// with the command's.
func runOnTerminal(cfg *initConfig, rep *reporter) int {
	path, cwd, code, ok := resolveCommand(cfg, rep)
	if !ok {
		return code
	}
	pid, err := startCommand(path, cwd, cfg, []uintptr{0, 0, 0}, &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0})
	_ = holdFDs(0, 1, 2)
	if err != nil {
		return execFailed(rep, cfg.Argv[0], err)
	}
	status := waitWatching(pid)
	exitWith(rep, status)
	return status
}
