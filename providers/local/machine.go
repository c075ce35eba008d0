//go:build linux

package local

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// A running sandbox is a machine: one long-lived init, PID 1 of the
// sandbox's PID namespace, holding its user, mount, IPC, UTS and cgroup
// namespaces, its network namespace, its one root filesystem (the
// overlays of its layers, /tmp, /run, /dev and /proc) and its cgroups.
// Every operation (commands, file operations, setup scripts) runs in a
// runner the init starts inside the machine, so what one operation
// starts or writes is there for the next until the machine stops. The
// host reaches the init through a socket in the sandbox's directory,
// which nothing inside the sandbox can see. The machine's files in the
// sandbox directory:
const (
	machineLock    = "machine.lock" // flock serialising starts, stops, retirement and Delete
	machinePidFile = "machine.pid"  // "pid starttime" of the running init
	logsDir        = "logs"         // the output of background commands
	// crashedFile marks a sandbox whose machine ended without being
	// stopped (a killed init, a host reboot): the next start says so.
	crashedFile = "machine.crashed"
	// lastWordsFile is the running init's stderr: empty unless it ended
	// in a way only its runtime could tell (a panic, a thread it could
	// not make).
	lastWordsFile = "machine.err"
)

// lastWords is what the machine of the sandbox in dir wrote to its stderr
// before it ended, in one line ("" if nothing): the Go runtime's reason
// for a fatal error comes first.
func lastWords(dir string) string {
	f, err := os.Open(filepath.Join(dir, lastWordsFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 2048)
	n, _ := io.ReadFull(f, b)
	var lines []string
	for line := range strings.Lines(string(b[:n])) {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
		if len(lines) == 2 {
			break
		}
	}
	return strings.Join(lines, "; ")
}

// machineCgroup names the cgroups of a sandbox's machine, after its id.
const machineCgroup = "machine"

// DefaultAutoStop is how long a machine stays without operations before
// it stops itself, when the sandbox does not say.
const DefaultAutoStop = 15 * time.Minute

// machineStopWait bounds how long a stop waits for the init to exit
// after the grace period of its processes.
const machineStopWait = 10 * time.Second

// machineAttempts bounds the tries of one operation against machines
// that stop as it connects.
const machineAttempts = 3

// machineSockName is the init's socket in the sandbox directory. Its name
// carries the version of the protocol, so that a CLI never hands an
// operation to an init that speaks another (see machineVersion), and a
// CLI of another build of the same version reaches the machine.
func machineSockName() string { return machineSockPrefix + strconv.Itoa(machineVersion) + ".sock" }

// machineSockPrefix begins the name of every version's socket.
const machineSockPrefix = "machine-v"

// otherVersion names the protocol of the socket of another version in the
// sandbox directory dir ("" if there is none): a machine of that version
// runs there. Versions before 4 named their sockets after the binary.
func otherVersion(dir string) string {
	names, err := filepath.Glob(filepath.Join(dir, "machine-*.sock"))
	if err != nil {
		return ""
	}
	for _, n := range names {
		n = filepath.Base(n)
		if n == machineSockName() {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSuffix(n, ".sock"), machineSockPrefix); ok {
			return "machine protocol " + v
		}
		return "an earlier machine protocol"
	}
	return ""
}

// otherVersionSays tells of a machine of the protocol other (otherVersion).
func otherVersionSays(other string) string {
	return "its machine runs another version of sandbox (" + other + "; this one speaks " + strconv.Itoa(machineVersion) + "), which this one cannot talk to"
}

// selfExe names this program's own executable.
const selfExe = "/proc/self/exe"

// exeIdentity identifies the executable at exe (device, inode, size,
// modification time) and the machine protocol version.
func exeIdentity(exe string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "m%d", machineVersion)
	var st unix.Stat_t
	if err := unix.Stat(exe, &st); err == nil {
		fmt.Fprintf(h, ":%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	} else {
		fmt.Fprintf(h, ":pid%d", os.Getpid())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// machineRecord identifies an init beyond its (recyclable) pid.
type machineRecord struct {
	pid   int
	start uint64 // start time in clock ticks since boot, from /proc/pid/stat
}

// readMachineRecord reads the init's pid file in dir.
func readMachineRecord(dir string) (machineRecord, error) {
	b, err := readFile(filepath.Join(dir, machinePidFile))
	if err != nil {
		return machineRecord{}, err
	}
	r, err := parseRecord(string(b))
	if err != nil {
		return machineRecord{}, fmt.Errorf("machine pid file: %w", err)
	}
	return r, nil
}

// parseRecord reads a record written as "pid starttime" (what follows is
// ignored), with strconv rather than fmt's reflective scanner: every CLI
// call reads its machine's.
func parseRecord(s string) (machineRecord, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return machineRecord{}, fmt.Errorf("%q is not \"pid starttime\"", s)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return machineRecord{}, err
	}
	start, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return machineRecord{}, err
	}
	return machineRecord{pid: pid, start: start}, nil
}

// procStartTime reads the start time of pid (field 22 of /proc/pid/stat).
func procStartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// procStat is the state letter (R, S, Z…) and start time of pid, from
// /proc/PID/stat.
func procStat(pid int) (byte, uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	if len(f[0]) != 1 {
		return 0, 0, errors.New("malformed stat")
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err
}

// statFields are the fields of /proc/PID/stat after the command's name
// (the state is the first), at least twenty of them.
func statFields(pid int) ([]string, error) {
	b, err := readFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return nil, errors.New("malformed stat")
	}
	return f, nil
}

// runnerGone reports whether process pid can take no more work: it cannot
// be read, it is stopped, traced or a zombie, or a SIGKILL waits for it —
// pending from the moment kill returns (a fatal signal becomes one), while
// the process still shows as running until it has ended. One read of
// /proc/PID/status.
func runnerGone(pid int) bool {
	b, err := readFile("/proc/" + strconv.Itoa(pid) + "/status")
	return err != nil || statusGone(string(b))
}

// statusGone is runnerGone's verdict on the text of a /proc/PID/status.
func statusGone(status string) bool {
	const kill = 1 << (unix.SIGKILL - 1)
	for line := range strings.Lines(status) {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch name {
		case "State":
			if value == "" || strings.ContainsRune("TtZX", rune(value[0])) {
				return true
			}
		case "SigPnd", "ShdPnd":
			if set, err := strconv.ParseUint(value, 16, 64); err == nil && set&kill != 0 {
				return true
			}
		}
	}
	return false
}

// liveMachine returns the recorded init of dir if it still runs.
func liveMachine(dir string) (machineRecord, bool) {
	rec, err := readMachineRecord(dir)
	if err != nil {
		return rec, false
	}
	// A zombie has ended: its parent (whatever adopted the detached
	// init) has not reaped it yet.
	state, st, err := procStat(rec.pid)
	return rec, err == nil && st == rec.start && state != 'Z' && state != 'X'
}

// machineState is the state of the sandbox in dir.
func machineState(dir string) providers.State {
	if _, ok := liveMachine(dir); ok {
		return providers.StateRunning
	}
	return providers.StateStopped
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

// dialMachine connects to the init of the sandbox in dir.
func (p *Provider) dialMachine(dir string) (*net.UnixConn, error) {
	var c *net.UnixConn
	err := withDir(dir, func(short string) error {
		var err error
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: short + "/" + machineSockName(), Net: "unix"})
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

// connect returns a connection to the sandbox's machine, starting it when
// it is stopped.
func (p *Provider) connect(dir, id string) (*net.UnixConn, error) {
	if c, err := p.dialMachine(dir); err == nil {
		return c, nil
	}
	// A stop may retire the machine between its start and the dial:
	// start it again.
	for attempt := 1; ; attempt++ {
		if err := p.ensureMachine(dir, id, machineStart{}); err != nil {
			return nil, err
		}
		c, err := p.dialMachine(dir)
		if err == nil {
			return c, nil
		}
		if attempt == machineAttempts {
			return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: "the sandbox's machine stopped as the operation started; try again", Err: err}
		}
	}
}

// machineStart is how Create starts a sandbox's first machine; every other
// start uses the zero value.
type machineStart struct {
	// warmed: the caller prewarmed the cgroup move already (Create,
	// which always starts a machine, does it at its beginning).
	warmed bool
	// transient: the sandbox is made for one run (Spec.Transient), so
	// its root layer is mounted volatile (see mountRootLayer).
	transient bool
}

// ensureMachine starts the sandbox's machine unless it runs. Starts are
// serialised by the machine lock: a second start waits for the first and
// finds its machine.
func (p *Provider) ensureMachine(dir, id string, how machineStart) error {
	lock, err := lockFile(dir, machineLock, unix.LOCK_EX)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return providers.Errorf(providers.ErrNotFound, Name, "sandbox "+id, "no such sandbox")
		}
		return fmt.Errorf("local: sandbox %s: machine lock: %w", id, err)
	}
	defer lock.Close()
	m, _, err := p.load(id)
	if err != nil {
		return err
	}
	c, err := p.dialMachine(dir)
	if err == nil {
		c.Close()
		return nil
	}
	// A recorded init that does not answer: one of another version
	// (its socket has another name), one that stops, or one that was
	// killed and is still ending (its socket refuses connections while it
	// waits for the sandbox's processes to end; a stop unlinks the socket
	// first). It goes first (the lock keeps a new one from starting
	// meanwhile).
	if _, alive := liveMachine(dir); alive {
		other := otherVersion(dir)
		if err := killMachineLocked(dir); err != nil {
			return fmt.Errorf("local: sandbox %s: %w", id, err)
		}
		if other != "" {
			p.notes.add(id, "sandbox "+id+": "+otherVersionSays(other)+": it was stopped and started again with its files intact, but its processes and /tmp are gone")
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.WriteFile(filepath.Join(dir, crashedFile), []byte(lastWords(dir)), 0o600)
		}
	} else if _, err := os.Stat(filepath.Join(dir, machinePidFile)); err == nil {
		// Recorded but gone without a stop: killed, or the host
		// rebooted. The files are intact; the start says so.
		_ = os.WriteFile(filepath.Join(dir, crashedFile), []byte(lastWords(dir)), 0o600)
		_ = os.Remove(filepath.Join(dir, machinePidFile))
	}
	if !how.warmed && !p.haveStandby() {
		// The init is moved into cgroups: start the wait that move
		// involves now (see prewarm). Only when one starts: a CLI
		// whose warming write still waits cannot exit.
		p.cg.prewarm()
	}
	// The check of the host's secrets runs beside the rest of the start
	// (see lateMasks); where a standby machine may be claimed, from the
	// claim on, unless the standby vouches for the masks (see maskWatch).
	since := time.Now()
	if !p.standbyOn() {
		p.loadMasks(since, 0)
	}
	return p.spawnMachine(dir, id, m, since, how.transient)
}

// spawnMachine starts the sandbox's init on a new listening socket and
// waits until the machine is built (the init records itself, see
// machine.record). It is detached: its own session, no parent-death
// signal, stdio on /dev/null.
func (p *Provider) spawnMachine(dir, id string, m meta, since time.Time, transient bool) error {
	sock := filepath.Join(dir, machineSockName())
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: sandbox %s: stale machine socket: %w", id, err)
	}
	lnFile, err := listenFile(dir, machineSockName())
	if err != nil {
		return fmt.Errorf("local: sandbox %s: machine socket: %w", id, err)
	}
	defer lnFile.Close()
	if err := p.startInit(dir, id, m, lnFile, since, transient); err != nil {
		os.Remove(sock)
		return err
	}
	return nil
}

// listenFile listens on the Unix socket name in dir (named through a
// short path: dir may be longer than a socket address allows) and
// returns the listening socket as a file, for an init to inherit; the
// socket's name stays until the caller removes it.
func listenFile(dir, name string) (*os.File, error) {
	var ln *net.UnixListener
	err := withDir(dir, func(short string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: short + "/" + name, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	ln.Close()
	if err != nil {
		os.Remove(filepath.Join(dir, name))
		return nil, err
	}
	return f, nil
}

// initCmd is an init of this binary with the descriptors files from 3 on,
// in a sandbox's new namespaces (but the host's network: the init makes
// the sandbox's own, and starts each runner in the one its operation asks
// for), detached in a session of its own.
func (p *Provider) initCmd(files []*os.File) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:        p.exe,
		Args:        []string{initArgv0},
		Env:         machineEnv(threadSlack()),
		Dir:         "/", // not the caller's directory, which it would pin
		ExtraFiles:  files,
		SysProcAttr: nsAttr(p.host().uids, p.host().gids, true),
	}
	cmd.SysProcAttr.Setsid = true
	return cmd
}

// startInit runs the machine's init and waits for it to be ready. The init
// is placed in the sandbox's cgroups before it starts any process, so
// every process of the machine is born inside them and the limits bound
// the whole sandbox.
func (p *Provider) startInit(dir, id string, m meta, lnFile *os.File, since time.Time, transient bool) error {
	slotN, slot, err := acquireSlot(p.dir, p.host().layers, p.spread)
	if err != nil {
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	defer slot.Close()
	stateDir, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	defer stateDir.Close()
	_ = os.RemoveAll(filepath.Join(dir, logsDir))
	if err := p.adoptLegacyLayout(dir); err != nil {
		return fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	cfg := &initConfig{Mode: modeMachine, Resources: m.Resources, IdleNS: int64(m.autoStop()),
		DefaultUser: m.User, SetID: p.host().uids.ranged()}
	shared, err := sharedNetwork(m.Network, providers.NetworkDefault)
	if err != nil {
		return err
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
	res := p.effectiveResources(m.Resources)
	res.Pids += machinePidsAllowance
	files := []*os.File{ctlR, statW, lnFile, slot, stateDir}
	starting := p.claimStandby(id, res, files)
	if starting == nil {
		starting, err = p.spawnInit(id, res, files)
	}
	ctlR.Close()
	statW.Close()
	if err != nil {
		return err
	}
	cfg.CgroupRoot, cfg.WorkCgroups = p.cg.root, starting.work
	// The configuration is completed while the init starts (the masks
	// read from their cache, among others).
	p.fillConfig(dir, slotN, cfg, shared, since, starting.vouched)
	cfg.RootLayer.Volatile = transient
	fail := func(err error) error {
		starting.kill()
		// The init records itself as it gets ready: the start failed
		// after that (or the record is the one it left half written).
		_ = os.Remove(filepath.Join(dir, machinePidFile))
		return err
	}
	cfg.HostPID, cfg.HostStart = starting.pid, starting.start
	if err := writeConfig(ctlW, cfg); err != nil {
		return fail(fmt.Errorf("local: sandbox %s: send the machine configuration: %w", id, err))
	}
	// The init starts its first runner, and builds the machine
	// meanwhile; the runner goes into the cgroups with it (into their
	// work children, see cgroupWork), before either starts anything (see
	// runMachine).
	status := bufio.NewReader(statR)
	// reported reads the init's next status message, which must say what
	// ok wants; anything else ends the start.
	reported := func(ok func(statusMsg) bool) error {
		msg, err := readStatus(status)
		if err != nil || !ok(msg) {
			_ = fail(nil)
			if msg.Setup {
				return setupErr(id, msg)
			}
			msg := "the sandbox's machine ended without reporting"
			if words := lastWords(dir); words != "" {
				msg += ": " + words
			}
			return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: msg}
		}
		return nil
	}
	if err := reported(func(m statusMsg) bool { return m.Forked }); err != nil {
		return err
	}
	if err := starting.joined(); err != nil {
		return fail(fmt.Errorf("local: sandbox %s: %w", id, err))
	}
	if err := writeAll(ctlW, []byte{startByte}); err != nil {
		return fail(fmt.Errorf("local: sandbox %s: start the machine: %w", id, err))
	}
	gate := machineGate{Masks: p.lateMasks(cfg, starting.vouched)}
	if err := writeAll(ctlW, appendFrame(nil, encodeGate(&gate))); err != nil {
		return fail(fmt.Errorf("local: sandbox %s: start the machine: %w", id, err))
	}
	ctlW.Close()
	// The init recorded itself before it said it is done (see
	// machine.record).
	if err := reported(func(m statusMsg) bool { return m.Done }); err != nil {
		return err
	}
	p.wantStandby()
	return nil
}

// initProc is a machine's init on its way: a fresh one (spawnInit) or a
// claimed standby (claimStandby).
type initProc struct {
	pid   int
	start uint64 // as /proc/PID/stat has it
	// joined returns once the init and the runner it started are in the
	// sandbox's cgroups (the runner in their work children, see
	// cgroupWork).
	joined func() error
	// kill ends the init and waits for its end; its cgroups go.
	kill func()
	// work are the limit files of the work cgroups a fresh init joins
	// (see machine.joinWork); a claimed standby joined its own.
	work []cgroupPath
	// vouched is the digest of the masks cache a claimed standby found
	// current and saw no change to since (see maskWatch); 0: none.
	vouched uint64
}

// spawnInit starts a fresh init for sandbox id with the descriptors files
// (control, status, the machine's listening socket, its work slot, its
// state directory) and moves it into the sandbox's cgroups, with the
// limits of res, as it builds the machine.
func (p *Provider) spawnInit(id string, res providers.Resources, files []*os.File) (*initProc, error) {
	cmd := p.initCmd(files)
	// The sandbox's cgroups are made while the init starts.
	name := id + "-" + machineCgroup
	limits := p.cg.machineFiles(res)
	cg := p.cg.prepare(name, limits)
	var err error
	withSlack(monitorSlack, func() { err = cmd.Start() })
	if err != nil {
		cg.abandon()
		return nil, startError(id, err)
	}
	pid := cmd.Process.Pid
	// Reap it whenever it ends, in a process that lives that long.
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	// The init joins them as it starts and builds the machine (a
	// migration waits for an RCU grace period, milliseconds); it starts
	// nothing before the start byte says it is in.
	joining := make(chan struct{})
	var joinedSet *cgroupSet
	var joinErr error
	go func() {
		joinedSet, joinErr = cg.join(pid)
		close(joining)
	}()
	ip := &initProc{pid: pid, work: p.cg.workFiles(limits, name)}
	ip.kill = func() {
		_ = cmd.Process.Kill()
		<-exited
		if <-joining; joinErr == nil {
			cg.abandon()
		}
	}
	ip.joined = func() error {
		<-joining
		if joinErr != nil {
			return joinErr
		}
		if joinedSet != nil {
			for _, child := range childrenOf(pid) {
				if err := cg.placeChild(joinedSet, child); err != nil && !errors.Is(err, unix.ESRCH) {
					return err
				}
			}
		}
		return nil
	}
	// An unprivileged user's subordinate ranges, which only newuidmap
	// and newgidmap may write (see nsAttr): the init waits for its
	// configuration before it needs its ids.
	if err := writeIDMaps(pid, p.host().uids, p.host().gids); err != nil {
		ip.kill()
		return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id,
			Msg: "map the sandbox's ids: " + err.Error(), Err: err}
	}
	start, err := procStartTime(pid)
	if err != nil {
		ip.kill()
		return nil, fmt.Errorf("local: sandbox %s: the machine's start time: %w", id, err)
	}
	ip.start = start
	return ip, nil
}

// writeAll writes b to a pipe the init reads.
func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

// stopMachine stops the sandbox's machine: its processes get SIGTERM,
// then SIGKILL after grace, and the init exits. A machine that does not
// answer is killed.
func (p *Provider) stopMachine(ctx context.Context, dir string, grace time.Duration) error {
	lock, err := lockFile(dir, machineLock, unix.LOCK_EX)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer lock.Close()
	rec, alive := liveMachine(dir)
	if !alive {
		_ = os.Remove(filepath.Join(dir, machinePidFile))
		return nil
	}
	if c, err := p.dialMachine(dir); err == nil {
		// A context that ends during the grace period ends the wait:
		// the machine is then killed at once.
		done := context.AfterFunc(ctx, func() { c.Close() })
		_, _ = p.ask(c, machineRequest{Op: reqStop, GraceNS: int64(grace)}, nil)
		done()
		c.Close()
	}
	// The init unlinks its record as it retires: the one read before
	// names it, so the stop returns only once it has ended.
	defer os.Remove(filepath.Join(dir, machinePidFile))
	if err := killRecorded(rec); err != nil {
		return err
	}
	return ctx.Err()
}

// killMachine kills the sandbox's machine at once, if it runs, and waits
// for every process of the sandbox to end.
func (p *Provider) killMachine(dir string) error {
	lock, err := lockFile(dir, machineLock, unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer lock.Close()
	return killMachineLocked(dir)
}

// killMachineLocked kills the recorded init, under the machine lock, and
// waits for it to end: the end of PID 1 ends every process of the
// sandbox, and the kernel counts the init gone only once they are. The
// pid is trusted only through a pidfd whose process has the recorded
// start time, so a recycled pid is never signalled.
func killMachineLocked(dir string) error {
	rec, err := readMachineRecord(dir)
	if err != nil {
		return nil
	}
	defer os.Remove(filepath.Join(dir, machinePidFile))
	return killRecorded(rec)
}

// killRecorded kills the init rec names, if it still runs, and waits for
// it to end (see killMachineLocked).
func killRecorded(rec machineRecord) error {
	return signalRecorded(rec, unix.SIGKILL)
}

// signalRecorded sends sig to the process rec names, if it still runs,
// and waits a while (machineStopWait) for it to end.
func signalRecorded(rec machineRecord, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(rec.pid, 0)
	if err != nil {
		return nil // already gone
	}
	defer unix.Close(fd)
	if st, err := procStartTime(rec.pid); err != nil || st != rec.start {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stop the sandbox's processes: %w", err)
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(machineStopWait)
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

// ask sends one request without an operation to the machine on c and
// returns its last reply; files, when given, receive the descriptors of
// the first reply.
func (p *Provider) ask(c *net.UnixConn, req machineRequest, fds *[]*os.File) (machineReply, error) {
	req.Version = machineVersion
	if err := sendRequest(c, req, nil); err != nil {
		return machineReply{}, err
	}
	r := bufio.NewReader(c)
	if fds != nil {
		// The first reply carries the descriptors: read it as one
		// message, before any buffering.
		buf := make([]byte, 4096)
		oob := make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			return machineReply{}, err
		}
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, msg := range msgs {
				if got, err := unix.ParseUnixRights(&msg); err == nil {
					for _, fd := range got {
						unix.CloseOnExec(fd)
						*fds = append(*fds, os.NewFile(uintptr(fd), "log"))
					}
				}
			}
		}
		r = bufio.NewReader(io.MultiReader(strings.NewReader(string(buf[:n])), c))
	}
	var last machineReply
	for {
		h, err := readReply(r)
		if err != nil {
			if errors.Is(err, io.EOF) && (last.Done || last.Started || last.Err != "") {
				return last, nil
			}
			return last, err
		}
		last = h
		if h.Err != "" || h.Done || (fds != nil && h.Started) {
			return h, nil
		}
	}
}

// sendRequest writes one request, with files attached.
func sendRequest(c *net.UnixConn, req machineRequest, files []*os.File) error {
	req.Version = machineVersion
	msg := appendFrame(nil, encodeRequest(&req))
	var oob []byte
	if len(files) > 0 {
		oob = unix.UnixRights(fdsOf(files)...)
	}
	_, _, err := c.WriteMsgUnix(msg, oob, nil)
	return err
}

// launchMachine hands one operation to the sandbox's machine, starting it
// when it is stopped.
func (p *Provider) launchMachine(dir, id string, cfg *initConfig, req machineRequest, stdio initStdio) (*proc, error) {
	for attempt := 1; ; attempt++ {
		pr, retry, err := p.handOver(dir, id, cfg, req, stdio)
		if retry && attempt < machineAttempts {
			continue
		}
		if retry {
			err = &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "sandbox " + id, Msg: "the sandbox's machine stopped as the operation started; try again"}
		}
		return pr, err
	}
}

// handOver sends one operation and its descriptors to a machine. retry
// says that the machine ended the connection before starting the
// operation (it was stopping): nothing ran. It connects once the
// operation's descriptors are made, so that the machine, woken by the
// connection, finds the request already there.
func (p *Provider) handOver(dir, id string, cfg *initConfig, req machineRequest, stdio initStdio) (_ *proc, retry bool, _ error) {
	pr := &proc{id: id, dir: dir, exited: make(chan struct{}), settled: make(chan struct{})}
	if cfg.Resources.MemoryMB > 0 && p.cg.controllers["memory"] {
		mem := p.cg.limitDir("memory", id+"-"+machineCgroup)
		before := oomKills(mem)
		pr.oomKilled = func() bool { return oomKills(mem) > before }
	}
	frame := appendFrame(nil, encodeConfig(cfg))
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
	conn, err := p.connect(dir, id)
	if err != nil {
		return fail(false, err)
	}
	pr.conn = conn
	// The configuration goes into the control pipe first; a large one
	// (a long argv, a big environment) is written by a goroutine, which
	// the runner's reading, or the pipe's end, lets go.
	written := make(chan struct{})
	go func() {
		_ = writeAll(pr.ctl, frame)
		close(written)
	}()
	req.Op = reqRun
	err = sendRequest(conn, req, ends.files)
	// Our copies of the operation's ends go now (the caller's own files
	// stay open): the runner holds the only ones.
	ends.closeChild()
	if err != nil {
		pr.closeCtl(false)
		<-written
		return fail(true, nil)
	}
	replies := bufio.NewReader(conn)
	r, err := readReply(replies)
	switch {
	case err != nil:
		pr.closeCtl(false)
		<-written
		return fail(true, nil)
	case r.Err != "":
		pr.closeCtl(false)
		<-written
		m := statusMsg{Err: r.Err, Setup: r.Setup, Kind: r.Kind}
		if !r.Setup {
			// The request's fault (a user the sandbox lacks), or no
			// room in the machine for another process.
			op := "sandbox " + id
			if cfg.Mode == modeExec {
				op = "exec in " + id
			}
			if r.Kind == kindUnavailable {
				m.Err += "; " + p.roomFor(id, pr)
			}
			return fail(false, errorOf(op, m))
		}
		return fail(false, setupErr(id, m))
	case !r.Started:
		pr.closeCtl(false)
		<-written
		return fail(false, fmt.Errorf("local: sandbox %s: unexpected machine reply", id))
	}
	pr.written = written
	pr.status = bufio.NewReader(pr.statusR)
	ends.outs.start(ends.copyTo...)
	// The runner's exit is reported by the init; a runner that reported
	// the operation's end may live on (for what its command left
	// running), and is not waited for.
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

// roomFor says why the machine of sandbox id could start no process for
// the operation pr: its memory limit, where the OOM killer ended a process
// since the operation began (the runner being prepared, most likely),
// else its process limit.
func (p *Provider) roomFor(id string, pr *proc) string {
	if pr.oomKilled != nil && pr.oomKilled() {
		return "the sandbox's memory limit is reached, and the kernel's OOM killer ended the process being started (--memory): " + makeRoom
	}
	return p.processRoom(id)
}

// makeRoom is what to do about a sandbox whose limits are full.
const makeRoom = "end some of its processes (sandbox ps, sandbox kill) or stop it (sandbox stop)"

// processRoom says how full the process limit of sandbox id is, for an
// operation the machine could start no process for.
func (p *Provider) processRoom(id string) string {
	if !p.cg.controllers["pids"] {
		return "the sandbox may be at its process limit: " + makeRoom
	}
	dir := p.cg.limitDir("pids", id+"-"+machineCgroup)
	read := func(name string) string {
		b, _ := readFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	cur, max := read("pids.current"), read("pids.max")
	n, err1 := strconv.Atoi(cur)
	limit, err2 := strconv.Atoi(max)
	if err1 != nil || err2 != nil || n+reservedThreads < limit {
		return "the sandbox may be at its process limit: " + makeRoom
	}
	return fmt.Sprintf("the sandbox is at its process limit (%d of %d tasks: --pids, plus %d for the machine's own, counts every process and thread): %s", n, limit, machinePidsAllowance, makeRoom)
}

// readReply reads one reply from a machine.
func readReply(r *bufio.Reader) (machineReply, error) {
	body, err := readFrame(r)
	if err != nil {
		return machineReply{}, err
	}
	return decodeReply(body)
}

// Start starts the sandbox's machine unless it runs.
func (p *Provider) Start(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, dir, err := p.load(id)
	if err != nil {
		return err
	}
	if p.weak {
		return nil
	}
	return p.ensureMachine(dir, id, machineStart{})
}

// Stop ends every process of the sandbox (SIGTERM, then SIGKILL after a
// grace period, or as soon as ctx ends, which Stop then returns) and its
// machine; its files stay. Stopping a stopped sandbox does nothing.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, dir, err := p.load(id)
	if err != nil {
		return err
	}
	if err := p.stopMachine(ctx, dir, stopGrace); err != nil {
		return fmt.Errorf("local: stop sandbox %s: %w", id, err)
	}
	if p.spread {
		// The machine's work directories are free: a reaper makes them
		// fresh for the next start (see prepareAhead).
		p.bg.wg.Go(func() { p.startReaper(filepath.Join(p.dir, trashDir)) })
	}
	// Under the machine lock, and only while the sandbox is still
	// stopped: a start that followed the stop is placing its init in
	// these cgroups.
	if lock, err := lockFile(dir, machineLock, unix.LOCK_EX); err == nil {
		if _, alive := liveMachine(dir); !alive {
			p.cg.removeSandbox(id)
		}
		lock.Close()
	}
	return nil
}

// TakeNote returns, once, what the sandbox's last start found: a machine
// that had ended without a stop.
func (p *Provider) TakeNote(id string) string {
	dir, err := p.sandboxDir(id)
	if err != nil {
		return ""
	}
	if disk := diskNote(dir); disk != "" {
		p.notes.add(id, "sandbox "+id+" "+disk)
	}
	note := p.notes.take(id)
	words, err := readFile(filepath.Join(dir, crashedFile))
	if err != nil || os.Remove(filepath.Join(dir, crashedFile)) != nil {
		return note
	}
	if note != "" {
		note = "; " + note
	}
	why := "its machine was killed, or the host restarted"
	if len(words) > 0 {
		why = "its machine ended: " + string(words)
	}
	return "sandbox " + id + " had stopped without being asked to (" + why + "); it was started again with its files intact, but its processes and /tmp are gone" + note
}

// machineConn connects to the running machine of sandbox id for a request
// that needs no operation; running is false (and the connection nil) when
// the sandbox is stopped.
func (p *Provider) machineConn(ctx context.Context, id, verb string) (c *net.UnixConn, dir string, running bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", false, err
	}
	_, dir, err = p.load(id)
	if err != nil {
		return nil, "", false, err
	}
	if p.weak {
		return nil, dir, false, providers.Errorf(providers.ErrUnsupported, Name, verb, "the weak mode (%s=1) has no machine whose processes outlive a command", weakEnvVar)
	}
	c, err = p.dialMachine(dir)
	if err != nil {
		if _, alive := liveMachine(dir); alive {
			if other := otherVersion(dir); other != "" {
				return nil, dir, false, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: verb + " in " + id,
					Msg: otherVersionSays(other) + ": `sandbox stop " + id + "` ends it (its processes and /tmp with it), and the next operation starts it again", Err: err}
			}
			return nil, dir, false, fmt.Errorf("local: %s in %s: the machine does not answer: %w", verb, id, err)
		}
		return nil, dir, false, nil
	}
	// A cancelled request ends with its connection (the caller closes
	// it, which ends the watch too).
	context.AfterFunc(ctx, func() { c.Close() })
	return c, dir, true, nil
}

// Processes lists the processes of the sandbox's machine, and the
// background commands that ended since it started; a stopped sandbox has
// none.
func (p *Provider) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	c, _, running, err := p.machineConn(ctx, id, "ps")
	if err != nil || !running {
		return nil, err
	}
	defer c.Close()
	r, err := p.ask(c, machineRequest{Op: reqPs}, nil)
	if err == nil && r.Err != "" {
		err = errors.New(r.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("local: ps in %s: %w", id, err)
	}
	return r.Procs, nil
}

// Signal sends sig to the process pid of the sandbox's machine.
func (p *Provider) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	c, _, running, err := p.machineConn(ctx, id, "kill")
	if err != nil {
		return err
	}
	if !running {
		return providers.Errorf(providers.ErrNotFound, Name, "kill", "no process with pid %d: sandbox %s is stopped", pid, id)
	}
	defer c.Close()
	r, err := p.ask(c, machineRequest{Op: reqKill, PID: pid, Signal: int(sig)}, nil)
	switch {
	case err != nil:
		return fmt.Errorf("local: kill %d in %s: %w", pid, id, err)
	case r.Err != "":
		return &providers.Error{Kind: sentinel(r.Kind), Provider: Name, Op: "kill", Msg: r.Err}
	}
	return nil
}

// logFollowTick is how often a followed log is read again while its
// command runs.
const logFollowTick = 100 * time.Millisecond

// Logs copies the output of the background command pid into w; with
// follow it keeps copying until the command ends. It returns the
// command's exit status once it has ended. The log of a stopped sandbox's
// command is what it wrote until the stop.
func (p *Provider) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	c, dir, running, err := p.machineConn(ctx, id, "logs")
	if err != nil {
		return nil, err
	}
	if !running {
		f, err := os.OpenFile(filepath.Join(dir, logName(pid)), os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, providers.Errorf(providers.ErrNotFound, Name, "logs", "no background command with pid %d in sandbox %s", pid, id)
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return nil, err
	}
	defer c.Close()
	var fds []*os.File
	r, err := p.ask(c, machineRequest{Op: reqLogs, PID: pid, Follow: follow}, &fds)
	defer func() {
		for _, f := range fds {
			f.Close()
		}
	}()
	switch {
	case err != nil:
		return nil, fmt.Errorf("local: logs of %d in %s: %w", pid, id, err)
	case r.Err != "":
		return nil, &providers.Error{Kind: sentinel(r.Kind), Provider: Name, Op: "logs", Msg: r.Err}
	case len(fds) != 1:
		return nil, fmt.Errorf("local: logs of %d in %s: the machine sent no log", pid, id)
	}
	log := fds[0]
	if _, err := io.Copy(w, log); err != nil {
		return nil, err
	}
	if r.Code != nil || !follow {
		return r.Code, nil
	}
	ended := make(chan machineReply, 1)
	go func() {
		last, _ := readReply(bufio.NewReader(c))
		ended <- last
	}()
	t := time.NewTicker(logFollowTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case last := <-ended:
			if _, err := io.Copy(w, log); err != nil {
				return nil, err
			}
			if last.Code == nil {
				return nil, fmt.Errorf("local: logs of %d in %s: the machine stopped", pid, id)
			}
			return last.Code, nil
		case <-t.C:
			if _, err := io.Copy(w, log); err != nil {
				return nil, err
			}
		}
	}
}
