//go:build linux

package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// A standby machine is an init started ahead of need, for no sandbox yet:
// its namespaces made, its binary booted, in cgroups of its own (it moved
// itself there, and waited out the migration's RCU grace period), with
// its first runner started in its own network. The next start of a
// sandbox on this host (a create, or the first use of a stopped sandbox)
// claims it: the host renames its cgroups to the sandbox's and writes the
// sandbox's limits, hands it the descriptors a fresh init would have had,
// and the start goes on as a fresh one's does, from its configuration on
// (buildRoot and the rest) — without the process starts and the cgroup
// migration, which are most of a start's time. One waits per binary and
// user; it ends unclaimed after standbyIdle, or within a standbyTick of
// its directory's removal.

// The descriptors of a standby init, after control (3) and status (4):
// its listening socket and its directory.
const (
	standbyListenFD = 5
	standbyDirFD    = 6
)

// standbyOldWatchFD, when open in a standby init, is the masks watch of
// the standby claimed before it, which it closes once it is ready (see
// maskWatch.handTo).
const standbyOldWatchFD = 7

// standbyTick is how often a standby init checks that its directory still
// exists and that it has not waited too long.
const standbyTick = time.Second

// standby is what a machine's init prepares before it has a sandbox: a
// standby init all of it, a fresh one the same minus the first runner,
// which it starts once its configuration says which kind it needs.
type standby struct {
	m      *machine
	exe    int            // the binary, for the runners
	reaped chan os.Signal // SIGCHLD, for machine.reap
	// net is the sandbox's own network namespace, being made.
	net    chan netResult
	netErr error
	// first is the runner started ahead, of kind key, which gets its
	// configuration once release is closed.
	first   *spare
	key     spareKey
	release chan struct{}
}

// netResult is a private network namespace made, or why not.
type netResult struct {
	s   *netStarter
	err error
}

// newMachine starts the life of a machine's init: nothing in the sandbox
// may read its memory or descriptors, nor end it with a signal; its
// binary is kept for the runners, and its network namespace is made on a
// thread of its own (a millisecond or more) meanwhile.
func newMachine() (*standby, error) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("non-dumpable: %w", err)
	}
	ignoreSignals()
	sb := &standby{reaped: make(chan os.Signal, 64), net: make(chan netResult, 1), release: make(chan struct{})}
	signal.Notify(sb.reaped, unix.SIGCHLD)
	sb.m = &machine{uid: os.Getuid(), last: time.Now(), pool: map[spareKey][]*spare{}, children: map[int]*child{},
		bg: map[int]*bgCommand{}, done: make(chan struct{})}
	host, err := newStarter(nil)
	if err != nil {
		return nil, err
	}
	sb.m.nets = map[bool]*netStarter{true: host}
	// The binary, for the runners: named through /proc/self/fd once
	// the host's tree is gone.
	exe, err := unix.Open("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the init's binary: %w", err)
	}
	sb.exe = exe
	go func() {
		s, err := newPrivateNet()
		sb.net <- netResult{s, err}
	}()
	return sb, nil
}

// awaitNet waits until the sandbox's own network namespace is made.
func (sb *standby) awaitNet() error {
	if sb.m.nets[false] == nil && sb.netErr == nil {
		r := <-sb.net
		sb.m.nets[false], sb.netErr = r.s, r.err
	}
	return sb.netErr
}

// runStandby is a standby init's life until a start claims it (then the
// machine's, see runMachine), or until it ends unclaimed. Its
// configuration (cfg) names its cgroups, which it joins before it starts
// anything. It keeps the places of a fresh init's descriptors (control,
// status, and machineListenFD to machineDirFD) taken until the claim
// brings them: nothing it opens meanwhile may sit there.
func runStandby(cfg *initConfig) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "sandbox standby: %v\n", err)
		return 125
	}
	var own [2]int // its listening socket and directory, out of the way
	for i, fd := range []int{standbyListenFD, standbyDirFD} {
		h, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, claimFDs+ctlFD)
		if err != nil {
			return fail(err)
		}
		own[i] = h
	}
	oldWatch, err := unix.FcntlInt(standbyOldWatchFD, unix.F_DUPFD_CLOEXEC, claimFDs+ctlFD)
	if err != nil {
		oldWatch = -1 // none was handed over
	}
	if err := holdFDs(ctlFD, statusFD, machineListenFD, machineSlotFD, machineDirFD); err != nil {
		return fail(err)
	}
	if cfg.Nice {
		// This thread's (its starter sets the others', see
		// spawnStandby): a new thread, and the runner, inherit the
		// nice value of the thread that starts them. (Its pids here
		// are not /proc's, which is the host's until the root is built.)
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, standbyNice)
	}
	// Its cgroup migration holds the host's cgroup lock for an RCU
	// grace period: not while its starter, usually still at work, makes
	// or removes cgroups.
	time.Sleep(time.Duration(cfg.SettleNS))
	if err := enterCgroups(cfg.Cgroups, cfg.CgroupRoot, cfg.WorkCgroups); err != nil {
		return fail(err)
	}
	sb, err := newMachine()
	if err != nil {
		return fail(err)
	}
	// Root's starts check the host's secrets, which this one watches from
	// now on (see maskWatch).
	watch := noMaskWatch()
	if cfg.Nice {
		watch = watchMasks(own[1])
		go watch.verify()
	}
	defer watch.close()
	if err := sb.awaitNet(); err != nil {
		return fail(err)
	}
	root, err := openCgroupRoot(cfg)
	if err == nil {
		err = sb.m.joinWork(root, cfg.WorkCgroups)
	}
	if err != nil {
		return fail(err)
	}
	sb.key = spareKey{}
	sb.first = sb.m.startSpareHeld(sb.key, sb.release)
	// Ready: claims may come (one before the watch's check ended is
	// vouched nothing: its start checks, as without a watch).
	ready := strings.TrimSuffix(cfg.Socket, ".wait") + ".sock"
	if err := unix.Renameat(own[1], cfg.Socket, own[1], ready); err != nil {
		return fail(fmt.Errorf("announce the standby machine: %w", err))
	}
	if oldWatch >= 0 {
		go unix.Close(oldWatch)
	}
	conn, err := awaitClaim(own[0], own[1], sb.exe, time.Duration(cfg.IdleNS))
	if err != nil {
		return 0 // unclaimed: nothing to report, and nobody to report it to
	}
	err = takeClaim(conn, watch)
	if err != nil {
		return fail(err)
	}
	return runConfigured(os.NewFile(ctlFD, "control"), os.NewFile(statusFD, "status"), sb)
}

// cgroupPath is a cgroup file to write, with its directory.
type cgroupPath struct {
	Dir  string
	Name string
	Val  string
}

// enterCgroups makes the cgroups of files, writes the files, and moves
// this process into them (into the parents of its work cgroups, rels of
// root, which joinWork joins); made again when they vanish before it is in
// (removeEmpty, in a delete, removes any empty one).
func enterCgroups(files []cgroupPath, root string, work []cgroupPath) error {
	var err error
	for range 3 {
		if err = tryCgroups(files, root, work); err == nil || !cgroupGone(err) {
			return err
		}
	}
	return err
}

// tryCgroups is one attempt of enterCgroups.
func tryCgroups(files []cgroupPath, root string, work []cgroupPath) error {
	var dirs []string
	for _, f := range files {
		// With its parents: the controllers only a standby sets
		// (cpu) may have none of the provider's cgroups yet.
		if err := os.MkdirAll(f.Dir, 0o755); err != nil {
			return fmt.Errorf("make cgroup %s: %w", f.Dir, err)
		}
		if err := os.WriteFile(filepath.Join(f.Dir, f.Name), []byte(f.Val), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %w", f.Name, err)
		}
		d := f.Dir
		if slices.ContainsFunc(work, func(w cgroupPath) bool { return filepath.Join(root, w.Dir) == d }) {
			d = filepath.Dir(d)
		}
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		// "0" is the writer itself, whose threads all move.
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0o644); err != nil {
			return fmt.Errorf("enter cgroup %s: %w", d, err)
		}
	}
	return nil
}

// awaitClaim waits for the start that claims this standby init on its
// listening socket lnFD, for at most idle, checking every standbyTick that
// its directory dirFD and its binary exeFD still exist: no start claims
// the standby of a binary that was removed or replaced (an upgrade, a
// test binary that ended), whose identity no new one has.
func awaitClaim(lnFD, dirFD, exeFD int, idle time.Duration) (*net.UnixConn, error) {
	lf := os.NewFile(uintptr(lnFD), "standby listener")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return nil, err
	}
	ln, ok := l.(*net.UnixListener)
	if !ok {
		return nil, errors.New("standby socket is not a Unix socket")
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	defer unix.Close(dirFD)
	uid := os.Getuid()
	end := time.Now().Add(idle)
	for time.Now().Before(end) {
		var st unix.Stat_t
		if err := unix.Fstat(dirFD, &st); err != nil || st.Nlink == 0 {
			return nil, errors.New("the standby directory is gone")
		}
		if err := unix.Fstat(exeFD, &st); err != nil || st.Nlink == 0 {
			return nil, errors.New("the binary is gone")
		}
		_ = ln.SetDeadline(time.Now().Add(standbyTick))
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return nil, err
		}
		if err := checkPeer(c, uid); err != nil {
			c.Close()
			continue
		}
		return c, nil
	}
	return nil, errors.New("unclaimed")
}

// takeClaim says to the claiming host that this init is its (and which
// masks cache its watch vouches for, see maskWatch, handing the watch
// over), receives the descriptors a fresh machine init has (control,
// status, the machine's listening socket, its work slot and its state
// directory) and puts them where a fresh init has them.
func takeClaim(c *net.UnixConn, watch *maskWatch) error {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(claimTimeout))
	if err := watch.handTo(c, claimAnswer(watch.vouch())); err != nil {
		return fmt.Errorf("answer the claim: %w", err)
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(claimFDs*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || n != 1 {
		return fmt.Errorf("read the claim: %v", err)
	}
	fds := rightsOf(oob[:oobn])
	if len(fds) != claimFDs {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return fmt.Errorf("the claim has %d descriptors, want %d", len(fds), claimFDs)
	}
	// Out of the way first (one may sit where another goes), then over
	// the places held for them.
	for i, fd := range fds {
		high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, claimFDs+ctlFD)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("move the claim's descriptors: %w", err)
		}
		fds[i] = high
	}
	for i, fd := range fds {
		err := unix.Dup3(fd, ctlFD+i, unix.O_CLOEXEC)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("move the claim's descriptors: %w", err)
		}
	}
	return nil
}

// The host's side: the standby directory, under the provider's, holds
// the standby inits' sockets, named standbySockName.
const (
	standbyDir  = "standby"
	standbyLock = ".lock"
	// standbyIdle is how long a standby init waits to be claimed.
	standbyIdle = 10 * time.Minute
	// standbySettle is how long a standby init waits before it moves
	// into its cgroups (see runStandby).
	standbySettle = 150 * time.Millisecond
	// standbyDelay is how long after a start this process starts the
	// next standby init (unless Close comes first): not beside the
	// operations that usually follow a start.
	standbyDelay = 200 * time.Millisecond
	// standbyEnvVar set to 0 keeps no standby machine.
	standbyEnvVar = "SANDBOX_LOCAL_STANDBY"
	// claimByte is a standby init's answer to a claim; claimTimeout
	// bounds each step of a claim; claimFDs is the number of
	// descriptors a claim hands over.
	claimByte    = 'C'
	claimTimeout = 2 * time.Second
	claimFDs     = 5
)

// standbyNice is the nice value of root's standby machines until they are
// claimed: their starts (of this binary, twice), and their cgroup
// migration, yield the CPUs to the foreground, usually the start that
// asked for them going on with its operations.
const standbyNice = 19

// reniceListed sets the nice value of the threads list returns, listing
// again until it shows none not yet set (a thread started meanwhile by
// one not yet reached), and returns how many it set.
func reniceListed(list func() ([]int, error), nice int) int {
	done := map[int]bool{}
	for range 3 {
		tids, err := list()
		if err != nil {
			break
		}
		fresh := false
		for _, tid := range tids {
			if !done[tid] {
				_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
				done[tid], fresh = true, true
			}
		}
		if !fresh {
			break
		}
	}
	return len(done)
}

// reniceAll sets the nice value of every thread of process pid (a pid of
// this process's PID namespace, which /proc's must be).
func reniceAll(pid, nice int) {
	reniceListed(func() ([]int, error) {
		entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		var tids []int
		for _, e := range entries {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tids = append(tids, tid)
			}
		}
		return tids, err
	}, nice)
}

// reniceStandby sets the nice value of every thread of the standby init
// pid and of its runner: those its cgroup lists (a cgroup v1 "tasks" file
// lists threads; those of its cgroupWork child too), else those /proc
// lists for the init and its children.
func (p *Provider) reniceStandby(pid, nice int) {
	if p.cg.kind == cgroupV1 {
		for _, d := range p.cg.dirsOf(standbyCgroup(pid)) {
			set := reniceListed(func() ([]int, error) {
				b, err := readFile(filepath.Join(d, "tasks"))
				if w, err := readFile(filepath.Join(d, cgroupWork, "tasks")); err == nil {
					b = append(b, w...)
				}
				var tids []int
				for _, f := range strings.Fields(string(b)) {
					if tid, err := strconv.Atoi(f); err == nil {
						tids = append(tids, tid)
					}
				}
				return tids, err
			}, nice)
			if set > 0 {
				return
			}
		}
	}
	reniceAll(pid, nice)
	for _, child := range childrenOf(pid) {
		reniceAll(child, nice)
	}
}

// standbySockName is the socket of the standby init pid (started at
// start, as /proc/PID/stat counts) of the binary identity: ".sock" once
// it is ready to be claimed, ".wait" until then.
func standbySockName(identity string, pid int, start uint64, ready bool) string {
	suffix := ".wait"
	if ready {
		suffix = ".sock"
	}
	return identity + "-" + strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10) + suffix
}

// parseStandbySock is standbySockName's inverse, for this identity.
func parseStandbySock(identity, name string) (pid int, start uint64, ready, ok bool) {
	rest, ok := strings.CutPrefix(name, identity+"-")
	if !ok {
		return 0, 0, false, false
	}
	if rest, ready = strings.CutSuffix(rest, ".sock"); !ready {
		if rest, ok = strings.CutSuffix(rest, ".wait"); !ok {
			return 0, 0, false, false
		}
	}
	p, st, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, 0, false, false
	}
	start, err = strconv.ParseUint(st, 10, 64)
	if err != nil {
		return 0, 0, false, false
	}
	return pid, start, ready, true
}

// standbyKey names the standby machines this provider may claim: of its
// binary (identity), started from the mount table it sees now. A standby
// init's mount namespace is a copy of its starter's: a start whose mount
// table differs (a mount made on the host since, or another mount
// namespace) does not take it, as the host's secrets it masks are those
// of its own view.
func (p *Provider) standbyKey() string {
	h := fnv.New64a()
	b, _ := readFile("/proc/self/mountinfo")
	h.Write(b)
	return p.exeID() + "." + strconv.FormatUint(h.Sum64(), 36)
}

// standbyCgroup names a standby init's cgroups until a claim renames them.
func standbyCgroup(pid int) string { return "standby-" + strconv.Itoa(pid) }

// standbyOn says whether this provider keeps a standby machine: not when
// turned off, not in the weak mode, and not with cgroup v2, which cannot
// rename a cgroup.
func (p *Provider) standbyOn() bool {
	return p.standby && !p.weak && p.cg.kind != cgroupV2
}

// wantStandby has a standby machine started after a start: by root at
// once, in the background (see standbyNice); by another user, whose
// standby machine cannot be given its priority back and so starts with
// the foreground's, standbyDelay later or at Close, whichever comes first:
// not beside the operations that usually follow a start.
func (p *Provider) wantStandby() {
	if !p.standbyOn() {
		return
	}
	if p.uid == 0 {
		// Root starts it at once, at the lowest priority (standbyNice),
		// and gives the machine its priority back when it claims it.
		p.bg.wg.Add(1)
		go func() {
			defer p.bg.wg.Done()
			_ = p.spawnStandby()
		}()
		return
	}
	p.standbyMu.Lock()
	defer p.standbyMu.Unlock()
	if p.standbyTimer != nil {
		return
	}
	p.bg.wg.Add(1)
	p.standbyTimer = time.AfterFunc(standbyDelay, func() {
		defer p.bg.wg.Done()
		p.standbyMu.Lock()
		p.standbyTimer = nil
		p.standbyMu.Unlock()
		_ = p.spawnStandby()
	})
}

// standbyNow starts the standby machine a start asked for at once, if it
// waits for its delay.
func (p *Provider) standbyNow() {
	p.standbyMu.Lock()
	t := p.standbyTimer
	stopped := t != nil && t.Stop()
	if stopped {
		p.standbyTimer = nil
	}
	p.standbyMu.Unlock()
	if stopped {
		defer p.bg.wg.Done()
		_ = p.spawnStandby()
	}
}

// standbys lists the sockets of this binary's standby inits in dir that
// still run: those ready to be claimed, and with waiting those still
// getting ready too. It removes those of inits that ended.
func (p *Provider) standbys(dir, key string, waiting bool) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		pid, start, ready, ok := parseStandbySock(key, e.Name())
		if !ok {
			continue
		}
		if st, err := procStartTime(pid); err != nil || st != start {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		if ready || waiting {
			out = append(out, e.Name())
		}
	}
	return out
}

// haveStandby says whether a standby machine waits to be claimed.
func (p *Provider) haveStandby() bool {
	return p.standbyOn() && len(p.standbys(filepath.Join(p.dir, standbyDir), p.standbyKey(), false)) > 0
}

// spawnStandby starts a standby init unless one waits (or is being
// started by another process). It does not wait for it: the init moves
// itself into its cgroups (waiting out the migration's grace period) and
// starts its runner on its own; a claim that comes sooner waits for it.
func (p *Provider) spawnStandby() error {
	dir := filepath.Join(p.dir, standbyDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := lockFile(dir, standbyLock, unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		return nil // another process starts one
	}
	defer lock.Close()
	// Before the init starts: its mount namespace is a copy of this
	// process's at its start, or newer (then no start takes it).
	key := p.standbyKey()
	if len(p.standbys(dir, key, true)) > 0 {
		return nil
	}
	// Listening under a name no claim looks for until the init is
	// started and named.
	tmp := "new-" + strconv.Itoa(os.Getpid()) + ".sock"
	_ = os.Remove(filepath.Join(dir, tmp))
	lnFile, err := listenFile(dir, tmp)
	if err != nil {
		return err
	}
	defer lnFile.Close()
	dirFile, err := os.Open(dir)
	if err != nil {
		os.Remove(filepath.Join(dir, tmp))
		return err
	}
	defer dirFile.Close()
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		os.Remove(filepath.Join(dir, tmp))
		return err
	}
	defer ctlW.Close()
	// Its status goes nowhere before a claim: the control pipe's reading
	// end holds the place.
	files := []*os.File{ctlR, ctlR, lnFile, dirFile}
	if old := p.takeWatch(); old != nil {
		defer old.Close()
		files = append(files, old) // standbyOldWatchFD
	}
	cmd := p.initCmd(files)
	withSlack(monitorSlack, func() { err = cmd.Start() })
	ctlR.Close()
	if err != nil {
		os.Remove(filepath.Join(dir, tmp))
		return err
	}
	pid := cmd.Process.Pid
	if p.uid == 0 {
		// Every thread it has: the threads they start inherit it.
		reniceAll(pid, standbyNice)
	}
	go func() { _ = cmd.Wait() }() // reaped whenever it ends, if this process lives that long
	kill := func(err error) error {
		_ = cmd.Process.Kill()
		os.Remove(filepath.Join(dir, tmp))
		return err
	}
	start, err := procStartTime(pid)
	if err != nil {
		return kill(err)
	}
	var cgroups []cgroupPath
	limits := p.standbyFiles()
	for _, f := range limits {
		cgroups = append(cgroups, cgroupPath{Dir: p.cg.fileDir(f, standbyCgroup(pid)), Name: f.name, Val: f.val})
	}
	if err := writeIDMaps(pid, p.host().uids, p.host().gids); err != nil {
		return kill(err)
	}
	wait := standbySockName(key, pid, start, false)
	err = os.Rename(filepath.Join(dir, tmp), filepath.Join(dir, wait))
	if err == nil {
		err = writeConfig(ctlW, &initConfig{Mode: modeStandby, Cgroups: cgroups, IdleNS: int64(standbyIdle),
			CgroupRoot: p.cg.root, WorkCgroups: p.cg.workFiles(limits, standbyCgroup(pid)),
			Nice: p.uid == 0, SettleNS: int64(standbySettle), Socket: wait})
	}
	if err != nil {
		return kill(err)
	}
	return nil
}

// standbyFiles are the files that make a standby init's cgroups: one in
// every controller a sandbox's limits may use, so that a claim needs no
// migration whatever the sandbox's limits; its limits are a default
// sandbox's until then.
func (p *Provider) standbyFiles() []cgroupFile {
	res := p.effectiveResources(providers.Resources{})
	res.Pids += machinePidsAllowance
	files := p.cg.machineFiles(res)
	if p.cg.kind == cgroupV1 && p.cg.controllers["cpu"] {
		files = append(files, cgroupFile{ctl: "cpu", name: "cpu.cfs_quota_us", val: "-1"})
	}
	return files
}

// claimStandby claims the waiting standby init, if there is one, for
// sandbox id: its cgroups become the sandbox's, with the limits of res,
// and it gets files (the descriptors spawnInit gives a fresh init). It
// returns nil when there is none, or when the claim failed (the start
// then spawns a fresh init: a standby machine is only ever a shortcut).
func (p *Provider) claimStandby(id string, res providers.Resources, files []*os.File) *initProc {
	if !p.standbyOn() {
		return nil
	}
	dir := filepath.Join(p.dir, standbyDir)
	key := p.standbyKey()
	for _, name := range p.standbys(dir, key, false) {
		if ip := p.claim(dir, key, name, id, res, files); ip != nil {
			return ip
		}
	}
	return nil
}

// claim claims the standby init whose socket is name in dir (see
// claimStandby). The socket is renamed first, so that no other start
// claims it too; the init answers, and gets its descriptors.
func (p *Provider) claim(dir, key, name, id string, res providers.Resources, files []*os.File) *initProc {
	pid, start, _, _ := parseStandbySock(key, name)
	mine := name + ".claim"
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, mine)); err != nil {
		return nil // claimed by another start
	}
	rec := machineRecord{pid: pid, start: start}
	var c *net.UnixConn
	err := withDir(dir, func(short string) error {
		var err error
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: short + "/" + mine, Net: "unix"})
		return err
	})
	os.Remove(filepath.Join(dir, mine))
	if err != nil {
		_ = killRecorded(rec)
		return nil
	}
	defer c.Close()
	if p.uid == 0 {
		// Its priority back (see standbyNice), its runner's too, before
		// it answers: at the lowest it would answer last.
		p.reniceStandby(pid, 0)
	}
	// Its cgroups become the sandbox's while it wakes up to answer (it
	// is in them: its socket is named ready only then).
	dirs, err := p.cg.rename(standbyCgroup(pid), id+"-"+machineCgroup, p.cg.machineFiles(res))
	abandon := func() *initProc {
		_ = killRecorded(rec)
		removeDirs(append(dirs, p.cg.dirsOf(standbyCgroup(pid))...))
		return nil
	}
	if err != nil {
		return abandon()
	}
	_ = c.SetDeadline(time.Now().Add(claimTimeout))
	b := make([]byte, len(claimAnswer(0)))
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if err == nil {
		p.keepWatch(rightsOf(oob[:oobn]))
		if n < len(b) {
			_, err = io.ReadFull(c, b[n:])
		}
	}
	if err != nil || b[0] != claimByte {
		return abandon()
	}
	if _, _, err := c.WriteMsgUnix([]byte{claimByte}, unix.UnixRights(fdsOf(files)...), nil); err != nil {
		return abandon()
	}
	return &initProc{
		pid:     pid,
		start:   start,
		vouched: binary.LittleEndian.Uint64(b[1:]),
		joined:  func() error { return nil },
		kill: func() {
			_ = killRecorded(rec)
			removeDirs(dirs)
		},
	}
}

// keepWatch keeps the first of fds, the masks watch a claimed standby
// handed over (see maskWatch.handTo), for the next standby to close, and
// closes the others.
func (p *Provider) keepWatch(fds []int) {
	if len(fds) == 0 {
		return
	}
	for _, fd := range fds[1:] {
		unix.Close(fd)
	}
	p.standbyMu.Lock()
	old := p.oldWatch
	p.oldWatch = os.NewFile(uintptr(fds[0]), "masks watch")
	p.standbyMu.Unlock()
	if old != nil {
		old.Close()
	}
}

// takeWatch returns the watch keepWatch kept, if any, and forgets it.
func (p *Provider) takeWatch() *os.File {
	p.standbyMu.Lock()
	defer p.standbyMu.Unlock()
	w := p.oldWatch
	p.oldWatch = nil
	return w
}
