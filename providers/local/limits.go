//go:build linux

package local

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// Resource limits. Every command gets rlimits; where the host lets this
// process manage cgroups (root on cgroup v1 or v2, or a delegated cgroup v2
// subtree) the sandbox's machine is also placed in cgroups of its own,
// before it starts any process, so that every process of the sandbox is
// born inside them and the limits bound them together. On cgroup v1 the
// pids and memory limits sit on a child of the machine's cgroups that
// holds every process but the init (see cgroupWork), so that what fills
// them cannot end the machine. The rlimits and tmpfs sizes below are
// computed in fillConfig, once per machine start or weak-mode operation:
//
//   - pids: RLIMIT_NPROC always. Since Linux 5.14 the count is kept per user
//     namespace, and every command has its own, so the limit bounds the
//     sandbox and not the user's other processes. The kernel never applies
//     it to the host's root user, so for root the pids cgroup does the work.
//   - memory: a cgroup limit for the whole sandbox with --memory where
//     available. Always a soft RLIMIT_DATA of ¾ of the host's memory per
//     process: it stops a runaway program, but its hard limit stays open,
//     because sanitizer builds (ASAN reserves terabytes of shadow memory)
//     must be able to lift it; the kernel's OOM killer remains the backstop
//     without a cgroup. The tmpfs mounts (/tmp, /dev/shm, /run) have sizes,
//     so they cannot eat the host's memory either.
//   - disk: a quota for the whole sandbox (--disk, 10 GiB by default),
//     which the machine's init keeps by accounting (see disk.go), and
//     RLIMIT_FSIZE capping one file at half the free space of the
//     filesystem holding the sandbox (measured when its machine starts).
//   - cpu: a cgroup quota, only where cgroups are available.

// Defaults when the sandbox asks for nothing.
const (
	defaultPids = 1024
	// machinePidsAllowance is added to the pids limit for the machine's
	// own tasks in it (spare and busy runners, their threads: Go programs
	// of about ten threads each; where the init is in it too, its
	// threads), so that --pids N leaves the sandbox's commands about N.
	machinePidsAllowance = 64
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
	NProc uint64
	Data  uint64
	// DataSoft leaves the hard RLIMIT_DATA as it is (see above).
	DataSoft bool
	FSize    uint64
	TmpSize  uint64
	ShmSize  uint64
	RunSize  uint64
	NoCores  bool
	// Disk is the sandbox's disk quota and DiskReserve the free space
	// of the state directory's file system it may not take, in bytes;
	// the machine's init enforces both (see watchDisk).
	Disk        uint64
	DiskReserve uint64
}

// defaultMemoryDivisor: a sandbox that asks for no memory limit gets
// the host's memory divided by this, where a memory cgroup can bound the
// sandbox as a whole. The cgroup is charged for its tmpfs pages too, so
// /tmp (a quarter of the host's memory) and /dev/shm (an eighth) fit
// inside it, and no sandbox can pin more than half of the host.
const defaultMemoryDivisor = 2

// effectiveResources are the limits a sandbox runs with: what it asked
// for, and the defaults of what it did not where this host enforces them
// (the pids limit always, as a cgroup or RLIMIT_NPROC; memory where a
// memory cgroup is available).
func (p *Provider) effectiveResources(res providers.Resources) providers.Resources {
	if res.Pids == 0 {
		res.Pids = defaultPids
	}
	if res.MemoryMB == 0 && !p.weak && p.cg.controllers["memory"] {
		res.MemoryMB = int(hostMemory() / defaultMemoryDivisor >> 20)
	}
	if res.DiskMB == 0 && !p.weak {
		res.DiskMB = defaultDiskMB
	}
	return res
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
	l := limits{NProc: defaultPids + machinePidsAllowance, NoCores: true, RunSize: runTmpfsSize}
	if res.Pids > 0 {
		l.NProc = uint64(res.Pids + machinePidsAllowance)
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
			l.DataSoft = true
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
	type rlimit struct {
		res  int
		val  uint64
		name string
		soft bool
	}
	set := []rlimit{
		{unix.RLIMIT_NPROC, l.NProc, "processes", false},
		{unix.RLIMIT_DATA, l.Data, "memory", l.DataSoft},
		{unix.RLIMIT_FSIZE, l.FSize, "file size", false},
	}
	if l.NoCores {
		set = append(set, rlimit{unix.RLIMIT_CORE, 0, "core dumps", false})
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
		lim := unix.Rlimit{Cur: v, Max: v}
		if s.soft {
			lim.Max = cur.Max
		}
		if err := unix.Setrlimit(s.res, &lim); err != nil {
			return fmt.Errorf("limit %s: %w", s.name, err)
		}
	}
	return nil
}

// isolation completes cfg with what the isolation adds for one command:
// the secret masks, the limits, and the weak mode's settings.
func (p *Provider) isolation(cfg *initConfig, dir string, slot int) {
	if _, shadow := p.etcBaseDir(); shadow {
		// Root sees the sanitized shadow files of the base layer
		// (see etcBase), which useradd and package scripts rewrite.
		cfg.Masks = withoutShadow(p.masks)
	} else {
		cfg.Masks = append(slices.Clone(maskedFiles), p.masks...)
	}
	cfg.Limits = limitsFor(dir, cfg.Resources, cfg.Resources.MemoryMB > 0 && p.cg.controllers["memory"])
	if !p.weak {
		cfg.Limits.Disk = uint64(p.effectiveResources(cfg.Resources).DiskMB) << 20
		cfg.Limits.DiskReserve = uint64(p.reserve())
	}
	if p.weak {
		cfg.Weak = true
		cfg.WeakHidden = []string{"/var/tmp"}
		for _, d := range []string{p.stateDir, p.dir} {
			if real, err := filepath.EvalSymlinks(d); err == nil {
				cfg.WeakHidden = append(cfg.WeakHidden, real)
			}
		}
		cfg.TmpSrc = filepath.Join(dir, "tmp", strconv.Itoa(slot))
		if cfg.Resources.Pids == 0 {
			// Without a user namespace RLIMIT_NPROC counts all of
			// the user's processes: only set it when asked to.
			cfg.Limits.NProc = 0
		}
	}
}
