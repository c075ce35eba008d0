//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// usernsHint says how to enable unprivileged user namespaces.
const usernsHint = "the local provider needs unprivileged user namespaces: " +
	"check that `sysctl user.max_user_namespaces` is above 0 (set it with `sudo sysctl -w user.max_user_namespaces=15000`); " +
	"on Debian kernels run `sudo sysctl -w kernel.unprivileged_userns_clone=1`; " +
	"on Ubuntu 23.10 and later run `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` " +
	"or install an AppArmor profile with a `userns,` rule for this binary; " +
	"inside a container, allow clone(CLONE_NEWUSER) in its seccomp profile"

// abortGrace is how long a file operation may take to clean up after its
// input was aborted before the init is killed.
const abortGrace = 3 * time.Second

// cloneFlags are the namespaces of a sandbox; shared keeps the host network.
func cloneFlags(sharedNet bool) uintptr {
	f := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if !sharedNet {
		f |= unix.CLONE_NEWNET
	}
	return f
}

// nsAttr starts a process in a sandbox's new namespaces (cloneFlags) with
// the sandbox's id mappings (see idMapping); a user other than root
// keeps the capabilities an init needs (initAmbientCaps). Mappings that
// only a setuid tool may write (an unprivileged user's subordinate
// ranges) are left out: the starter writes them with writeIDMaps once the
// process runs, before the process needs its ids (the init reads its
// configuration first). Until then the process's ids are unmapped, so
// its execve keeps only the ambient capabilities, as a non-root user's
// always does.
func nsAttr(uids, gids idMapping, sharedNet bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Cloneflags: cloneFlags(sharedNet)}
	if uids.tool == "" {
		a.UidMappings = uids.maps()
	}
	if gids.tool == "" {
		a.GidMappings = gids.maps()
		// Root, which maps a range, lets runners give a command its
		// user's groups; a single mapped id has none to give.
		// (newgidmap allows setgroups for subordinate ranges.)
		a.GidMappingsEnableSetgroups = gids.ranged()
	}
	if uids.id != 0 {
		a.AmbientCaps = initAmbientCaps()
	}
	return a
}

// initStdio are the init's standard streams. Nil readers and writers mean
// /dev/null.
type initStdio struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// proc is one running operation: a runner of the sandbox's machine, or a
// weak-mode init.
type proc struct {
	id      string
	dir     string // the sandbox's state, when a machine runs the operation
	cmd     *exec.Cmd
	ctl     *os.File      // host end of the control pipe; closed once
	ctlOnce sync.Once     // closes ctl
	status  *bufio.Reader // init's status messages
	statusR *os.File
	exited  chan struct{} // closed when the operation is over
	waitErr error         // valid after exited
	slot    *os.File      // work directory lock (weak mode)
	stdinW  *os.File      // host end of a stdin pipe the provider feeds
	diag    *tailBuffer   // init's stderr when the caller gave none
	// conn is the connection to the machine whose runner runs the
	// operation (nil for a weak-mode init).
	conn *net.UnixConn
	// written is closed once the operation's configuration is in the
	// control pipe (a runner reads it only once it holds the operation's
	// descriptors).
	written chan struct{}
	// settled is closed by finish when a runner reported the
	// operation's end: the runner may live on for what its command
	// left running, and is not waited for.
	settled chan struct{}
	weak    bool // no namespaces: the init must be asked to clean up
	// oomKilled says whether the kernel's OOM killer ended a process of
	// the sandbox since the operation started (nil without a memory
	// limit).
	oomKilled func() bool
}

// launch starts one operation of the sandbox in dir: in a runner of its
// machine (started first when the sandbox is stopped), or, in the weak
// mode, which has no namespaces to keep a machine in, in an init of its
// own.
func (p *Provider) launch(dir, id string, cfg *initConfig, req machineRequest, stdio initStdio) (*proc, error) {
	if p.weak {
		return p.launchWeak(dir, id, cfg, req.Shared, stdio)
	}
	return p.launchMachine(dir, id, cfg, req, stdio)
}

// fillConfig completes cfg with the mounts of the sandbox in dir, using the
// overlay work directories of slot slotN: for a machine, everything its
// root is built from; in the weak mode, an operation's whole setting.
func (p *Provider) fillConfig(dir string, slotN int, cfg *initConfig, sharedNet bool, since time.Time, vouched uint64) {
	p.loadMasks(since, vouched) // before isolation reads p.masks
	cfg.Root = filepath.Join(p.dir, rootMount)
	cfg.Workspace = workspacePath(dir)
	cfg.HomeSrc = p.homePath(dir)
	cfg.Home = p.home
	cfg.SharedNet = sharedNet
	cfg.Links = p.host().links
	p.isolation(cfg, dir, slotN)
	cfg.Trash = filepath.Join(p.dir, trashDir)
	cfg.Spread = p.spread
	p.trashed.Store(true)
	work := slotDir(p.dir, slotN)
	cfg.Skel = filepath.Join(p.dir, skelDir)
	cfg.RootLayer = mountLayer{Name: rootLayerName, Upper: filepath.Join(dir, upperDir, rootLayerName), Work: filepath.Join(work, rootLayerName)}
	cfg.Layers = make([]mountLayer, len(p.host().layers))
	base, _ := p.etcBaseDir()
	for i, l := range p.host().layers {
		cfg.Layers[i] = mountLayer{Name: l.Name, Lower: l.Lower, Upper: filepath.Join(dir, upperDir, l.Name), Work: filepath.Join(work, l.Name)}
		if l.Name == "etc" {
			cfg.Layers[i].Base = base
		}
	}
}

// launchWeak starts a weak-mode init for one operation of the sandbox in
// dir with cfg, which it completes with the sandbox's paths.
func (p *Provider) launchWeak(dir, id string, cfg *initConfig, sharedNet bool, stdio initStdio) (*proc, error) {
	if err := p.adoptLegacyLayout(dir); err != nil {
		return nil, fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	slotN, slot, err := acquireSlot(p.dir, p.host().layers, p.spread)
	if err != nil {
		return nil, fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	p.fillConfig(dir, slotN, cfg, sharedNet, time.Now(), 0)
	cfg.Gated = cfg.Mode == modeExec
	frame := appendFrame(nil, encodeConfig(cfg))
	pr := &proc{id: id, slot: slot, exited: make(chan struct{}), weak: true}
	ends, err := pr.openEnds(stdio)
	if err != nil {
		pr.closeHost()
		return nil, err
	}
	pid, err := p.startCold(pr, ends)
	if err != nil {
		return nil, startError(id, err)
	}
	recordWeakRun(dir, pid, pr.exited)
	pr.status = bufio.NewReader(pr.statusR)
	if _, err := pr.ctl.Write(frame); err != nil && !errors.Is(err, syscall.EPIPE) {
		pr.kill()
		pr.finish()
		return nil, fmt.Errorf("local: sandbox %s: send init configuration: %w", id, err)
	}
	if cfg.Gated {
		// The init builds its setting meanwhile, and waits for the
		// start byte before it starts anything.
		if _, err := p.cg.enter(pid, id+"-"+strconv.Itoa(slotN), cfg.Resources); err != nil {
			pr.kill()
			if last, got := pr.finish(); got && last.Setup {
				return nil, setupErr(id, last)
			}
			return nil, fmt.Errorf("local: sandbox %s: %w", id, err)
		}
		if _, err := pr.ctl.Write([]byte{startByte}); err != nil && !errors.Is(err, syscall.EPIPE) {
			pr.kill()
			pr.finish()
			return nil, fmt.Errorf("local: sandbox %s: start the command: %w", id, err)
		}
	}
	return pr, nil
}

// startCold starts pr's weak-mode init on the spot, with the descriptors
// ends, and returns its pid: only the weak mode starts an init per
// operation, and it has no namespaces (a sandbox's namespaces are its
// machine's, see startInit). The init is started from a goroutine locked
// to its OS thread, which stays alive until the init exits: Pdeathsig
// fires when the starting thread ends, not when the process does. On an
// error pr's host ends are closed.
func (p *Provider) startCold(pr *proc, ends *opEnds) (int, error) {
	cmd := &exec.Cmd{
		Path:       p.exe,
		Args:       []string{initArgv0},
		Env:        machineEnv(threadSlack()), // nothing of the host's environment
		ExtraFiles: ends.files[:2],
		Stdin:      ends.files[2],
		Stdout:     ends.files[3],
		Stderr:     ends.files[4],
		// SIGTERM, not SIGKILL, when the CLI dies: the init kills
		// what the command left behind (see weak.go).
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM},
	}
	pr.cmd = cmd

	// The copies start first: the goroutine below waits for them once the
	// init has exited (a failed start closes the pipes' write ends, which
	// ends them).
	ends.outs.start(ends.copyTo...)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		pr.waitErr = cmd.Wait()
		ends.outs.copying.Wait()
		close(pr.exited)
	}()
	err := <-started
	// The init holds its ends now, or never will.
	ends.closeChild()
	if err != nil {
		pr.closeHost()
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// opEnds are the descriptors an operation's init runs with, in the order
// it expects them: control, status, stdin, stdout, stderr.
type opEnds struct {
	files []*os.File
	// made are the files made here, closed once the init holds them
	// (the caller's own files stay open).
	made []*os.File
	// outs copy the pipes of outputs that are not files into copyTo.
	outs   outputs
	copyTo []io.Writer
}

// openEnds makes the descriptors of one operation of pr from stdio, and
// keeps pr's ends of them: the control pipe's writer, the status pipe's
// reader, a stdin pipe's writer, and a tail of stderr when the caller
// wants none. The null device stands in for nil streams.
func (pr *proc) openEnds(stdio initStdio) (_ *opEnds, err error) {
	e := &opEnds{}
	defer func() {
		if err != nil {
			e.closeChild()
			e.outs.close()
		}
	}()
	add := func(f *os.File, made bool) {
		e.files = append(e.files, f)
		if made {
			e.made = append(e.made, f)
		}
	}
	ctlR, ctlW, err := opPipe(false)
	if err != nil {
		return nil, err
	}
	pr.ctl = ctlW
	add(ctlR, true)
	statR, statW, err := opPipe(true)
	if err != nil {
		return nil, err
	}
	pr.statusR = statR
	add(statW, true)
	switch in := stdio.stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		add(f, true)
	case *os.File:
		add(in, false)
	default:
		r, w, err := opPipe(false)
		if err != nil {
			return nil, err
		}
		_, _ = unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, outPipeSize)
		add(r, true)
		pr.stdinW = w
	}
	stderrW := stdio.stderr
	if stderrW == nil {
		pr.diag = &tailBuffer{max: 4096}
		stderrW = pr.diag
	}
	for _, w := range []io.Writer{stdio.stdout, stderrW} {
		child, to, err := e.outs.pipeFor(w)
		if err != nil {
			return nil, err
		}
		switch {
		case child == nil:
			if child, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
				return nil, err
			}
			add(child, true)
		case to != nil:
			e.copyTo = append(e.copyTo, to)
			add(child, true)
		default:
			add(child, false)
		}
	}
	return e, nil
}

// opPipe makes a pipe between this process and an operation's init or
// runner: it returns the read and write ends, the host's end (the reader
// when hostReads) in the runtime's poller, the other one a plain
// blocking descriptor for the child alone. (os.Pipe puts both ends in the
// poller, and each must then be taken out again before it is handed
// over: a dozen system calls more per operation.)
func opPipe(hostReads bool) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	host := p[1]
	if hostReads {
		host = p[0]
	}
	if _, err := unix.FcntlInt(uintptr(host), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	r, w = os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1")
	return r, w, nil
}

// closeChild closes the descriptors made for the init: once it holds
// them, or once it will not.
func (e *opEnds) closeChild() {
	for _, f := range e.made {
		f.Close()
	}
	e.made = nil
}

// fdsOf returns the descriptor numbers of files.
func fdsOf(files []*os.File) []int {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	return fds
}

// initAmbientCaps are the capabilities an init started by a non-root user
// needs: exec drops the capabilities of a non-root uid; the init needs
// these to mount, to configure loopback, to empty its bounding set, and
// DAC_OVERRIDE for overlayfs to clean the mode-000 work directory a
// previous mount left; SETUID and SETGID pass on to the runners, which
// keep them until they become their operation's user when the sandbox
// maps a range of ids (initConfig.SetID; with one id they can name no
// other); CHOWN to give a user the sandbox made for it (create --user)
// its home and /workspace; SYS_RESOURCE for the disk quota's cut-off to
// reach the processes of other users (see confineFiles); FOWNER and
// FSETID because overlayfs changes the upper layer's files with the
// credentials of whoever mounted it: without them, a user's chmod,
// utimes or setgid bit on a file of its own (of another id than the
// init's) would be refused. All are dropped before any sandboxed code
// runs.
func initAmbientCaps() []uintptr {
	return []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_SETPCAP,
		unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_CHOWN, unix.CAP_SYS_RESOURCE, unix.CAP_FOWNER, unix.CAP_FSETID}
}

// outPipeSize is the capacity asked for the pipes that carry an operation's
// input and output, and outCopyBuf the size of the reads that empty them:
// large chunks keep the copies (and whatever feeds or consumes them) to
// few wake-ups. A copy starts with outCopyStart (see copyOut).
const (
	outPipeSize  = 1 << 20
	outCopyBuf   = 1 << 20
	outCopyStart = 64 << 10
)

// outputs are the pipes that carry an operation's stdout and stderr to
// writers that are not files, and the copies that empty them.
type outputs struct {
	copying sync.WaitGroup
	readers []*os.File
}

// pipeFor returns the descriptor the init writes to for w: w itself when it
// is a file, nil for nil (the null device), else the write end of a pipe
// whose read end start copies into w.
func (o *outputs) pipeFor(w io.Writer) (child *os.File, copyTo io.Writer, err error) {
	switch w := w.(type) {
	case nil:
		return nil, nil, nil
	case *os.File:
		return w, nil, nil
	}
	r, pw, err := opPipe(true)
	if err != nil {
		return nil, nil, err
	}
	// A larger pipe where the limits allow it; the default works too.
	_, _ = unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, outPipeSize)
	o.readers = append(o.readers, r)
	return pw, w, nil
}

// start copies the pipes' contents into their writers (ws in the order of
// the pipeFor calls that made pipes).
func (o *outputs) start(ws ...io.Writer) {
	for i, r := range o.readers {
		w := ws[i]
		o.copying.Go(func() {
			copyOut(w, r)
			r.Close()
		})
	}
}

// copyOut copies r into w until r ends or w fails, through a buffer that
// starts at outCopyStart and grows to outCopyBuf once a read fills it: a
// command that prints a line (most of them) costs no megabyte, one that
// streams gets large reads. (Not the writer's ReadFrom nor the reader's
// WriteTo: they would copy in 32 KiB pieces.)
func copyOut(w io.Writer, r io.Reader) {
	buf := make([]byte, outCopyStart)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if m, werr := w.Write(buf[:n]); werr != nil || m != n {
				return
			}
		}
		if err != nil {
			return
		}
		if n == len(buf) && len(buf) < outCopyBuf {
			buf = make([]byte, outCopyBuf)
		}
	}
}

// close releases pipes whose copies never started.
func (o *outputs) close() {
	for _, r := range o.readers {
		r.Close()
	}
}

// startError classifies a failure to start the init: the kernel refusing
// the namespaces is the common case and gets the fix-it hint.
func startError(id string, err error) error {
	for _, e := range []error{unix.EPERM, unix.EACCES, unix.ENOSPC, unix.EUSERS, unix.EINVAL} {
		if errors.Is(err, e) {
			return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id,
				Msg: "cannot create the sandbox's namespaces (" + err.Error() + "): " + usernsHint + weakHint, Err: err}
		}
	}
	return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: "start the sandbox init: " + err.Error(), Err: err}
}

// closeCtl ends the control stream: with commit, the input was complete.
// For a command of a machine its end is the command's: the runner kills
// the command's process group if it still runs. The configuration is
// delivered first (a runner reads it once it holds the operation).
func (pr *proc) closeCtl(commit bool) {
	pr.ctlOnce.Do(func() {
		if pr.ctl == nil {
			return
		}
		if pr.written != nil {
			<-pr.written
		}
		if commit {
			_, _ = pr.ctl.Write([]byte{commitByte})
		}
		pr.ctl.Close()
	})
}

// closeHost closes the host's ends of the pipes and the slot lock.
func (pr *proc) closeHost() {
	pr.closeCtl(false)
	if pr.statusR != nil {
		pr.statusR.Close()
	}
	if pr.stdinW != nil {
		pr.stdinW.Close()
	}
	if pr.slot != nil {
		pr.slot.Close()
	}
	if pr.conn != nil {
		pr.conn.Close()
	}
}

// kill ends the operation. A machine's runner ends a command's process
// group at the end of the control pipe, and the init kills a file
// operation's runner at the end of the connection. A weak-mode init has
// no PID namespace: it is asked first (SIGTERM) to kill its descendants,
// and killed outright a little later.
func (pr *proc) kill() {
	if pr.conn != nil {
		// The configuration may still be on its way: the control
		// pipe's end must not wait for it.
		if pr.written != nil {
			select {
			case <-pr.written:
			default:
				pr.ctl.Close()
			}
		}
		pr.closeCtl(false)
		_ = pr.conn.CloseWrite()
		return
	}
	if pr.cmd == nil || pr.cmd.Process == nil {
		return
	}
	if pr.weak {
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-pr.exited:
			return
		case <-time.After(2 * time.Second):
		}
	}
	_ = pr.cmd.Process.Kill()
}

// watch kills the operation when ctx ends. abort, when set, is tried
// first: it asks a file operation to clean up, and the kill follows
// abortGrace later. The returned function stops watching.
func (pr *proc) watch(ctx context.Context, abort func()) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		case <-pr.exited:
			return
		}
		if abort != nil {
			abort()
			t := time.NewTimer(abortGrace)
			defer t.Stop()
			select {
			case <-pr.exited:
				return
			case <-t.C:
			}
		}
		pr.kill()
	}()
	return func() { close(done) }
}

// next reads one status message; ok is false at the end of the stream.
func (pr *proc) next() (statusMsg, bool) {
	m, err := readStatus(pr.status)
	if err != nil {
		return statusMsg{}, false
	}
	return m, true
}

// finish reads the remaining status messages, waits for the operation's end
// and releases everything; it returns the last status message (zero if none
// came).
func (pr *proc) finish() (statusMsg, bool) {
	var last statusMsg
	got := false
	for {
		m, ok := pr.next()
		if !ok {
			break
		}
		last, got = m, true
	}
	if pr.settled != nil && got && (last.Exit != nil || last.Done || last.PID != 0) {
		close(pr.settled)
	}
	<-pr.exited
	pr.closeHost()
	return last, got
}

// background holds work a provider started beside its callers' (reapers,
// cgroup removals); Close waits for it.
type background struct {
	wg sync.WaitGroup
}

// initDied describes an init that ended without reporting an outcome.
func (pr *proc) initDied() error {
	if pr.conn != nil && pr.waitErr != nil {
		// The machine runs, and said how the operation's runner
		// ended: a process of the sandbox can signal it (it runs as
		// the sandbox's user).
		why := "a process in the sandbox may have killed it (kill $PPID, kill -1)"
		if pr.oomKilled != nil && pr.oomKilled() {
			why = "the sandbox's memory limit was reached, and the kernel's OOM killer ended it with others (--memory)"
		}
		return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + pr.id,
			Msg: "the process that ran the operation ended without reporting (" + pr.waitErr.Error() + "): " + why + "; the sandbox runs on"}
	}
	msg := "sandbox init ended without reporting"
	if pr.waitErr != nil {
		msg += ": " + pr.waitErr.Error()
	}
	if pr.diag != nil && pr.diag.Len() > 0 {
		msg += ": " + pr.diag.String()
	}
	if pr.dir != "" {
		if words := lastWords(pr.dir); words != "" {
			msg += ": the machine ended: " + words
		}
	}
	if pr.oomKilled != nil && pr.oomKilled() {
		msg += ": the sandbox's memory limit was reached, and the kernel's OOM killer ended its machine with other processes (--memory); its files stay, its processes and /tmp are gone"
	}
	return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + pr.id, Msg: msg}
}

// setupErr converts a setup failure reported by the init.
func setupErr(id string, m statusMsg) error {
	msg := "build the sandbox: " + m.Err
	if m.Kind == kindUnavailable {
		msg += ": " + usernsHint + weakHint
	}
	e := &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: msg}
	if m.Errno != 0 {
		e.Err = syscall.Errno(m.Errno)
	}
	return e
}

// ctxErr is the error of an operation stopped by ctx (or by its own
// timeout, which is a deadline on ctx): a deadline matches ErrTimeout and
// context.DeadlineExceeded, a cancellation context.Canceled.
func ctxErr(op string, ctx context.Context, timeout time.Duration) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		msg := "timed out"
		if timeout > 0 {
			msg = "timed out after " + timeout.String()
		}
		return &providers.Error{Kind: providers.ErrTimeout, Provider: Name, Op: op, Msg: msg + ": the whole process tree was killed", Err: err}
	}
	return fmt.Errorf("local: %s: %w", op, err)
}

// tailBuffer keeps the first max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
