//go:build linux

package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostname is the sandbox's host name and the content of its /etc/hostname.
const hostname = "sandbox"

// systemDirs are the host directories that form the sandbox's base, in
// mount order. Missing ones are skipped; symlinks (merged /usr) are
// reproduced as symlinks. Nothing else of the host is visible: no /home,
// /root, /run, /sys, /mnt, /media, /srv or /boot.
var systemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "var"}

// layer is one host directory overlaid in the sandbox: Lower is the host
// path, Name the directory under / and under the sandbox's upper and work
// directories.
type layer struct {
	Name  string `json:"name"`
	Lower string `json:"lower"`
}

// link is one top-level symlink of the new root, e.g. bin -> usr/bin.
type link struct {
	Name   string
	Target string
}

// hostLayout inspects the host's system directories under root.
func hostLayout(root string) ([]layer, []link) {
	var layers []layer
	var links []link
	for _, name := range systemDirs {
		p := filepath.Join(root, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				links = append(links, link{Name: name, Target: target})
			}
		case fi.IsDir():
			layers = append(layers, layer{Name: name, Lower: p})
		}
	}
	return layers, links
}

// maxSlots bounds the number of commands that may run at the same time in
// the provider's sandboxes. Each running command (and each holder) holds
// one slot: its own set of overlay work directories (overlayfs empties its
// work directory when it mounts, so two live mounts must never share one).
//
// The slots are the provider's, not a sandbox's: a work directory holds
// nothing of a sandbox once its mount is gone, and the next mount empties
// it. So a new sandbox creates no work directories and a deleted one
// removes none, which on a file system that is slow to allocate inodes
// (ext4 without a journal skips every recently freed inode) is most of
// the disk work of a one-shot sandbox.
const maxSlots = 1024

// workPool is the directory of the slots under the provider's directory,
// and rootMount the directory each init mounts its new root on, in its own
// mount namespace; it stays empty on the host.
const (
	workPool  = ".work"
	rootMount = ".root"
)

// skelDir, under the provider's directory, is the empty lower layer of
// every sandbox's root overlay, and rootLayerName the name of that
// overlay's upper and work directories (beside the system directories',
// from which a leading dot sets it apart).
const (
	skelDir       = ".skel"
	rootLayerName = ".root"
)

// slotDir is the directory of the work directories of slot n.
func slotDir(stateDir string, n int) string {
	return filepath.Join(stateDir, workPool, strconv.Itoa(n))
}

// ensureSlot creates the work directories of slot n that are missing. With
// spread, a new slot's directory gets the top-directory flag (see
// spreadChildren), so that each work directory made in it lands in a block
// group of its own.
func ensureSlot(stateDir string, layers []layer, n int, spread bool) error {
	base := slotDir(stateDir, n)
	if spread && os.Mkdir(base, 0o700) == nil {
		spreadChildren(base)
	}
	for _, name := range append([]string{rootLayerName}, layerNames(layers)...) {
		if err := os.MkdirAll(filepath.Join(base, name), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// layerNames are the names of layers.
func layerNames(layers []layer) []string {
	names := make([]string, len(layers))
	for i, l := range layers {
		names[i] = l.Name
	}
	return names
}

// acquireSlot locks the first free slot of the provider whose directory is
// stateDir (New made its workPool), and returns its number and the lock,
// released by closing the file. spread is ensureSlot's.
func acquireSlot(stateDir string, layers []layer, spread bool) (int, *os.File, error) {
	for n := range maxSlots {
		f, err := os.OpenFile(slotDir(stateDir, n)+".lock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return 0, nil, fmt.Errorf("lock work directory: %w", err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if err := ensureSlot(stateDir, layers, n, spread); err != nil {
				f.Close()
				return 0, nil, fmt.Errorf("create work directory: %w", err)
			}
			return n, f, nil
		}
		f.Close()
		if err != unix.EWOULDBLOCK {
			return 0, nil, fmt.Errorf("lock work directory: %w", err)
		}
	}
	return 0, nil, fmt.Errorf("more than %d commands running at once", maxSlots)
}

// topDirFlag is FS_TOPDIR_FL of linux/fs.h (chattr +T).
const topDirFlag = 0x00020000

// spreadChildren asks the file system to spread the directories made in
// dir across its block groups, and reports whether it will. Only ext2, 3
// and 4 know the flag (their Orlov allocator otherwise keeps a directory's
// subdirectories in its own group); elsewhere it is refused and nothing
// changes. It matters where ext4 runs without a journal: every inode it
// allocates is found by scanning past each inode of the group freed in the
// last minutes, and a one-shot sandbox frees a few dozen (its directories,
// and the probes and work directories of its overlay mounts). Spread over
// the disk's groups, the scans stay short.
func spreadChildren(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return false
	}
	if flags&topDirFlag != 0 {
		return true
	}
	return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|topDirFlag)) == nil
}

// The price of spreading: a directory made in a block group nobody used
// lately waits for the disk to read that group's inode and block bitmaps
// (a millisecond or more where the host reclaims cold caches, as virtual
// machines' often do), and a start makes several (a work directory for
// each of its overlay mounts, see retireWork) and a create one more (the
// sandbox's directory). So a reaper, in the background after a delete or
// a stop, makes them ahead (prepareAhead): the work directories of every
// free slot fresh, and one directory that the next create renames into
// place (boxName). A start or create that finds none makes its own.

// boxName, under the provider's directory, is the directory a reaper made
// ahead for the next sandbox (see prepareAhead).
const boxName = ".box"

// makeSandboxDir makes dir, a new sandbox's directory: the one a reaper
// made ahead (boxName), renamed into place, when there is one. Its times
// are made now's first: Collect takes a directory without metadata for
// an interrupted create's once its modification time is old.
func (p *Provider) makeSandboxDir(dir string) error {
	if p.spread {
		box := filepath.Join(p.dir, boxName)
		now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
		if unix.UtimesNanoAt(unix.AT_FDCWD, box, now, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			unix.Renameat2(unix.AT_FDCWD, box, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE) == nil {
			return nil
		}
	}
	return os.Mkdir(dir, 0o700)
}

// prepareAhead makes what the next start and create would otherwise wait
// for the disk to make (a reaper runs it where directories spread): fresh
// work directories in every free slot of the provider whose directory is
// stateDir (what they held goes to trash), and the next sandbox's
// directory.
func prepareAhead(stateDir, trash string) {
	entries, _ := os.ReadDir(filepath.Join(stateDir, workPool))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n >= 0 && n < maxSlots {
			freshenSlot(stateDir, trash, n)
		}
	}
	_ = unix.Mkdir(filepath.Join(stateDir, boxName), 0o700)
}

// freshenSlot makes the work directories of slot n fresh, unless the slot
// is in use: its lock is held while that is done, so no start takes it
// meanwhile (one that tries takes another slot).
func freshenSlot(stateDir, trash string, n int) {
	base := slotDir(stateDir, n)
	lock, err := lockFile(filepath.Dir(base), filepath.Base(base)+".lock", unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		return
	}
	defer lock.Close()
	layers, _ := os.ReadDir(base)
	for _, l := range layers {
		// A layer's work directory, not one being replaced (its name
		// has a stamp after a dot, see replaceWork).
		if !l.IsDir() || strings.Contains(l.Name()[1:], ".") {
			continue
		}
		if work := filepath.Join(base, l.Name()); !freshWork(work) {
			replaceWork(work, trash)
		}
	}
}

// freshWork says whether the work directory work holds nothing a mount
// made in it (overlayfs makes work, with a volatile mount's dirty marker
// in it, and index with some options), so that the next mount may use it
// as it is.
func freshWork(work string) bool {
	var st unix.Stat_t
	for _, d := range []string{"work", "index"} {
		if unix.Lstat(work+"/"+d, &st) != unix.ENOENT {
			return false
		}
	}
	return true
}
