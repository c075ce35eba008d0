//go:build !linux

package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

// spliceOnce has no splice(2) to use outside Linux: ENOSYS makes the
// callers copy instead.
func spliceOnce(_, _, _ int) (int64, error) {
	return 0, unix.ENOSYS
}

// GrowPipe leaves the pipe's buffer as the system sizes it.
func GrowPipe(*os.File) {}
