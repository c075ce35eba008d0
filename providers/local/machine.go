package local

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// A sandbox that is used more than once gets a holder: a long-lived init
// that keeps the sandbox's user and mount namespaces with its one overlay
// mount of the layers, and a spare — an operation init already started in
// its own PID, mount (a copy of the holder's), IPC, UTS and network
// namespaces, pivoted, with Landlock, no capabilities, no_new_privs, limits
// and seccomp applied — to which the next operation's descriptors are
// handed. Every operation (exec in either network mode, file operations,
// setup scripts) goes through the holder while one runs, so the layers are
// never mounted twice at once: a write through one operation is seen by the
// next. Without a holder an operation runs a cold init (launch), which
// holds the sandbox's mount lock shared; a holder holds it exclusively for
// its life. A sandbox gets its holder at its second operation, so a create
// + exec + delete never starts one. The holder's files in the sandbox
// directory:
const (
	holderLock    = "holder.lock" // flock serialising holder starts, retirement and Delete
	holderPidFile = "holder.pid"  // "pid starttime" of the current holder
	// mountLock is held shared by cold inits and exclusively by a holder;
	// the first operation creates it, so it also says that the sandbox
	// was used before.
	mountLock = "mount.lock"
)

// defaultHolderIdle is how long a holder without operations stays before
// it exits; the next operation starts a new one.
const defaultHolderIdle = 5 * time.Minute

// holderTick is how often a holder checks that its sandbox still exists
// and whether it has been idle long enough.
const holderTick = 500 * time.Millisecond

// holderStopWait bounds how long Delete waits for a killed holder to exit.
const holderStopWait = 5 * time.Second

// holderAttempts bounds the tries of one operation against holders that
// retire as it connects.
const holderAttempts = 3

// holderCgroup names the cgroups of a sandbox's holder, after the
// sandbox's id (cold commands use their slot's number instead).
const holderCgroup = "hold"

// holderSockName is the holder's socket in the sandbox directory. Its name
// carries the identity of the binary and of the protocol, so that a CLI
// never hands an operation to a holder running other code (an older
// binary's spares may harden differently).
func holderSockName(identity string) string { return "holder-" + identity + ".sock" }

// exeIdentity identifies the running executable (device, inode, size,
// modification time) and the holder protocol version.
func exeIdentity() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "v%d", holdVersion)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err == nil {
		fmt.Fprintf(h, ":%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	} else {
		fmt.Fprintf(h, ":pid%d", os.Getpid())
	}
	return hex.EncodeToString(h.Sum(nil))
}

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
func (p *Provider) dialHolder(dir string) (*net.UnixConn, error) {
	var c *net.UnixConn
	err := withDir(dir, func(short string) error {
		var err error
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: short + "/" + holderSockName(p.identity), Net: "unix"})
		return err
	})
	return c, err
}

// lockFile opens dir/name and flocks it with how; closing the file releases
// the lock. It returns unix.EWOULDBLOCK for a busy non-blocking lock.
func lockFile(dir, name string, how int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// liveHolder returns the recorded holder of dir if it still runs.
func liveHolder(dir string) (holderRecord, bool) {
	rec, err := readHolderRecord(dir)
	if err != nil {
		return rec, false
	}
	st, err := procStartTime(rec.pid)
	return rec, err == nil && st == rec.start
}

// acquire returns a connection to the sandbox's holder, starting one when
// the sandbox was used before, or, when the operation should run cold, the
// sandbox's mount lock held shared (conn is nil then).
func (p *Provider) acquire(dir, id string) (*net.UnixConn, *os.File, error) {
	if c, err := p.dialHolder(dir); err == nil {
		return c, nil, nil
	}
	if _, err := os.Lstat(filepath.Join(dir, mountLock)); errors.Is(err, fs.ErrNotExist) {
		// The first operation: cold, without the holder lock (this disk
		// work is most of a one-shot sandbox's cost). No holder starts
		// without the mount lock held exclusively, so a shared lock
		// taken here keeps any from starting until this operation ends;
		// if one started meanwhile, go through it.
		f, err := lockFile(dir, mountLock, unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return nil, f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("local: sandbox %s: mount lock: %w", id, err)
		}
		if c, err := p.dialHolder(dir); err == nil {
			return c, nil, nil
		}
	}
	lock, err := lockFile(dir, holderLock, unix.LOCK_EX)
	if err != nil {
		return nil, nil, fmt.Errorf("local: sandbox %s: holder lock: %w", id, err)
	}
	defer lock.Close()
	m, _, err := p.load(id)
	if err != nil {
		return nil, nil, err
	}
	if c, err := p.dialHolder(dir); err == nil {
		return c, nil, nil
	}
	cold := func() (*net.UnixConn, *os.File, error) {
		// Blocks only while a retiring holder finishes exiting.
		f, err := lockFile(dir, mountLock, unix.LOCK_SH)
		if err != nil {
			return nil, nil, fmt.Errorf("local: sandbox %s: mount lock: %w", id, err)
		}
		return nil, f, nil
	}
	ml, err := lockFile(dir, mountLock, unix.LOCK_EX|unix.LOCK_NB)
	for try := 0; errors.Is(err, unix.EWOULDBLOCK) && try < 5; try++ {
		// A cold operation ending, or a process forked by this one
		// that still shares the lock's descriptor until it execs.
		time.Sleep(10 * time.Millisecond)
		ml, err = lockFile(dir, mountLock, unix.LOCK_EX|unix.LOCK_NB)
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		if _, alive := liveHolder(dir); !alive {
			// Cold operations are running: join them rather than wait.
			return cold()
		}
		// A holder that does not answer here (another binary's, or
		// one retiring): replace it.
		if err := stopHolderLocked(dir); err != nil {
			return nil, nil, fmt.Errorf("local: sandbox %s: %w", id, err)
		}
		ml, err = lockFile(dir, mountLock, unix.LOCK_EX)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("local: sandbox %s: mount lock: %w", id, err)
	}
	defer ml.Close()
	shared, err := sharedNetwork(m.Network, providers.NetworkDefault)
	if err != nil {
		return nil, nil, err
	}
	if err := p.spawnHolder(dir, id, shared, m.Resources, ml); err != nil {
		return nil, nil, err
	}
	c, err := p.dialHolder(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("local: sandbox %s: holder: %w", id, err)
	}
	return c, nil, nil
}

// spawnHolder starts the sandbox's holder on a new listening socket and
// waits until its tree is built, then records it. The holder gets the
// mount lock (held exclusively) and a work-directory slot for its life. It
// is detached: its own session, no parent-death signal, stdio on /dev/null.
func (p *Provider) spawnHolder(dir, id string, shared bool, res providers.Resources, mountLock *os.File) error {
	sock := filepath.Join(dir, holderSockName(p.identity))
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: sandbox %s: stale holder socket: %w", id, err)
	}
	var ln *net.UnixListener
	err := withDir(dir, func(short string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: short + "/" + holderSockName(p.identity), Net: "unix"})
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
	if err := p.startHolderProcess(dir, id, shared, res, lnFile, mountLock); err != nil {
		os.Remove(sock)
		return err
	}
	return nil
}

// startHolderProcess runs the holder process and waits for it to be ready.
// res are the sandbox's limits: they size the spares' tmpfs mounts and
// rlimits (fillConfig), and the holder is placed in the sandbox's holder
// cgroups before it gets its configuration, so every spare it forks, and
// every process of every operation, is born inside them. The cgroup limits
// thus bound all the operations run through the holder together (and the
// holder itself), where a cold command is bounded alone in its slot's
// cgroups; the spares never need the host to move them.
func (p *Provider) startHolderProcess(dir, id string, shared bool, res providers.Resources, lnFile, mountLock *os.File) error {
	slotN, slot, err := acquireSlot(p.dir, p.layers, p.spread)
	if err != nil {
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	defer slot.Close()
	cfg := &initConfig{Mode: modeHold, StateDir: dir, IdleNS: int64(p.holderIdle), Identity: p.identity, Resources: res}
	p.fillConfig(dir, slotN, cfg, shared)
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
		Dir:        "/", // not the caller's directory, which it would pin
		ExtraFiles: []*os.File{ctlR, statW, lnFile, slot, mountLock},
		// The host's network: each spare gets a network of its own
		// unless its operation shares the host's.
		SysProcAttr: nsAttr(p.uid, p.gid, true),
	}
	cmd.SysProcAttr.Setsid = true
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
	// The holder waits for its configuration: it enters its cgroups
	// before it forks any spare.
	if _, err := p.cg.enter(cmd.Process.Pid, id+"-"+holderCgroup, res); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
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
// end.
func stopHolder(dir string) error {
	// No holder lock: no holder ever started (a start creates it first).
	f, err := os.OpenFile(filepath.Join(dir, holderLock), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	return stopHolderLocked(dir)
}

// stopHolderLocked is stopHolder under the holder lock. The pid is trusted
// only through a pidfd whose process has the recorded start time, so a
// recycled pid is never signalled.
func stopHolderLocked(dir string) error {
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

// launchWarm hands one operation to the sandbox's holder. It returns a nil
// proc and the mount lock (held shared) when the operation should run
// cold instead.
func (p *Provider) launchWarm(dir, id string, cfg *initConfig, shared bool, stdio initStdio) (*proc, *os.File, error) {
	// This process's own cold inits of the sandbox that are still
	// exiting hold its mount lock: a holder could not start beside them.
	p.bg.wait(id)
	for attempt := 1; ; attempt++ {
		conn, coldLock, err := p.acquire(dir, id)
		if err != nil || coldLock != nil {
			return nil, coldLock, err
		}
		pr, retry, err := p.handOver(conn, id, cfg, shared, stdio)
		if retry && attempt < holderAttempts {
			continue
		}
		return pr, nil, err
	}
}

// handOver sends one operation and its descriptors to a holder. retry says
// that the holder ended the connection before starting the operation
// (it was retiring): nothing ran.
func (p *Provider) handOver(conn *net.UnixConn, id string, cfg *initConfig, shared bool, stdio initStdio) (_ *proc, retry bool, _ error) {
	pr := &proc{id: id, conn: conn, exited: make(chan struct{}), settled: make(chan struct{})}
	line, err := json.Marshal(cfg)
	if err != nil {
		pr.closeHost()
		return nil, false, fmt.Errorf("local: encode operation: %w", err)
	}
	ends, err := pr.openEnds(stdio)
	if err != nil {
		pr.closeHost()
		return nil, false, err
	}
	fail := func(retry bool, err error) (*proc, bool, error) {
		ends.closeChild()
		ends.outs.close()
		pr.closeHost()
		return nil, retry, err
	}
	if _, err := pr.ctl.Write(append(line, '\n')); err != nil {
		return fail(false, fmt.Errorf("local: sandbox %s: send the operation: %w", id, err))
	}
	body, err := json.Marshal(holdRequest{Version: holdVersion, Shared: shared, Any: cfg.Mode == modeFile})
	if err != nil {
		return fail(false, err)
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	msg = append(msg, body...)
	_, _, err = conn.WriteMsgUnix(msg, unix.UnixRights(fdsOf(ends.files)...), nil)
	// Our copies of the operation's ends go now (the caller's own files
	// stay open): the spare holds the only ones.
	ends.closeChild()
	if err != nil {
		return fail(true, nil)
	}
	replies := bufio.NewReader(conn)
	r, err := readReply(replies)
	switch {
	case err != nil:
		return fail(true, nil)
	case r.Err != "":
		m := statusMsg{Err: r.Err, Setup: r.Setup, Kind: r.Kind}
		return fail(false, setupErr(id, m))
	case !r.Started:
		return fail(false, fmt.Errorf("local: sandbox %s: unexpected holder reply", id))
	}
	pr.status = json.NewDecoder(pr.statusR)
	ends.outs.start(ends.copyTo...)
	// The spare's exit is reported by the holder; a spare that reported
	// the operation's end had already killed and reaped the rest of it.
	replied := make(chan error, 1)
	go func() {
		var werr error
		for {
			r, err := readReply(replies)
			if err != nil {
				break
			}
			switch {
			case r.Exit != "" && r.Exit != "exit status 0":
				werr = errors.New(r.Exit)
			case r.Err != "":
				werr = errors.New(r.Err)
			}
		}
		replied <- werr
	}()
	go func() {
		select {
		case werr := <-replied:
			pr.waitErr = werr
		case <-pr.settled:
		}
		ends.outs.copying.Wait()
		close(pr.exited)
	}()
	return pr, false, nil
}

// readReply reads one line from a holder.
func readReply(r *bufio.Reader) (holdReply, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return holdReply{}, err
	}
	var h holdReply
	if err := json.Unmarshal(line, &h); err != nil {
		return holdReply{}, fmt.Errorf("holder reply: %w", err)
	}
	return h, nil
}
