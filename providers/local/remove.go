package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

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
