//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// The weak mode is for hosts without usable user namespaces, and only when
// the user asks for it (SANDBOX_LOCAL_WEAK=1). Without namespaces there is no
// private root, PID space or network: the command runs on the host as the
// invoking user, confined by Landlock (read-only access to the system
// directories, write access to the sandbox's own workspace, home and
// temporary directory, nothing else; TCP denied unless the network is on;
// no signals to or abstract sockets of processes outside), the same seccomp
// filter, no_new_privs and no capabilities. What it cannot hide is listed in
// weakBanner, which every exec prints on stderr and `info` shows.

// weakEnvVar opts into the weak mode.
const weakEnvVar = "SANDBOX_LOCAL_WEAK"

// isolationWeak is Info.Isolation for sandboxes run in the weak mode.
const isolationWeak = "weak"

// weakBanner labels every command run in the weak mode.
const weakBanner = "sandbox: WEAK ISOLATION (" + weakEnvVar + "=1, no user namespaces): the command runs on the host under Landlock and seccomp; " +
	"it sees host processes and world-readable files of the system directories, paths are the host's (the workspace is $PWD, not /workspace), " +
	"and only TCP is cut off when the network is off; enable user namespaces for the full sandbox\n"

// weakHint is added to the user-namespace error.
const weakHint = "; or, accepting much weaker isolation (no namespaces; Landlock, seccomp and no_new_privs only), set " + weakEnvVar + "=1"

// weakPaths maps the sandbox's paths to the host directories that stand in
// for them in the weak mode, and back.
type weakPaths struct {
	pairs [][2]string // sandbox path, host path
}

func newWeakPaths(cfg *initConfig) weakPaths {
	return weakPaths{pairs: [][2]string{{"/workspace", cfg.Workspace}, {cfg.Home, cfg.HomeSrc}, {"/tmp", cfg.TmpSrc}}}
}

// toHost maps a sandbox path; other paths stay as they are.
func (w weakPaths) toHost(p string) string { return w.mapPath(p, 0, 1) }

// toSandbox maps a host path back.
func (w weakPaths) toSandbox(p string) string { return w.mapPath(p, 1, 0) }

// mapPath maps p from side from of the pairs to side to.
func (w weakPaths) mapPath(p string, from, to int) string {
	for _, pr := range w.pairs {
		if p == pr[from] {
			return pr[to]
		}
		if rest, ok := strings.CutPrefix(p, pr[from]+"/"); ok {
			return pr[to] + "/" + rest
		}
	}
	return p
}

// weakSetup prepares the init in the weak mode: the request's paths and
// variables point at the sandbox's host directories, the temporary
// directory starts empty, and the init becomes the subreaper of everything
// the command starts, which it kills when the command ends or when it is
// asked to stop (SIGTERM, also sent if the CLI dies).
func weakSetup(cfg *initConfig) error {
	if os.Geteuid() == 0 {
		return errors.New("the weak mode is only for unprivileged users: root reads every file of the host without a user namespace; enable user namespaces instead")
	}
	if err := os.RemoveAll(cfg.TmpSrc); err != nil {
		return fmt.Errorf("clear the temporary directory: %w", err)
	}
	if err := os.MkdirAll(cfg.TmpSrc, 0o700); err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	w := newWeakPaths(cfg)
	if cfg.Cwd != "" {
		cfg.Cwd = w.toHost(cfg.Cwd)
	} else {
		cfg.Cwd = cfg.Workspace
	}
	for i, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "HOME" {
			cfg.Env[i] = k + "=" + w.toHost(v)
		}
	}
	cfg.Env = append(cfg.Env, "TMPDIR="+cfg.TmpSrc, "SANDBOX_ISOLATION=weak")
	if f := cfg.File; f != nil {
		f.Path = w.toHost(f.Path)
		if f.To != "" {
			f.To = w.toHost(f.To)
		}
		if f.Grep != nil {
			f.Grep.Path = w.toHost(f.Grep.Path)
		}
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("subreaper: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cfg.stop = make(chan struct{})
	go func() {
		<-sig
		close(cfg.stop)
	}()
	return nil
}

// reapWeak is reap for the weak mode: it polls, so that the init's main
// thread, the only one allowed to signal the command (Landlock scopes
// signals per thread's domain, and each thread got its own), can also
// notice a request to stop and kill everything itself.
func reapWeak(pid int, stop <-chan struct{}) int {
	for {
		select {
		case <-stop:
			killDescendants()
			os.Exit(128 + int(syscall.SIGKILL))
		default:
		}
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 125
		case got == pid && ws.Exited():
			return ws.ExitStatus()
		case got == pid && ws.Signaled():
			return 128 + int(ws.Signal())
		case got > 0:
			continue // an adopted orphan
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// weakUnmap turns the host paths of a file operation's answer, or of its
// error, back into sandbox paths.
func weakUnmap(cfg *initConfig, m *statusMsg, err error) {
	w := newWeakPaths(cfg)
	var pe *os.PathError
	if errors.As(err, &pe) {
		pe.Path = w.toSandbox(pe.Path)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		le.Old, le.New = w.toSandbox(le.Old), w.toSandbox(le.New)
	}
	if m.Info != nil {
		m.Info.Path = w.toSandbox(m.Info.Path)
	}
	for i := range m.Infos {
		m.Infos[i].Path = w.toSandbox(m.Infos[i].Path)
	}
	for i := range m.Matches {
		m.Matches[i].Path = w.toSandbox(m.Matches[i].Path)
	}
}

// weakLandlockRules: read and execute in the host's system directories and
// /proc, write only in the sandbox's own directories and a few devices.
func weakLandlockRules(cfg *initConfig) []landlock.Rule {
	ro := []string{"/proc", "/dev"}
	var roFiles []string
	for _, l := range cfg.Layers {
		dirs, files := roExcept(l.Lower, cfg.WeakHidden)
		ro = append(ro, dirs...)
		roFiles = append(roFiles, files...)
	}
	devs := []string{"/dev/ptmx"}
	for _, n := range devNodes {
		devs = append(devs, "/dev/"+n)
	}
	return []landlock.Rule{
		landlock.RODirs(ro...).IgnoreIfMissing(),
		landlock.ROFiles(roFiles...).IgnoreIfMissing(),
		landlock.RWDirs(cfg.Workspace, cfg.HomeSrc, cfg.TmpSrc).WithRefer().WithResolveUnix(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWFiles(devs...).WithIoctlDev().IgnoreIfMissing(),
	}
}

// killDescendants kills every process the init adopted or started, until
// none is left. As subreaper the init inherits every orphan, so a daemon
// that double-forked or called setsid is still its descendant: each killed
// child is waited for, by which time its own children have been handed to
// the init, and the next round finds them.
func killDescendants() {
	self := os.Getpid()
	for range 1000 {
		kids := childrenOf(self)
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		for _, pid := range kids {
			var ws unix.WaitStatus
			for {
				_, err := unix.Wait4(pid, &ws, 0, nil)
				if err != unix.EINTR {
					break // reaped, or reaped by the init's main loop
				}
			}
		}
	}
}

// childrenOf lists the children of pid from /proc: from its threads'
// children files, or, on a kernel without them (CONFIG_PROC_CHILDREN),
// from the parent of every process.
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	listed := false
	for _, t := range tasks {
		b, err := readFile(t)
		if err != nil {
			continue
		}
		listed = true
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if listed {
		return out
	}
	return childrenByParent(pid, "/proc")
}

// childrenByParent lists the processes under proc (a procfs) whose parent
// is pid.
func childrenByParent(pid int, proc string) []int {
	var out []int
	entries, _ := os.ReadDir(proc)
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := readFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// usernsSysctls are kernel switches that turn unprivileged (or all) user
// namespaces off, with the value that means off and whether it binds root.
var usernsSysctls = []struct {
	path, off string
	root      bool
}{
	{"/proc/sys/user/max_user_namespaces", "0", true},
	{"/proc/sys/kernel/unprivileged_userns_clone", "0", false},
}

// usernsOff reports a kernel switch that keeps this user from creating
// user namespaces, so that Create fails at once (exit 125) with the fix
// instead of every command failing later.
func usernsOff(uid int) error {
	for _, s := range usernsSysctls {
		b, err := readFile(s.path)
		if err != nil || strings.TrimSpace(string(b)) != s.off || (uid == 0 && !s.root) {
			continue
		}
		name := strings.ReplaceAll(strings.TrimPrefix(s.path, "/proc/sys/"), "/", ".")
		return fmt.Errorf("user namespaces are turned off (%s = %s): %s%s", name, s.off, usernsHint, weakHint)
	}
	return nil
}

// weakRunsDir, in a sandbox's directory, holds a record ("pid starttime")
// of each weak-mode init running an operation of it, so that a delete
// from another process ends them (and, through them, what their commands
// started) before the sandbox's files go.
const weakRunsDir = "weak.run"

// recordWeakRun records the weak-mode init pid of the sandbox in dir until
// exited is closed.
func recordWeakRun(dir string, pid int, exited <-chan struct{}) {
	start, err := procStartTime(pid)
	if err != nil {
		return // already gone
	}
	runs := filepath.Join(dir, weakRunsDir)
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return
	}
	name := filepath.Join(runs, strconv.Itoa(pid))
	if err := os.WriteFile(name, []byte(strconv.Itoa(pid)+" "+strconv.FormatUint(start, 10)+"\n"), 0o600); err != nil {
		return
	}
	go func() {
		<-exited
		_ = os.Remove(name)
	}()
}

// endWeakRuns ends the recorded weak-mode inits of the sandbox in dir:
// SIGTERM, on which each kills its command's processes and exits (see
// reapWeak), then SIGKILL for one that did not.
func endWeakRuns(dir string) {
	entries, err := os.ReadDir(filepath.Join(dir, weakRunsDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		b, err := readFile(filepath.Join(dir, weakRunsDir, e.Name()))
		if err != nil {
			continue
		}
		rec, err := parseRecord(string(b))
		if err != nil {
			continue
		}
		_ = signalRecorded(rec, unix.SIGTERM)
		_ = signalRecorded(rec, unix.SIGKILL)
	}
}

// roExcept splits the read-only grant of the directory root around the
// hidden paths beneath it: root itself when none is; else, level by level
// down to each hidden path, the directories and regular files beside it.
// Symlinks are left out (a rule would grant their target; they resolve,
// when used, through the other rules), and so are other kinds of file.
func roExcept(root string, hidden []string) (dirs, files []string) {
	root = filepath.Clean(root)
	var inside []string
	for _, h := range hidden {
		h = filepath.Clean(h)
		if h == root {
			return nil, nil
		}
		if strings.HasPrefix(h, root+"/") {
			inside = append(inside, h)
		}
	}
	if len(inside) == 0 {
		return []string{root}, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		switch {
		case e.IsDir():
			d, f := roExcept(p, inside)
			dirs = append(dirs, d...)
			files = append(files, f...)
		case e.Type().IsRegular():
			files = append(files, p)
		}
	}
	return dirs, files
}
