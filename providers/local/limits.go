package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// Resource limits. Every command gets rlimits; where the host lets this
// process manage cgroups (root on cgroup v1 or v2, or a delegated cgroup v2
// subtree) the command's init is also placed in a cgroup of its own:
//
//   - pids: RLIMIT_NPROC always. Since Linux 5.14 the count is kept per user
//     namespace, and every command has its own, so the limit bounds the
//     sandbox and not the user's other processes. The kernel never applies
//     it to the host's root user, so for root the pids cgroup does the work.
//   - memory: a cgroup limit where available; otherwise RLIMIT_DATA bounds
//     each process (not their sum). The tmpfs mounts (/tmp, /dev/shm, /run)
//     have sizes, so they cannot eat the host's memory either.
//   - disk: RLIMIT_FSIZE caps one file at half the free space of the
//     filesystem holding the sandbox (measured when the command starts);
//     the writable layer and workspace share the host's disk and have no
//     quota of their own.
//   - cpu: a cgroup quota, only where cgroups are available.

// Defaults when the sandbox asks for nothing.
const (
	defaultPids = 1024
	// defaultDataShare is the share of the host's memory one process
	// may use when no cgroup bounds the sandbox as a whole.
	defaultDataShare = 0.75
	// runTmpfsSize is the size of /run.
	runTmpfsSize = 64 << 20
)

// limits travel to the init with its configuration: rlimits for the
// command and the sizes of its tmpfs mounts. Zero means unlimited (or the
// kernel's default size).
type limits struct {
	NProc    uint64 `json:"nproc,omitempty"`
	Data     uint64 `json:"data,omitempty"`
	FSize    uint64 `json:"fsize,omitempty"`
	TmpSize  uint64 `json:"tmp_size,omitempty"`
	ShmSize  uint64 `json:"shm_size,omitempty"`
	RunSize  uint64 `json:"run_size,omitempty"`
	NoCores  bool   `json:"no_cores,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
}

// hostMemory is the host's physical memory in bytes (0 if unknown).
func hostMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

// limitsFor computes the limits of one command in the sandbox whose state
// lives in dir. cgroupMemory says that a cgroup bounds the memory of the
// whole sandbox, so no per-process limit is needed.
func limitsFor(dir string, res providers.Resources, cgroupMemory bool) limits {
	l := limits{NProc: defaultPids, NoCores: true, RunSize: runTmpfsSize}
	if res.Pids > 0 {
		l.NProc = uint64(res.Pids)
	}
	mem := hostMemory()
	if res.MemoryMB > 0 {
		mem = uint64(res.MemoryMB) << 20
		l.TmpSize = mem / 2
		l.ShmSize = mem / 4
	} else if mem > 0 {
		l.TmpSize = mem / 4
		l.ShmSize = mem / 8
	}
	if !cgroupMemory && mem > 0 {
		if res.MemoryMB > 0 {
			l.Data = mem
		} else {
			l.Data = uint64(float64(mem) * defaultDataShare)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil {
		if free := st.Bavail * uint64(st.Bsize); free > 0 {
			l.FSize = free / 2
		}
	}
	return l
}

// tmpfsOpts adds a size to the options of a tmpfs mount.
func tmpfsOpts(opts string, size uint64) string {
	if size == 0 {
		return opts
	}
	return opts + ",size=" + strconv.FormatUint(size, 10)
}

// applyResourceLimits sets the rlimits the command inherits. It runs in the
// init after the sandbox is built, so the init's own setup is never limited.
func applyResourceLimits(cfg *initConfig) error {
	l := cfg.Limits
	if l.Disabled {
		return nil
	}
	set := []struct {
		res  int
		val  uint64
		name string
	}{
		{unix.RLIMIT_NPROC, l.NProc, "processes"},
		{unix.RLIMIT_DATA, l.Data, "memory"},
		{unix.RLIMIT_FSIZE, l.FSize, "file size"},
	}
	if l.NoCores {
		set = append(set, struct {
			res  int
			val  uint64
			name string
		}{unix.RLIMIT_CORE, 0, "core dumps"})
	}
	for _, s := range set {
		if s.val == 0 && s.res != unix.RLIMIT_CORE {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(s.res, &cur); err != nil {
			return fmt.Errorf("limit %s: %w", s.name, err)
		}
		v := s.val
		if cur.Max != unix.RLIM_INFINITY && cur.Max < v {
			v = cur.Max // never raise what the host already limits
		}
		if err := unix.Setrlimit(s.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("limit %s: %w", s.name, err)
		}
	}
	return nil
}

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

// cgroupParent is the directory, per controller on v1, under which each
// running command gets its own cgroup.
const cgroupParent = "sandbox"

// cgroups is what the provider found at start: the kind and, on v2, the
// parent directory of the commands' cgroups.
type cgroups struct {
	kind cgroupKind
	// v2Parent is the delegated directory the commands' cgroups go
	// under (v2 only).
	v2Parent string
	// controllers available: "pids", "memory", "cpu".
	controllers map[string]bool
}

// detectCgroups finds out which cgroup controllers this process may use.
func detectCgroups() cgroups {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return detectV2()
	}
	if os.Geteuid() != 0 {
		// cgroup v1 cannot be delegated safely to unprivileged users.
		return cgroups{}
	}
	c := cgroups{kind: cgroupV1, controllers: map[string]bool{}}
	for _, ctl := range []string{"pids", "memory", "cpu"} {
		if unix.Access(filepath.Join(cgroupRoot, ctl), unix.W_OK) == nil {
			c.controllers[ctl] = true
		}
	}
	if len(c.controllers) == 0 {
		return cgroups{}
	}
	return c
}

// detectV2 finds a v2 directory this process may create cgroups under:
// the root's for root, or the process's own cgroup when it is delegated
// (systemd-run --user --scope -p Delegate=yes). Controllers must be
// enabled for the children of that directory; a delegated directory with
// processes in it cannot enable them (no internal processes), so only
// ones that already have them count.
func detectV2() cgroups {
	parent := ""
	if os.Geteuid() == 0 {
		parent = cgroupRoot
	} else {
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			return cgroups{}
		}
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				parent = filepath.Join(cgroupRoot, filepath.Clean("/"+p))
			}
		}
		if parent == "" || unix.Access(parent, unix.W_OK) != nil {
			return cgroups{}
		}
	}
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return cgroups{}
	}
	c := cgroups{kind: cgroupV2, v2Parent: parent, controllers: map[string]bool{}}
	for _, ctl := range strings.Fields(string(b)) {
		if ctl == "pids" || ctl == "memory" || ctl == "cpu" {
			c.controllers[ctl] = true
		}
	}
	if len(c.controllers) == 0 {
		return cgroups{}
	}
	return c
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
	if res.CPUs < 0 || res.MemoryMB < 0 || res.Pids < 0 {
		return providers.Errorf(providers.ErrInvalid, Name, "create", "resource limits must be positive")
	}
	if res.CPUs > 0 && !c.controllers["cpu"] {
		missing = append(missing, "--cpus (needs the cpu cgroup controller)")
	}
	if res.MemoryMB > 0 && !c.controllers["memory"] {
		missing = append(missing, "--memory (needs the memory cgroup controller)")
	}
	if res.Pids > 0 && os.Geteuid() == 0 && !c.controllers["pids"] {
		missing = append(missing, "--pids (as root it needs the pids cgroup controller: the kernel does not apply RLIMIT_NPROC to root)")
	}
	if len(missing) == 0 {
		return nil
	}
	return providers.Errorf(providers.ErrUnsupported, Name, "create",
		"this host cannot enforce %s: it has %s; run as root, or on a cgroup v2 host inside a delegated scope (`systemd-run --user --scope -p Delegate=yes sandbox ...`); --pids always works for other users (RLIMIT_NPROC per sandbox)",
		strings.Join(missing, ", "), c.describe())
}

// cgroupSet is the cgroups of one running command.
type cgroupSet struct {
	dirs []string
}

// enter puts pid into fresh cgroups named name with the requested limits;
// the default pids limit applies whenever the pids controller is there.
// It returns nil when the host has no cgroups for this process.
func (c cgroups) enter(pid int, name string, res providers.Resources) (*cgroupSet, error) {
	if c.kind == cgroupNone {
		return nil, nil
	}
	pids := res.Pids
	if pids == 0 {
		pids = defaultPids
	}
	type file struct{ ctl, name, val string }
	var files []file
	if c.controllers["pids"] {
		files = append(files, file{"pids", "pids.max", strconv.Itoa(pids)})
	}
	if res.MemoryMB > 0 && c.controllers["memory"] {
		bytes := strconv.FormatInt(int64(res.MemoryMB)<<20, 10)
		if c.kind == cgroupV1 {
			files = append(files, file{"memory", "memory.limit_in_bytes", bytes})
		} else {
			files = append(files, file{"memory", "memory.max", bytes}, file{"memory", "memory.swap.max", "0"})
		}
	}
	if res.CPUs > 0 && c.controllers["cpu"] {
		quota := strconv.FormatInt(int64(res.CPUs*100000), 10)
		if c.kind == cgroupV1 {
			files = append(files, file{"cpu", "cpu.cfs_period_us", "100000"}, file{"cpu", "cpu.cfs_quota_us", quota})
		} else {
			files = append(files, file{"cpu", "cpu.max", quota + " 100000"})
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	set := &cgroupSet{}
	dirOf := func(ctl string) (string, error) {
		var d string
		if c.kind == cgroupV1 {
			d = filepath.Join(cgroupRoot, ctl, cgroupParent, name)
		} else {
			d = filepath.Join(c.v2Parent, cgroupParent+"-"+name)
		}
		for _, have := range set.dirs {
			if have == d {
				return d, nil
			}
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		set.dirs = append(set.dirs, d)
		return d, nil
	}
	for _, f := range files {
		d, err := dirOf(f.ctl)
		if err == nil {
			err = os.WriteFile(filepath.Join(d, f.name), []byte(f.val), 0o644)
		}
		if err != nil && !(f.name == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
			set.remove()
			return nil, fmt.Errorf("cgroup %s: %w", f.name, err)
		}
	}
	for _, d := range set.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			set.remove()
			return nil, fmt.Errorf("enter cgroup %s: %w", d, err)
		}
	}
	return set, nil
}

// remove deletes the cgroups once their processes are gone; the kernel
// may still be tearing the PID namespace down, so it retries briefly and
// leaves an emptied cgroup behind rather than block (the next command
// with the same name reuses it).
func (s *cgroupSet) remove() {
	if s == nil {
		return
	}
	for _, d := range s.dirs {
		for i := 0; i < 50; i++ {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
