//go:build linux

package local

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// readFile is os.ReadFile without an os.File: opening one sets it up for
// the runtime's poller, which for a regular or /proc file is five more
// system calls (flags read and set twice, a refused epoll registration)
// beside open, fstat, read and close. Every operation reads a few such
// files on its way (the sandbox's record, its init's, /proc/PID/stat and
// status).
func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return readFD(fd, path)
}

// readFD reads the open file fd (named name in errors) to its end, and
// closes it. The buffer starts at the size the file states (a /proc
// file's is 0) and a little more, so that a regular file takes one read
// and the one that finds its end.
func readFD(fd int, name string) ([]byte, error) {
	defer unix.Close(fd)
	size := 2048
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil && st.Size > 0 && st.Size < 1<<30 {
		size = int(st.Size) + 512
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
