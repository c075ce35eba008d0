//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// cgroupKind tells how this host lets the provider use cgroups.
type cgroupKind string

// Kinds of cgroup support.
const (
	cgroupNone cgroupKind = ""
	cgroupV1   cgroupKind = "v1" // root on a v1 (or hybrid) host
	cgroupV2   cgroupKind = "v2" // root, or a delegated subtree, on v2
)

// cgroupRoot is where the cgroup filesystems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupParent names the directory (v1: per controller; v2: a prefix)
// under which each running command gets its own cgroup.
const cgroupParent = "sandbox"

// cgroupCLILeaf is where a delegated v2 subtree moves this process, so
// that its own cgroup may enable controllers for the commands' cgroups
// (cgroup v2 allows no processes in a cgroup that has them).
const cgroupCLILeaf = "sandbox-cli"

// cgroupWork names the child cgroup of a machine's (cgroup v1, in the
// pids and memory controllers) that holds every process of the sandbox
// but its init, with the sandbox's pids and memory limits. The init stays
// in the machine's cgroup above it, outside those limits: a fork bomb that
// fills the pids limit cannot keep the init's Go runtime from making a
// thread it needs (it aborts when it cannot), and a command that fills the
// memory limit cannot have the OOM killer end the init (and with it every
// process and /tmp). The host places the init's first runner in them; the
// init's two process starters are the threads it moves into them (cgroup
// v1 places threads), so every later runner is born in them. cgroup v2,
// which places only whole processes, keeps the init and its limits in one
// cgroup.
const cgroupWork = "work"

// cgroupControllers are the controllers the provider uses.
var cgroupControllers = []string{"pids", "memory", "cpu"}

// cgroups is what the provider found at start.
type cgroups struct {
	kind cgroupKind
	// euid is this process's effective uid (root gets cgroups where
	// others get rlimits).
	euid int
	// root is the cgroup filesystem's mount point (cgroupRoot, or a
	// fake tree in tests).
	root string
	// v2Parent is the directory the commands' cgroups go under (v2).
	v2Parent string
	// controllers available to the commands' cgroups.
	controllers map[string]bool
	// delegate, on a delegated v2 subtree whose controllers are not yet
	// enabled for children, moves this process into cgroupCLILeaf and
	// enables them, once, the first time a command needs them.
	delegate *sync.Once
	// delegateErr is the outcome of delegate.
	delegateErr *error
	// warm is the cgroup.procs file of this process's own cgroup (v1),
	// which prewarm writes.
	warm string
}

// detectCgroups finds out which cgroup controllers this process may use.
func detectCgroups() cgroups {
	self, _ := readFile("/proc/self/cgroup")
	return detectCgroupsAt(cgroupRoot, string(self), os.Geteuid())
}

// detectCgroupsAt is detectCgroups for a cgroup tree mounted at root, the
// contents of /proc/self/cgroup and an effective uid.
func detectCgroupsAt(root, self string, euid int) cgroups {
	c := detectKind(root, self, euid)
	c.euid = euid
	return c
}

// detectKind finds the kind of cgroup support and its controllers.
func detectKind(root, self string, euid int) cgroups {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return detectV2(root, self, euid)
	}
	if euid != 0 {
		// cgroup v1 cannot be delegated safely to unprivileged users.
		return cgroups{}
	}
	c := cgroups{kind: cgroupV1, root: root, controllers: map[string]bool{}}
	for _, ctl := range cgroupControllers {
		if unix.Access(filepath.Join(root, ctl), unix.W_OK) == nil {
			c.controllers[ctl] = true
		}
	}
	if len(c.controllers) == 0 {
		return cgroups{}
	}
	for _, line := range strings.Split(self, "\n") {
		// hierarchy-id:controllers:path
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "pids") && c.controllers["pids"] {
			c.warm = filepath.Join(root, "pids", filepath.Clean("/"+f[2]), "cgroup.procs")
		}
	}
	return c
}

// prewarm starts, in the background, what makes the next move of a
// process between cgroups cheap. Such a move takes the kernel's cgroup
// threadgroup lock for writing, which first waits for an RCU grace period
// unless a writer took it within about the last one: 5 to 20 ms on a busy
// two-core host, paid on every cold command since each is a new process.
// Writing this process into the cgroup it is already in takes the lock
// without moving anything; started as a command begins, its grace period
// runs while the init is started, and the init's own move (enter) then
// shares it or follows it within the window. Only cgroup v1 is warmed.
func (c cgroups) prewarm() {
	if c.warm != "" {
		go c.warmUp()
	}
}

// warmUp is prewarm's write, done in the calling goroutine.
func (c cgroups) warmUp() {
	_ = os.WriteFile(c.warm, []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// detectV2 finds a v2 directory this process may create cgroups under:
// the root's for root; for other users their own cgroup when it is
// delegated to them (systemd-run --user --scope -p Delegate=yes): writable,
// with controllers available. Controllers already enabled for its children
// are used as they are; otherwise they are enabled on first use (see
// enableDelegated).
func detectV2(root, self string, euid int) cgroups {
	parent := ""
	if euid == 0 {
		parent = root
	} else {
		for _, line := range strings.Split(self, "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				parent = filepath.Join(root, filepath.Clean("/"+strings.TrimSpace(p)))
			}
		}
		if strings.HasSuffix(parent, "/"+cgroupCLILeaf) {
			// An earlier provider of this process moved it here.
			parent = filepath.Dir(parent)
		}
		if parent == "" || parent == root || unix.Access(parent, unix.W_OK) != nil ||
			unix.Access(filepath.Join(parent, "cgroup.procs"), unix.W_OK) != nil {
			return cgroups{}
		}
	}
	enabled := fields(filepath.Join(parent, "cgroup.subtree_control"))
	available := fields(filepath.Join(parent, "cgroup.controllers"))
	c := cgroups{kind: cgroupV2, root: root, v2Parent: parent, controllers: map[string]bool{}}
	missing := false
	for _, ctl := range cgroupControllers {
		switch {
		case enabled[ctl]:
			c.controllers[ctl] = true
		case available[ctl] && euid != 0:
			c.controllers[ctl] = true
			missing = true
		}
	}
	if len(c.controllers) == 0 {
		return cgroups{}
	}
	if missing {
		var once sync.Once
		var err error
		c.delegate, c.delegateErr = &once, &err
	}
	return c
}

// fields reads the words of a cgroup file as a set.
func fields(path string) map[string]bool {
	b, err := readFile(path)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		out[f] = true
	}
	return out
}

// enableDelegated moves this process into a leaf of its delegated cgroup
// and enables the controllers for the parent's children.
func (c cgroups) enableDelegated() error {
	if c.delegate == nil {
		return nil
	}
	c.delegate.Do(func() {
		leaf := filepath.Join(c.v2Parent, cgroupCLILeaf)
		err := os.MkdirAll(leaf, 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		}
		if err == nil {
			var ctl []string
			for _, name := range cgroupControllers {
				if c.controllers[name] {
					ctl = append(ctl, "+"+name)
				}
			}
			err = os.WriteFile(filepath.Join(c.v2Parent, "cgroup.subtree_control"), []byte(strings.Join(ctl, " ")), 0o644)
		}
		if err != nil {
			*c.delegateErr = fmt.Errorf("enable cgroup controllers in the delegated %s (it must hold no other process): %w", c.v2Parent, err)
		}
	})
	return *c.delegateErr
}

// describe says in words what the host supports, for error messages.
func (c cgroups) describe() string {
	switch c.kind {
	case cgroupV1:
		return "cgroup v1 as root"
	case cgroupV2:
		return "cgroup v2 under " + c.v2Parent
	}
	return "no cgroup this user may manage"
}

// check refuses limits the host cannot enforce.
func (c cgroups) check(res providers.Resources) error {
	var missing []string
	if res.CPUs < 0 || res.MemoryMB < 0 || res.Pids < 0 || res.DiskMB < 0 {
		return providers.Errorf(providers.ErrInvalid, Name, "create", "resource limits must be positive")
	}
	if res.CPUs > 0 && !c.controllers["cpu"] {
		missing = append(missing, "--cpus (needs the cpu cgroup controller)")
	}
	if res.MemoryMB > 0 && !c.controllers["memory"] {
		missing = append(missing, "--memory (needs the memory cgroup controller)")
	}
	if res.Pids > 0 && c.euid == 0 && !c.controllers["pids"] {
		missing = append(missing, "--pids (as root it needs the pids cgroup controller: the kernel does not apply RLIMIT_NPROC to root)")
	}
	if len(missing) == 0 {
		return nil
	}
	return providers.Errorf(providers.ErrUnsupported, Name, "create",
		"this host cannot enforce %s: it has %s; run as root, or on a cgroup v2 host inside a delegated scope (`systemd-run --user --scope -p Delegate=yes sandbox ...`); --pids always works for other users (RLIMIT_NPROC per sandbox)",
		strings.Join(missing, ", "), c.describe())
}

// cgroupSet is the cgroups of one running command or machine.
type cgroupSet struct {
	dirs []string
	// work are the machine's cgroupWork children, which hold every
	// process of the machine but its init.
	work []string
}

// enter puts pid into fresh cgroups named name with the requested limits;
// the default pids limit applies whenever the pids controller is enabled
// (root), so that a fork bomb is bounded where RLIMIT_NPROC is not. It
// returns nil when no cgroup is needed or available.
func (c cgroups) enter(pid int, name string, res providers.Resources) (*cgroupSet, error) {
	return c.prepare(name, c.limitFiles(res)).join(pid)
}

// cgroupPrep is cgroups being made (by prepare) for a process yet to
// join them.
type cgroupPrep struct {
	c     cgroups
	name  string
	files []cgroupFile
	done  chan struct{}
	set   *cgroupSet
	err   error
}

// prepare starts making the cgroups named name with the limit files files
// while the caller starts the process that joins them. Making them is
// quick (a mkdir and a write per controller, well under a millisecond
// alone) but takes the cgroup mutex, which a warming write holds through
// its RCU grace period (see prewarm): it must not hold up the start.
func (c cgroups) prepare(name string, files []cgroupFile) *cgroupPrep {
	pr := &cgroupPrep{c: c, name: name, files: files, done: make(chan struct{})}
	if len(pr.files) == 0 {
		close(pr.done)
		return pr
	}
	go func() {
		defer close(pr.done)
		if pr.err = c.enableDelegated(); pr.err == nil {
			pr.set, pr.err = c.make(name, pr.files)
		}
	}()
	return pr
}

// join moves pid into the prepared cgroups once they are made. Another
// process deleting a sandbox removes idle cgroups (see removeSandbox):
// cgroups that vanish between their making and their use (their files
// then fail with ENOENT or ENODEV) are made again.
func (pr *cgroupPrep) join(pid int) (*cgroupSet, error) {
	<-pr.done
	set, err := pr.set, pr.err
	for attempt := 0; ; attempt++ {
		if err == nil {
			if set == nil {
				return nil, nil // no cgroup needed
			}
			if err = set.add(pid); err == nil {
				return set, nil
			}
		}
		if !cgroupGone(err) || attempt == 2 {
			return nil, err
		}
		set, err = pr.c.make(pr.name, pr.files)
	}
}

// placeChild moves pid, a process the machine's init started before the
// init was in its cgroups set (made by pr), into them: into their
// cgroupWork children where they have them, which, empty until then, a
// sweep of empty cgroups (removeEmpty) may have removed meanwhile: they
// are made again.
func (pr *cgroupPrep) placeChild(set *cgroupSet, pid int) error {
	dirs := set.dirs
	if len(set.work) > 0 {
		dirs = set.work
	}
	for attempt := 0; ; attempt++ {
		err := writeProcs(dirs, pid)
		if err == nil || !cgroupGone(err) || attempt == 2 {
			return err
		}
		if _, err := pr.c.make(pr.name, pr.files); err != nil {
			return err
		}
	}
}

// limitFiles are the limit files, with their values, of a command with
// the resources res.
func (c cgroups) limitFiles(res providers.Resources) []cgroupFile {
	if c.kind == cgroupNone {
		return nil
	}
	pids := res.Pids
	if pids == 0 {
		if c.delegate != nil {
			// RLIMIT_NPROC already bounds an unprivileged sandbox.
			pids = -1
		} else {
			pids = defaultPids
		}
	}
	type file = cgroupFile
	var files []file
	if c.controllers["pids"] && pids > 0 {
		files = append(files, file{ctl: "pids", name: "pids.max", val: strconv.Itoa(pids)})
	}
	if res.MemoryMB > 0 && c.controllers["memory"] {
		bytes := strconv.FormatInt(int64(res.MemoryMB)<<20, 10)
		if c.kind == cgroupV1 {
			files = append(files, file{ctl: "memory", name: "memory.limit_in_bytes", val: bytes})
		} else {
			files = append(files, file{ctl: "memory", name: "memory.max", val: bytes}, file{ctl: "memory", name: "memory.swap.max", val: "0"})
		}
	}
	if res.CPUs > 0 && c.controllers["cpu"] {
		quota := strconv.FormatInt(int64(res.CPUs*100000), 10)
		if c.kind == cgroupV1 {
			files = append(files, file{ctl: "cpu", name: "cpu.cfs_period_us", val: "100000"}, file{ctl: "cpu", name: "cpu.cfs_quota_us", val: quota})
		} else {
			files = append(files, file{ctl: "cpu", name: "cpu.max", val: quota + " 100000"})
		}
	}
	return files
}

// machineFiles are the limit files of a sandbox's machine with the
// resources res: limitFiles, with those of pids and memory in the
// machine's cgroupWork child on cgroup v1.
func (c cgroups) machineFiles(res providers.Resources) []cgroupFile {
	files := c.limitFiles(res)
	for i, f := range files {
		files[i].work = c.workCtl(f.ctl)
	}
	return files
}

// workCtl says whether a machine's limit of controller ctl sits in its
// cgroupWork child: pids and memory, on cgroup v1.
func (c cgroups) workCtl(ctl string) bool {
	return c.kind == cgroupV1 && (ctl == "pids" || ctl == "memory")
}

// fileDir is the directory of the file f of cgroup name.
func (c cgroups) fileDir(f cgroupFile, name string) string {
	d := c.dirOf(f.ctl, name)
	if f.work {
		d = filepath.Join(d, cgroupWork)
	}
	return d
}

// limitDir is the directory of controller ctl that holds the limit of a
// sandbox's machine cgroup name: its cgroupWork child where it has one.
func (c cgroups) limitDir(ctl, name string) string {
	return c.fileDir(cgroupFile{ctl: ctl, work: c.workCtl(ctl)}, name)
}

// workFiles are the files among files of cgroup name that go in its
// cgroupWork children, their directories relative to the cgroup root (see
// initConfig.WorkCgroups).
func (c cgroups) workFiles(files []cgroupFile, name string) []cgroupPath {
	var out []cgroupPath
	for _, f := range files {
		if rel, err := filepath.Rel(c.root, c.fileDir(f, name)); f.work && err == nil {
			out = append(out, cgroupPath{Dir: rel, Name: f.name, Val: f.val})
		}
	}
	return out
}

// dirOf is the directory of cgroup name for controller ctl.
func (c cgroups) dirOf(ctl, name string) string {
	if c.kind == cgroupV1 {
		return filepath.Join(c.root, ctl, cgroupParent, name)
	}
	return filepath.Join(c.v2Parent, cgroupParent+"-"+name)
}

// dirsOf are the directories cgroup name has (or would have), one per
// controller.
func (c cgroups) dirsOf(name string) []string {
	switch c.kind {
	case cgroupV1:
		var dirs []string
		for _, ctl := range cgroupControllers {
			if c.controllers[ctl] {
				dirs = append(dirs, c.dirOf(ctl, name))
			}
		}
		return dirs
	case cgroupV2:
		return []string{c.dirOf("", name)}
	}
	return nil
}

// rename renames the cgroups of name, with the processes in them, to to
// (cgroup v1 only: v2 cannot), replacing what empty ones to has, and
// writes files in them; it returns their directories. Nothing moves, so
// nothing waits for the grace period a migration does.
func (c cgroups) rename(name, to string, files []cgroupFile) ([]string, error) {
	if c.kind == cgroupNone {
		return nil, nil
	}
	if c.kind != cgroupV1 {
		return nil, fmt.Errorf("rename cgroup %s: only cgroup v1 renames", name)
	}
	var dirs []string
	for _, ctl := range cgroupControllers {
		from := c.dirOf(ctl, name)
		if _, err := os.Stat(from); err != nil {
			continue
		}
		dest := c.dirOf(ctl, to)
		_ = rmCgroup(dest) // left by a machine that ended; never one in use (the machine lock)
		if err := os.Rename(from, dest); err != nil {
			return dirs, fmt.Errorf("rename cgroup %s: %w", from, err)
		}
		dirs = append(dirs, dest)
	}
	for _, f := range files {
		if !slices.Contains(dirs, c.dirOf(f.ctl, to)) {
			return dirs, fmt.Errorf("cgroup %s: no %s cgroup to rename", f.name, f.ctl)
		}
		if err := os.WriteFile(filepath.Join(c.fileDir(f, to), f.name), []byte(f.val), 0o644); err != nil {
			return dirs, fmt.Errorf("cgroup %s: %w", f.name, err)
		}
	}
	return dirs, nil
}

// cgroupFile is one limit to write.
type cgroupFile struct {
	ctl, name, val string
	// work puts it in the cgroupWork child (see machineFiles).
	work bool
}

// abandon removes the prepared cgroups, which no process joined.
func (pr *cgroupPrep) abandon() {
	<-pr.done
	pr.set.remove()
}

// make creates the cgroups of name (and the cgroupWork children its
// files ask for) and writes files.
func (c cgroups) make(name string, files []cgroupFile) (*cgroupSet, error) {
	set := &cgroupSet{}
	made := func(dirs *[]string, d string) error {
		if slices.Contains(*dirs, d) {
			return nil
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		*dirs = append(*dirs, d)
		return nil
	}
	for _, f := range files {
		err := made(&set.dirs, c.dirOf(f.ctl, name))
		if err == nil && f.work {
			err = made(&set.work, c.fileDir(f, name))
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(c.fileDir(f, name), f.name), []byte(f.val), 0o644)
		}
		if err != nil && !(f.name == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
			set.remove()
			return nil, fmt.Errorf("cgroup %s: %w", f.name, err)
		}
	}
	return set, nil
}

// add moves pid into the cgroups.
func (s *cgroupSet) add(pid int) error {
	if err := writeProcs(s.dirs, pid); err != nil {
		s.remove()
		return err
	}
	return nil
}

// writeProcs moves pid into the cgroups dirs.
func writeProcs(dirs []string, pid int) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("enter cgroup %s: %w", d, err)
		}
	}
	return nil
}

// cgroupGone says that err came of a cgroup that went before it was used
// (ENOENT, or ENODEV for one removed while open): a sweep of empty
// cgroups (removeEmpty, in any delete) removed it between its making and
// its first process; it is made again.
func cgroupGone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// remove deletes the cgroups. It is only used when entering them failed:
// a command's cgroups stay after it ends and are reused by the next command
// in the same slot (creating and removing cgroups on every command cost
// more than the command), until the sandbox is deleted (removeSandbox).
func (s *cgroupSet) remove() {
	if s == nil {
		return
	}
	for _, d := range s.dirs {
		rmCgroup(d)
	}
}

// rmCgroup removes the cgroup d, with its cgroupWork child if it has one.
func rmCgroup(d string) error {
	_ = unix.Rmdir(filepath.Join(d, cgroupWork))
	return unix.Rmdir(d)
}

// removeDirs removes the cgroups dirs of processes that are gone; the
// kernel may take a moment to release a cgroup: it retries briefly.
func removeDirs(dirs []string) {
	for _, d := range dirs {
		for range 50 {
			err := rmCgroup(d)
			if err == nil || !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// removeSandbox deletes the cgroups of sandbox id, whose processes are
// gone; the kernel may take a moment to release a cgroup: it retries
// briefly. It then removes every other empty one (see removeEmpty): a
// sandbox deleted while its last process was still being torn down, or
// removed by hand, left its cgroups behind.
func (c cgroups) removeSandbox(id string) {
	var mine []string
	switch c.kind {
	case cgroupV1:
		for _, ctl := range cgroupControllers {
			mine = append(mine, filepath.Join(c.root, ctl, cgroupParent, id+"-*"))
		}
	case cgroupV2:
		mine = append(mine, filepath.Join(c.v2Parent, cgroupParent+"-"+id+"-*"))
	}
	for _, p := range mine {
		dirs, _ := filepath.Glob(p)
		removeDirs(dirs)
	}
	c.removeEmpty()
}

// removeEmpty removes every empty cgroup of any sandbox: the kernel
// refuses to remove one in use, and an idle one of a live sandbox is made
// again by its next start.
func (c cgroups) removeEmpty() {
	switch c.kind {
	case cgroupV1:
		var all []string
		for _, ctl := range cgroupControllers {
			all = append(all, filepath.Join(c.root, ctl, cgroupParent, "sb-*"),
				filepath.Join(c.root, ctl, cgroupParent, "standby-*"))
		}
		removeIdle(all)
	case cgroupV2:
		removeIdle([]string{filepath.Join(c.v2Parent, cgroupParent+"-sb-*")})
	}
}

// removeIdle removes the cgroups that match patterns and hold nothing.
func removeIdle(patterns []string) {
	for _, p := range patterns {
		dirs, _ := filepath.Glob(p)
		for _, d := range dirs {
			_ = rmCgroup(d)
		}
	}
}

// oomKills is how many processes the kernel's OOM killer has ended in the
// memory cgroup dir (0 when unknown).
func oomKills(dir string) int {
	for _, name := range []string{"memory.oom_control", "memory.events"} {
		b, err := readFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
	}
	return 0
}
