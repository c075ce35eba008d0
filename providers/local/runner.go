//go:build linux

package local

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runForeground runs a command of the machine for a caller that waits for
// it: in a session of its own (its process group is the command's), with
// its outputs relayed to the caller's until it exits. Then the status is
// reported, while what the command left running in the background keeps
// outputs that never break: the runner reads and drops what they write
// until the last of them is gone (counted in leftovers). The control pipe
// stays open while the caller waits; its end before the command's (a
// cancellation, a timeout, a dead CLI) kills the command's process group.
func (r *runner) runForeground(cfg *initConfig, rep *reporter) int {
	path, cwd, code, ok := resolveCommand(cfg, rep)
	if !ok {
		return code
	}
	outs, err := r.relays()
	if err != nil {
		rep.fail(err)
		return 125
	}
	release := func() {
		for _, o := range outs {
			o.close()
		}
	}
	for i, o := range outs {
		o.use(1+i, r.null)
	}
	pid, err := startCommand(path, cwd, cfg, []uintptr{0, uintptr(outs[0].w), uintptr(outs[1].w)}, &syscall.SysProcAttr{Setsid: true})
	for _, o := range outs {
		o.closeWriter()
	}
	if err != nil {
		release()
		return execFailed(rep, cfg.Argv[0], err)
	}
	for _, o := range outs {
		go o.forward()
	}
	status := waitWatching(pid)
	for _, o := range outs {
		o.finish()
		if o.orphaned() {
			r.leftovers.start(o.discard)
		} else {
			o.release()
		}
	}
	exitWith(rep, status)
	return status
}

// drains are the relays a runner keeps draining for what commands left
// running: they end when the last writer of their pipe is gone.
type drains struct {
	wg sync.WaitGroup
	n  atomic.Int32
}

// start runs drain beside the runner's next operations.
func (d *drains) start(drain func()) {
	d.n.Add(1)
	d.wg.Go(func() {
		defer d.n.Add(-1)
		drain()
	})
}

// any says whether a drain runs.
func (d *drains) any() bool { return d.n.Load() > 0 }

// wait waits for every drain to end.
func (d *drains) wait() { d.wg.Wait() }

// waitWatching waits for the command pid and returns its status as a
// shell reports it (128+signal for a killed command), while it watches
// the control pipe: the pipe's end before the command's (the caller went
// away) kills the command's process group. Both waits park in the
// runtime's poller (see watch): no goroutine holds a thread in a blocking
// call while the command runs, so the runtime's monitor sleeps instead of
// waking every few tens of microseconds on the CPU the command runs on.
func waitWatching(pid int) int {
	exited, err := watchExit(pid)
	if err != nil {
		return waitFor(pid)
	}
	defer exited.Close()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		// A pidfd polls readable once its process has exited.
		_ = whenReady(exited, func(fd int) bool { return pollNow(fd) != 0 })
	}()
	gone := make(chan struct{})
	if ctl, err := watch(ctlFD, "control"); err == nil {
		defer ctl.Close()
		go func() {
			if whenReady(ctl, drainedToEnd) == nil {
				close(gone)
			}
		}()
	}
	select {
	case <-ended:
	case <-gone:
		// The caller is gone: the command's group goes, and the wait
		// goes on for its end.
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	return waitFor(pid)
}

// watchExit returns a pidfd of the process pid in the runtime's poller,
// which reports it readable once the process exited. A pidfd made
// non-blocking is this runner's alone and goes into the poller as it is;
// a kernel without PIDFD_NONBLOCK (before Linux 5.10) gets watch.
func watchExit(pid int) (*os.File, error) {
	pidfd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err == nil {
		return os.NewFile(uintptr(pidfd), "command"), nil
	}
	if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		return nil, err
	}
	defer unix.Close(pidfd)
	return watch(pidfd, "command")
}

// drainedToEnd reads and drops what is in the pipe fd without blocking and
// says whether every writer is gone.
func drainedToEnd(fd int) bool {
	buf := make([]byte, 256)
	return untilDrained(fd, func() bool {
		n, err := unix.Read(fd, buf)
		return n > 0 || err == unix.EINTR || err == unix.EAGAIN
	})
}

// untilDrained calls take while the pipe fd holds data, without waiting,
// and says whether the pipe is done with: take said so (false), or every
// writer is gone.
func untilDrained(fd int, take func() bool) bool {
	for {
		ev := pollNow(fd)
		if ev&unix.POLLIN == 0 {
			return ev != 0 // POLLHUP or POLLERR: no writer left
		}
		if !take() {
			return true
		}
	}
}

// watch returns a duplicate of fd that the runtime's poller watches, for
// whenReady. The open file description keeps its blocking mode (os.NewFile
// puts only a non-blocking descriptor in the poller, so the mode is set
// for the registration and restored after it): the file is only waited
// on, and its reads and writes go through fd as before.
func watch(fd int, name string) (*os.File, error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, err
	}
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if flags&unix.O_NONBLOCK == 0 {
		if err := unix.SetNonblock(d, true); err != nil {
			unix.Close(d)
			return nil, err
		}
	}
	f := os.NewFile(uintptr(d), name)
	if flags&unix.O_NONBLOCK == 0 {
		_ = unix.SetNonblock(d, false)
	}
	return f, nil
}

// whenReady calls ready with f's descriptor at once and again each time
// the poller reports f readable, until it says true; ready must not
// block. It fails when f is closed or its read deadline passes.
func whenReady(f *os.File, ready func(fd int) bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool { return ready(int(fd)) })
}

// pollNow returns the poll events of fd at this moment (POLLIN, POLLHUP,
// POLLERR), without waiting.
func pollNow(fd int) int16 {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			if err != nil {
				return unix.POLLERR
			}
			return fds[0].Revents
		}
	}
}

// runBackground starts a command detached from its caller: the runner
// reports its own pid, becomes the leader of a new session and executes
// the command, whose output goes to the log the init opened as its stdout
// and stderr. The init records its end.
func runBackground(cfg *initConfig, rep *reporter) int {
	path, cwd, code, ok := resolveCommand(cfg, rep)
	if !ok {
		return code
	}
	if _, err := unix.Setsid(); err != nil {
		rep.fail(err)
		return 125
	}
	if err := unix.Chdir(cwd); err != nil {
		rep.fail(err)
		return 125
	}
	rep.send(statusMsg{PID: os.Getpid()})
	var err error
	withSlack(commandSlack(), func() { err = unix.Exec(path, cfg.Argv, cfg.Env) })
	return execFailed(rep, cfg.Argv[0], err)
}

// waitFor waits for the child pid and returns its status as a shell
// reports it (128+signal for a killed command). A runner's only children
// are its command: the command's orphans go to the machine's init.
func waitFor(pid int) int {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 125
		}
		return exitCode(ws)
	}
}

// relayBuf is the size of a relay's moves and of its pipe.
const relayBuf = 1 << 20

// relay carries one output of a command (the pipe r, w) to the caller's
// descriptor out while the command runs; null is /dev/null, which takes
// out's place once the relay finished.
type relay struct {
	r, w, out, null int
	// watched is r in the runtime's poller (see watch): forward waits on
	// it, and finish stops that wait with a deadline.
	watched   *os.File
	forwarded chan struct{}
	// broken says that out no longer takes data; copy says that out
	// takes no splice.
	broken, copy bool
	buf          []byte
}

// prepare makes the relays of the next foreground command while the
// runner waits for it (work its caller then does not wait for), unless
// the last operation left them unused. Failing, it leaves them to relays,
// which reports why.
func (r *runner) prepare() {
	if r.outs == nil {
		r.outs, _ = makeRelays()
	}
}

// relays hands over the relays prepare made, or makes them now.
func (r *runner) relays() ([]*relay, error) {
	if outs := r.outs; outs != nil {
		r.outs = nil
		return outs, nil
	}
	return makeRelays()
}

// makeRelays makes the relays of a command's stdout and stderr.
func makeRelays() ([]*relay, error) {
	var outs []*relay
	for range 2 {
		o, err := makeRelay()
		if err != nil {
			for _, o := range outs {
				o.close()
			}
			return nil, err
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// makeRelay makes a relay's pipe, for use.
func makeRelay() (*relay, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	watched, err := watch(p[0], "output")
	if err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, err
	}
	return &relay{r: p[0], w: p[1], out: -1, null: -1, watched: watched, forwarded: make(chan struct{})}, nil
}

// use makes o the relay of the output out, /dev/null (null) taking out's
// place once it finished. The pipe grows to relayBuf now, not while it
// waits: an idle runner's pipes take the user's pipe allowance at their
// default size only.
func (o *relay) use(out, null int) {
	o.out, o.null = out, null
	_, _ = unix.FcntlInt(uintptr(o.w), unix.F_SETPIPE_SZ, relayBuf)
}

// closeWriter closes the runner's copy of the pipe's write end.
func (o *relay) closeWriter() {
	if o.w >= 0 {
		unix.Close(o.w)
		o.w = -1
	}
}

// close releases a relay that never forwarded.
func (o *relay) close() {
	o.closeWriter()
	unix.Close(o.r)
	o.watched.Close()
}

// forward moves what arrives on the pipe to out until the command exits
// (finish stops it), every writer is gone, or out breaks. It waits in the
// runtime's poller; a move that out holds up blocks, as out's reader
// should make it.
func (o *relay) forward() {
	defer close(o.forwarded)
	_ = whenReady(o.watched, func(int) bool {
		return untilDrained(o.r, func() bool {
			n, err := o.move(relayBuf)
			o.broken = err != nil
			return err == nil && n > 0 // n == 0: every writer is gone
		})
	})
}

// finish stops forward, moves what the command wrote before it exited
// (all of it is in the pipe by then) and closes out.
func (o *relay) finish() {
	_ = o.watched.SetReadDeadline(time.Unix(1, 0))
	<-o.forwarded
	o.watched.Close()
	if !o.broken {
		n, err := unix.IoctlGetInt(o.r, unix.TIOCINQ)
		for err == nil && n > 0 {
			moved, merr := o.move(n)
			if merr != nil || moved <= 0 {
				break
			}
			n -= moved
		}
	}
	_ = holdFDsWith(o.null, o.out)
}

// move moves up to max bytes from the pipe to out: spliced where out
// takes it (a pipe, a file, a socket), else copied.
func (o *relay) move(max int) (int, error) {
	for {
		if !o.copy {
			n, err := unix.Splice(o.r, nil, o.out, nil, max, unix.SPLICE_F_MOVE)
			switch err {
			case unix.EINTR:
				continue
			case unix.EINVAL:
				o.copy = true
			default:
				return int(n), err
			}
		}
		if o.buf == nil {
			o.buf = make([]byte, 64<<10)
		}
		n, err := unix.Read(o.r, o.buf[:min(max, len(o.buf))])
		if err == unix.EINTR {
			continue
		}
		if n <= 0 {
			return 0, err
		}
		for b := o.buf[:n]; len(b) > 0; {
			w, err := unix.Write(o.out, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return 0, err
			}
			b = b[w:]
		}
		return n, nil
	}
}

// orphaned says whether the pipe still has writers once the command
// exited: what the command left running holds it.
func (o *relay) orphaned() bool { return pollNow(o.r)&unix.POLLHUP == 0 }

// release closes the read end of a relay that finished.
func (o *relay) release() { unix.Close(o.r) }

// discard reads and drops what the command's leftovers write, until the
// last of them closes the pipe. It waits in the runtime's poller, not on a
// thread of its own: a runner may keep draining for many commands, and a
// thread blocked for each would have to be made, which a full pids limit
// forbids.
func (o *relay) discard() {
	if err := unix.SetNonblock(o.r, true); err != nil {
		unix.Close(o.r)
		return
	}
	f := os.NewFile(uintptr(o.r), "leftovers")
	defer f.Close()
	if !spliceAway(f) {
		_, _ = io.Copy(io.Discard, f)
	}
}

// spliceAway moves what arrives on the pipe f to /dev/null until its
// writers are gone, or it fails; false if /dev/null takes no splice here.
func spliceAway(f *os.File) bool {
	null, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(null)
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	for {
		var n int64
		var serr error
		if err := rc.Read(func(fd uintptr) bool {
			n, serr = unix.Splice(int(fd), nil, null, nil, relayBuf, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			return serr != unix.EAGAIN
		}); err != nil {
			return true
		}
		switch {
		case serr == unix.EINVAL:
			return false
		case serr == unix.EINTR:
		case serr != nil || n == 0:
			return true
		}
	}
}
