//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// removeTree removes dir and everything beneath it without following
// symlinks. Overlay work directories made inside a user namespace can hold
// directories with mode 000 that an unprivileged owner cannot list; when the
// plain removal fails, removeTree makes every directory it owns traversable
// (through O_NOFOLLOW descriptors, never through a path that could be a
// link) and tries again.
func removeTree(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	unlockDirs(dir)
	return os.RemoveAll(dir)
}

// unlockDirs gives the owner rwx on dir and every directory under it.
func unlockDirs(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// Maybe not even readable: fix the mode through an O_PATH handle.
		pfd, perr := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if perr != nil {
			return
		}
		_ = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(pfd), 0o700, 0)
		_ = unix.Close(pfd)
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
	} else {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&0o700 != 0o700 {
			_ = unix.Fchmod(fd, 0o700)
		}
	}
	f := os.NewFile(uintptr(fd), dir)
	entries, _ := f.ReadDir(-1)
	_ = f.Close()
	for _, e := range entries {
		if e.IsDir() { // ReadDir reports the entry's own type: a link is never a dir
			unlockDirs(filepath.Join(dir, e.Name()))
		}
	}
}

// trashDir, under the provider's directory, holds the trees of deleted
// sandboxes until a reaper has removed them.
const trashDir = ".trash"

// reapArgv0 is the marker that turns the binary into a reaper: a detached
// process that empties the trash (see MaybeRunInit).
const reapArgv0 = "sandbox-local-reap"

// reapSpread, a reaper's second argument, says that the provider's
// directories spread (see spreadChildren): the reaper then prepares what
// the next start and create need (see prepareAhead).
const reapSpread = "spread"

// discard removes the sandbox tree dir without making the caller wait for
// it: the tree is renamed into the trash (one rename on the same
// filesystem) and a detached reaper removes it, so a delete costs the
// caller a rename, not one unlink or rmdir per entry (about 0.2 ms per
// directory on a journalled disk). Were the rename to fail, the tree is
// removed in place. A reaper that dies leaves its trash to the next one.
func (p *Provider) discard(dir, id string) error {
	trash := filepath.Join(p.dir, trashDir)
	if err := os.Mkdir(trash, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return removeTree(dir)
	}
	if err := os.Rename(dir, filepath.Join(trash, id+"."+strconv.FormatInt(time.Now().UnixNano(), 36))); err != nil {
		return removeTree(dir)
	}
	// Started beside the rest of the caller's work: starting a process
	// holds the starting thread until it has executed (~1 ms). Close
	// waits for it.
	p.bg.wg.Go(func() { p.startReaper(trash) })
	return nil
}

// reaperNice is a reaper's nice value: the lowest priority but idle
// (which a busy host could starve).
const reaperNice = 19

// startReaper starts a reaper for trash unless one is at work: a reaper
// holds the trash lock while it removes and lists the trash again after
// releasing it, so an entry renamed in while the lock was held is seen.
func (p *Provider) startReaper(trash string) {
	// Whatever this provider's inits put in the trash until now is
	// there to be seen by the reaper started here or the one at work.
	p.trashed.Store(false)
	lock, err := os.OpenFile(filepath.Join(trash, trashLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	// The lock taken here goes to the reaper (reaperLockFD), which holds
	// it from its start: WaitReaped after Close (which waits for this
	// function) cannot find the trash unlocked before the reaper's
	// work began.
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	args := []string{reapArgv0, trash}
	if p.spread {
		args = append(args, reapSpread)
	}
	cmd := &exec.Cmd{
		Path:       p.exe,
		Args:       args,
		Env:        []string{},
		ExtraFiles: []*os.File{lock},
		// Its own session: a Ctrl-C at the terminal is not for it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	// An unprivileged user's sandboxes that map subordinate ids hold
	// files of those ids, which the user may not remove: the reaper
	// then works in a user namespace of the same mapping, where it may.
	mapped := p.uid != 0 && p.host().uids.ranged() && p.host().uids.tool != ""
	if mapped {
		cmd.SysProcAttr.Cloneflags = unix.CLONE_NEWUSER
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER}
	}
	if err := cmd.Start(); err != nil {
		return // the next delete starts one
	}
	// Background work from its first instruction: its start (a
	// process of this binary) and its removals yield the CPUs to the
	// foreground, often this caller's next command.
	_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, reaperNice)
	if mapped {
		// On failure the reaper, unmapped, removes what the user may.
		_ = writeIDMaps(cmd.Process.Pid, p.host().uids, p.host().gids)
	}
	// A long-lived caller (the TUI, serve) reaps it; a short one exits
	// first and leaves it to the system.
	go func() { _ = cmd.Wait() }()
}

// WaitReaped waits until no reaper works on the provider's trash, or ctx
// ends: a test (or a server shutting down) that removes the whole state
// directory calls it after Close, so that a reaper does not write in it
// meanwhile.
func (p *Provider) WaitReaped(ctx context.Context) error {
	lock, err := os.OpenFile(filepath.Join(p.dir, trashDir, trashLock), os.O_RDWR, 0)
	if err != nil {
		return nil // no trash, no reaper
	}
	defer lock.Close()
	for unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// trashLock is the lock file a reaper holds while it works.
const trashLock = ".lock"

// reaperLockFD is the descriptor of the trash lock in a reaper, locked
// by the process that started it (see startReaper).
const reaperLockFD = 3

// runReaper empties the trash directory; it returns the exit code. lock
// is the trash lock, already held (nil: it is opened and taken here);
// spread says that the provider's directories spread (see prepareAhead).
func runReaper(trash string, lock *os.File, spread bool) int {
	// Background work: it yields the CPU to whatever runs in the
	// foreground (its starter set this already, see startReaper).
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, reaperNice)
	awaitIDMap()
	if lock == nil {
		var err error
		lock, err = os.OpenFile(filepath.Join(trash, trashLock), os.O_RDWR, 0)
		if err != nil {
			return 1
		}
	}
	defer lock.Close()
	tried := map[string]bool{}
	for pass := 0; ; pass++ {
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			return 1
		}
		if pass == 0 && spread {
			// First what the next start or create would wait for.
			prepareAhead(filepath.Dir(trash), trash)
		}
		for _, name := range trashEntries(trash) {
			// One try per tree: one that cannot be removed now is
			// left to the next reaper.
			if tried[name] {
				continue
			}
			tried[name] = true
			_ = removeTree(filepath.Join(trash, name))
		}
		_ = unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		fresh := false
		for _, name := range trashEntries(trash) {
			fresh = fresh || !tried[name]
		}
		if !fresh {
			return 0
		}
	}
}

// awaitIDMap waits, for a reaper started in a user namespace of its own
// (see startReaper), until the host has written its mappings, or a while:
// both of them, as its capabilities reach a file only when the file's
// owner and group are both mapped (newuidmap runs before newgidmap, and a
// reaper that went on between the two could remove nothing of the
// subordinate ids).
func awaitIDMap() {
	deadline := time.Now().Add(idToolTimeout)
	for _, f := range []string{"/proc/self/uid_map", "/proc/self/gid_map"} {
		for time.Now().Before(deadline) {
			b, err := readFile(f)
			if err != nil || len(bytes.TrimSpace(b)) > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// trashEntries lists the trees waiting in the trash.
func trashEntries(trash string) []string {
	entries, _ := os.ReadDir(trash)
	var out []string
	for _, e := range entries {
		if e.Name() != trashLock {
			out = append(out, e.Name())
		}
	}
	return out
}
