//go:build linux

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

// The disk quota. A sandbox's files (its layers, its workspace and HOME,
// the logs of its background commands) share the file system of the state
// directory with the host, which has no project quotas to give each its
// own. So the machine's init keeps the account: it watches the file
// system's free space and, when that fell by a step or a while passed,
// walks the sandbox's directory and adds up what its files take. When the
// sandbox reaches its quota, or the file system's free space falls to the
// reserve kept for everyone (the registry, the audit log, other
// sandboxes), the cut-off begins: every process of the sandbox gets a soft
// RLIMIT_FSIZE of zero, so a write that would store a byte more fails
// ("File too large"; the default action of the SIGXFSZ it raises ends the
// process) while reading, deleting and truncating go on. It ends once
// deletions brought the sandbox back under. A process that lifts its soft
// limit and goes on writing is the sandbox refusing the cut-off: past a
// grace the machine is stopped, its files kept.
const (
	// defaultDiskMB is the quota of a sandbox that asks for none.
	defaultDiskMB = 10 << 10
	// defaultDiskReserve is the free space of the state directory's file
	// system that sandboxes may not take: this much, or a twentieth of
	// a smaller file system.
	defaultDiskReserve = 256 << 20
	// diskGrace is how much a sandbox may write past the cut-off before
	// its machine is stopped.
	diskGrace = 64 << 20
	// diskTick is how often the init looks at the free space: a write
	// runs past the quota by at most what it writes in about this long.
	diskTick = 100 * time.Millisecond
	// diskStep and diskInodeStep are how much the file system's free
	// space and free inodes may fall before the init adds up the
	// sandbox's files again; diskRewalk bounds the time between two
	// walks whatever happens, and diskOverRewalk while over the quota.
	diskStep       = 32 << 20
	diskInodeStep  = 4096
	diskRewalk     = 30 * time.Second
	diskOverRewalk = 500 * time.Millisecond
	// diskBlock is the least a file is charged: an empty file or a
	// symlink costs an inode and a directory entry all the same.
	diskBlock = 4096
)

// Files the init leaves in the sandbox's directory for the host:
// diskOverFile while the cut-off lasts, diskStoppedFile when it stopped
// the machine. Each holds one sentence for TakeNote.
const (
	diskOverFile    = "disk.over"
	diskStoppedFile = "disk.stopped"
)

// diskQuota is what the init enforces, in bytes.
type diskQuota struct {
	limit   int64 // what the sandbox's files may take
	reserve int64 // the free space kept for everyone else
	grace   int64 // what may be written past the cut-off
}

// diskVerdict is the state of a sandbox against its quota.
type diskVerdict int

const (
	diskUnder diskVerdict = iota // writes go on
	diskOver                     // the cut-off
	diskStop                     // the cut-off was defied: stop the machine
)

// judgeDisk compares usage, what the sandbox's files take, with what it
// may take: its quota, and no more than leaves the reserve free. free is
// the file system's free space; cut is the usage when the cut-off began
// (over says whether it did).
func judgeDisk(q diskQuota, usage, free int64, over bool, cut int64) diskVerdict {
	allowed := min(q.limit, usage+free-q.reserve)
	switch {
	case usage < allowed:
		return diskUnder
	case over && usage > cut+q.grace:
		return diskStop
	}
	return diskOver
}

// diskUsage adds up what the files under dir take: their allocated blocks,
// at least diskBlock each, a file of several names once.
func diskUsage(dir *os.File) (int64, error) {
	seen := map[[2]uint64]bool{}
	var total int64
	var walk func(fd int, depth int) error
	walk = func(fd int, depth int) error {
		if depth > 4096 {
			return errors.New("directories nested too deep")
		}
		d := os.NewFile(uintptr(fd), "dir")
		defer d.Close()
		for {
			names, err := d.Readdirnames(512)
			for _, name := range names {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					continue // gone meanwhile
				}
				if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
					key := [2]uint64{uint64(st.Dev), st.Ino}
					if seen[key] {
						continue
					}
					seen[key] = true
				}
				total += max(st.Blocks*512, diskBlock)
				if st.Mode&unix.S_IFMT != unix.S_IFDIR {
					continue
				}
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue // gone, or replaced by a non-directory
				}
				if err := walk(sub, depth+1); err != nil {
					return err
				}
			}
			if err != nil {
				return nil // io.EOF, or the directory went away
			}
		}
	}
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	return total, walk(fd, 0)
}

// diskWatch is the init's account of its sandbox's disk.
type diskWatch struct {
	q      diskQuota
	usage  int64
	cut    int64 // usage when the cut-off began
	walked time.Time
	// free and files are the most free bytes and inodes seen since the
	// last walk: the file system is the host's, and what other processes
	// free meanwhile (a reaper emptying the trash) must not hide what
	// the sandbox writes.
	free  uint64
	files uint64
}

// due says whether the watch walks the sandbox's files again now, the
// file system having free bytes and inodes free: a walk is due when there
// was none, one is old, or the free space fell by a step from the most
// seen since the last walk.
func (w *diskWatch) due(now time.Time, free, files uint64, over bool) bool {
	w.free, w.files = max(w.free, free), max(w.files, files)
	return w.walked.IsZero() || now.Sub(w.walked) >= diskRewalk ||
		free+diskStep <= w.free || files+diskInodeStep <= w.files ||
		(over && now.Sub(w.walked) >= diskOverRewalk)
}

// watchDisk keeps the quota q until the machine is done.
func (m *machine) watchDisk(q diskQuota) {
	w := &diskWatch{q: q}
	t := time.NewTicker(diskTick)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		var st unix.Statfs_t
		if unix.Fstatfs(int(m.dir.Fd()), &st) != nil {
			continue
		}
		free, files := st.Bavail*uint64(st.Bsize), st.Ffree
		now := time.Now()
		over := m.diskOver.Load()
		if w.due(now, free, files, over) {
			usage, err := diskUsage(m.dir)
			if err != nil {
				continue
			}
			w.usage, w.walked, w.free, w.files = usage, now, free, files
		}
		switch judgeDisk(q, w.usage, int64(free), over, w.cut) {
		case diskUnder:
			if over {
				m.diskOver.Store(false)
				_ = unix.Unlinkat(int(m.dir.Fd()), diskOverFile, 0)
				m.confineFiles(false)
			}
		case diskOver:
			if !over {
				w.cut = w.usage
				m.diskOver.Store(true)
				m.writeDiskNote(diskOverFile, w.usage, int64(free))
			}
			// Again at every tick: runners started meanwhile, and
			// processes that lifted their limit.
			m.confineFiles(true)
		case diskStop:
			m.writeDiskNote(diskStoppedFile, w.usage, int64(free))
			_ = unix.Unlinkat(int(m.dir.Fd()), diskOverFile, 0)
			if m.retire(true) {
				m.shutdown(stopGrace)
			}
			m.finish()
			return
		}
	}
}

// writeDiskNote leaves the sentence TakeNote says about the quota in the
// file name of the sandbox's directory.
func (m *machine) writeDiskNote(name string, usage, free int64) {
	q := m.cfg.Limits
	var b strings.Builder
	switch name {
	case diskOverFile:
		fmt.Fprintf(&b, "is over its disk quota: its files take %s", mib(usage))
	default:
		fmt.Fprintf(&b, "was stopped: its commands went on writing after it reached its disk quota, and its files take %s", mib(usage))
	}
	if int64(q.Disk) <= usage {
		fmt.Fprintf(&b, " of the %s it may use", mib(int64(q.Disk)))
	}
	if free <= int64(q.DiskReserve) {
		fmt.Fprintf(&b, ", and the host's disk has only %s free", mib(free))
	}
	b.WriteString("; writing files fails (\"File too large\") until files are deleted (or make a sandbox with a larger --disk)")
	f, err := openAt(m.dir, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return
	}
	_, _ = f.WriteString(b.String())
	f.Close()
}

// mib formats a size in MiB.
func mib(n int64) string {
	return strconv.FormatInt(n>>20, 10) + " MiB"
}

// confineFiles gives every process of the sandbox but the init a soft
// RLIMIT_FSIZE of zero (on), or its hard limit back (off).
func (m *machine) confineFiles(on bool) {
	for _, pid := range procPIDs() {
		if pid != 1 {
			confineFilesOf(pid, on)
		}
	}
}

// confineFilesOf sets the soft RLIMIT_FSIZE of one process (see
// confineFiles); a process that ended meanwhile is no error.
func confineFilesOf(pid int, on bool) {
	var lim unix.Rlimit
	if unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &lim) != nil {
		return
	}
	want := lim.Max
	if on {
		want = 0
	}
	if lim.Cur != want {
		lim.Cur = want
		_ = unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil)
	}
}

// diskNote is what the init left for the host about the sandbox in dir's
// quota: why it stopped its machine (taken once), else that the cut-off
// lasts.
func diskNote(dir string) string {
	stopped := filepath.Join(dir, diskStoppedFile)
	if b, err := readFile(stopped); err == nil {
		_ = os.Remove(stopped)
		return string(b)
	}
	if b, err := readFile(filepath.Join(dir, diskOverFile)); err == nil {
		return string(b)
	}
	return ""
}

// reserve is the free space of the state directory's file system that
// sandboxes may not take (see defaultDiskReserve).
func (p *Provider) reserve() int64 {
	if p.diskReserve != 0 {
		return p.diskReserve
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p.dir, &st); err != nil {
		return defaultDiskReserve
	}
	return min(defaultDiskReserve, int64(st.Blocks)*st.Bsize/20)
}

// checkHostDisk refuses a new sandbox when the state directory's file
// system has no more than the reserve free.
func (p *Provider) checkHostDisk() error {
	var st unix.Statfs_t
	if err := unix.Statfs(p.dir, &st); err != nil {
		return nil
	}
	if free, reserve := int64(st.Bavail)*st.Bsize, p.reserve(); free <= reserve {
		return providers.Errorf(providers.ErrQuota, Name, "create",
			"the disk of the state directory %s has %s free, no more than the %s kept for the registry, the audit log and the sandboxes' own writes; free some space (sandbox gc, sandbox delete) first", p.dir, mib(free), mib(reserve))
	}
	return nil
}
