package local

import (
	"errors"
	"fmt"
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

// A pooled init is a cold init started ahead of its operation: a process
// of this binary already running in fresh namespaces (user, mount, PID,
// IPC, UTS, network, cgroup) that has done nothing else, waiting on a
// socket in the provider's directory for the descriptors of the next cold
// operation on a new sandbox. Starting such a process is most of a cold
// command's fixed cost: the clone (a full copy of the caller, as a user
// namespace rules out vfork), the exec and the runtime's start of a large
// binary take several milliseconds, which a pooled init has already paid.
// Once it has its operation it is a cold init like any other: it reads the
// configuration, builds the root, hardens itself and runs the command.
//
// A command that ran a cold init (pooled or not) has the reaper it starts
// as it ends (see Provider.Close) start the next pooled init, in the
// background; the pool holds at most one per binary, and only for the
// default isolated network. A pooled init that nobody takes exits after
// poolIdle; one whose socket is gone (taken by a command that then failed
// to reach it, or its state directory removed) exits at its next tick.
//
// Until it is taken a pooled init leaves its mounts alone, so host mounts
// made or removed meanwhile reach its copy of the mount table as they
// reach a cold init's. It has no parent-death signal (the command that
// started it is long gone): it keeps its connection to the command that
// took it, and exits, killing the sandbox's processes with it, when that
// connection ends.

// poolArgv0 marks a pooled init; poolFD is the socket it was started with,
// bound but not yet listening, and poolReadyFD a pipe on which it says
// that it listens.
const (
	poolArgv0   = "sandbox-local-pool"
	poolFD      = 3
	poolReadyFD = 4
)

// poolDir, under the provider's directory, holds the pooled inits'
// sockets; poolTick is how often a waiting one checks on its socket.
const (
	poolDir  = ".pool"
	poolTick = time.Second
)

// poolEnvVar set to 0 turns the pool off: every cold init starts on the
// spot, and no process of this binary waits between commands.
const poolEnvVar = "SANDBOX_LOCAL_POOL"

// defaultPoolIdle is how long a pooled init waits for an operation.
const defaultPoolIdle = 2 * time.Minute

// poolTakeWait bounds the wait for a pooled init to confirm that it took
// an operation's descriptors; past it the operation runs cold.
const poolTakeWait = 2 * time.Second

// poolSockName names the socket of the pooled init of a binary (identity,
// see exeIdentity): a command never hands an operation to another
// binary's init.
func poolSockName(identity string) string { return "init-" + identity + ".sock" }

// pooled is the host's side of a pooled init it took.
type pooled struct {
	conn *net.UnixConn
	pid  int
	mu   sync.Mutex
	fd   int // pidfd; -1 once the init has been waited for
}

// takePooled claims the waiting pooled init, if there is one, and hands it
// the operation's descriptors (files, see opEnds). It returns nil when
// there was none, or it did not confirm: the operation then runs cold.
// The claim is a rename of the socket to a name of the claimer's own, so
// that two commands never take the same init.
func (p *Provider) takePooled(files []*os.File) *pooled {
	dir := filepath.Join(p.dir, poolDir)
	name := poolSockName(p.identity)
	claimed := name + "." + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, claimed)); err != nil {
		return nil
	}
	var conn *net.UnixConn
	err := withDir(dir, func(short string) error {
		var err error
		conn, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: short + "/" + claimed, Net: "unix"})
		return err
	})
	os.Remove(filepath.Join(dir, claimed))
	if err != nil {
		return nil // a stale socket: this claim removed it
	}
	pp, err := handToPooled(conn, files)
	if err != nil {
		conn.Close()
		return nil
	}
	return pp
}

// handToPooled sends the descriptors over conn and waits for the init's
// confirmation. The peer's credentials are those of the process that
// listens on the socket: the pooled init itself.
func handToPooled(conn *net.UnixConn, files []*os.File) (*pooled, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, credErr
	}
	if cred.Uid != uint32(os.Getuid()) {
		return nil, fmt.Errorf("pooled init runs as uid %d", cred.Uid)
	}
	pidfd, err := unix.PidfdOpen(int(cred.Pid), 0)
	if err != nil {
		return nil, err
	}
	pp := &pooled{conn: conn, pid: int(cred.Pid), fd: pidfd}
	if _, _, err := conn.WriteMsgUnix([]byte{0}, unix.UnixRights(fdsOf(files)...), nil); err != nil {
		pp.release()
		return nil, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(poolTakeWait))
	ack := make([]byte, 1)
	if n, err := conn.Read(ack); n != 1 || err != nil {
		// Not taken: whatever it is doing, it is not running this
		// operation.
		pp.signal(syscall.SIGKILL)
		pp.release()
		return nil, fmt.Errorf("pooled init did not take the operation: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return pp, nil
}

// signal sends sig to the init unless it has been waited for.
func (pp *pooled) signal(sig syscall.Signal) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.fd >= 0 {
		_ = unix.PidfdSendSignal(pp.fd, sig, nil, 0)
	}
}

// wait returns once the init has exited: all of its exit, the teardown of
// its namespaces and mounts included, is done by then.
func (pp *pooled) wait() {
	fds := []unix.PollFd{{Fd: int32(pp.fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}

// release closes the pidfd and the connection; the connection's end tells
// an init still running to exit.
func (pp *pooled) release() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.fd >= 0 {
		unix.Close(pp.fd)
		pp.fd = -1
	}
	pp.conn.Close()
}

// startPooled starts a pooled init that waits idle for an operation on the
// socket name in dir, unless one waits there already, and returns its pid
// (0 if none was started). A reaper calls it, in the background of the
// command that wants it. The socket is bound under a name of this
// process's own, and takes its real name only once the init listens on it
// (the init listens itself, so that a command connecting to it gets the
// init's own credentials): a command that finds the socket finds an init
// ready to take its operation.
func startPooled(dir, name string, idle time.Duration) int {
	final := filepath.Join(dir, name)
	if _, err := os.Lstat(final); err == nil {
		return 0 // one waits (or a stale socket, which the next claim clears)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return 0
	}
	temp := name + "." + strconv.Itoa(os.Getpid())
	_ = os.Remove(filepath.Join(dir, temp))
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	sock := os.NewFile(uintptr(fd), "pool")
	defer sock.Close()
	if err := withDir(dir, func(short string) error {
		return unix.Bind(fd, &unix.SockaddrUnix{Name: short + "/" + temp})
	}); err != nil {
		return 0
	}
	defer os.Remove(filepath.Join(dir, temp)) // gone once renamed
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0
	}
	defer readyR.Close()
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		// The socket's name, relative to the init's working directory:
		// its command line, which the sandbox can read, names no host
		// path.
		Args:        []string{poolArgv0, strconv.FormatInt(int64(idle), 10), name},
		Env:         []string{},
		Dir:         dir,
		ExtraFiles:  []*os.File{sock, readyW},
		SysProcAttr: nsAttr(os.Getuid(), os.Getgid(), false),
	}
	// Its own session, as the reaper's: nothing at the terminal is for
	// it.
	cmd.SysProcAttr.Setsid = true
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return 0
	}
	// Reaped here when this process lives on (tests); a reaper exits
	// first and leaves it to the system.
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	_ = readyR.SetReadDeadline(time.Now().Add(poolTakeWait))
	if n, _ := readyR.Read(make([]byte, 1)); n != 1 {
		_ = cmd.Process.Kill()
		return 0
	}
	// Into cgroups of its own before anyone can take it: a command that
	// took it then only writes its limits. Where this fails, that
	// command moves it.
	cg := detectCgroups()
	cg.placePooled(cmd.Process.Pid)
	if unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, temp), unix.AT_FDCWD, final, unix.RENAME_NOREPLACE) != nil {
		_ = cmd.Process.Kill()
		go func() {
			<-waited
			cg.removePooled(cmd.Process.Pid)
		}()
		return 0
	}
	return cmd.Process.Pid
}

// runPooled is a pooled init's life: it listens on its socket, says so
// on its ready pipe, waits until a command connects, takes that command's
// operation and runs it as a cold init; it returns the exit code. It exits
// without doing anything once idle has passed or its socket (name, in the
// working directory) is gone.
func runPooled(idle time.Duration, name string) int {
	// The ready pipe is closed below; the socket and the rest stay out
	// of the command.
	closeOnExecFrom(poolFD)
	if unix.Listen(poolFD, 4) != nil {
		return 125
	}
	_, err := unix.Write(poolReadyFD, []byte{1})
	unix.Close(poolReadyFD)
	if err != nil {
		return 125
	}
	deadline := time.Now().Add(idle)
	for {
		fds := []unix.PollFd{{Fd: poolFD, Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(poolTick/time.Millisecond))
		if n > 0 {
			break
		}
		if err != nil && err != unix.EINTR {
			return 125
		}
		if _, err := os.Lstat(name); err != nil {
			return 0 // taken by a command that did not get through, or removed
		}
		if time.Now().After(deadline) {
			os.Remove(name)
			return 0
		}
	}
	conn, _, err := unix.Accept4(poolFD, unix.SOCK_CLOEXEC)
	unix.Close(poolFD)
	if err != nil {
		return 125
	}
	// The connection moves out of the way of the descriptors it brings.
	sock, err := unix.FcntlInt(uintptr(conn), unix.F_DUPFD_CLOEXEC, 16)
	unix.Close(conn)
	if err != nil {
		return 125
	}
	if got, err := receiveOp(sock); !got || err != nil {
		return 125
	}
	if _, err := unix.Write(sock, []byte{1}); err != nil {
		return 125
	}
	// The command's end of the connection closes when it exits, however
	// it exits: the sandbox goes with it, as a cold init's goes with the
	// parent-death signal.
	go func() {
		buf := make([]byte, 1)
		for {
			n, err := unix.Read(sock, buf)
			if n <= 0 && err != unix.EINTR {
				os.Exit(137)
			}
		}
	}()
	return runInit(nil)
}
