package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

// spliceOnce moves up to n bytes between the descriptors src and dst, one
// of which is a pipe, without copying them through user space.
func spliceOnce(src, dst, n int) (int64, error) {
	return unix.Splice(src, nil, dst, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_MORE)
}

// GrowPipe gives the pipe whose end is f a buffer of PipeSize bytes, where
// the kernel allows it.
func GrowPipe(f *os.File) {
	_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, PipeSize)
}
