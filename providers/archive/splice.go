package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// The bodies of regular files move between a file and an OS pipe with
// splice(2) when one side of the tar stream is a pipe: the kernel hands the
// pages over and no byte passes through this process. The tar framing
// (headers, padding) still goes through archive/tar: a Writer lets the
// tar.Writer account for a body it never sees, and a Reader lets the
// tar.Reader skip a body that was already taken from the pipe.

// spliceChunk is the most one splice call moves into a pipe: the size the
// pipes of a transfer are given. Out of a pipe into a file a call moves at
// most drainChunk: the pipe stays locked while its pages are copied into
// the file, and shorter holds keep the writer from spinning on the lock
// (on a two-vCPU VM that spinning slowed the copy on the sibling by a
// third).
const (
	spliceChunk = 1 << 20
	drainChunk  = 128 << 10
)

// PipeSize is the capacity a transfer's pipe should have (F_SETPIPE_SZ):
// one splice chunk.
const PipeSize = spliceChunk

// isPipe reports whether f is a pipe (or FIFO).
func isPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&fs.ModeNamedPipe != 0
}

// Writer writes a tar stream like tar.Writer; BodyFrom writes a regular
// file's contents, spliced from the file when the stream is a pipe.
type Writer struct {
	tw *tar.Writer
	sw *swallowWriter
	// pipe is the stream when it is an OS pipe.
	pipe *os.File
	// Progress, when set, is called with the number of body bytes each
	// time some are written.
	Progress func(n int64)
	zeros    []byte
}

// NewWriter returns a Writer of a tar stream to w.
func NewWriter(w io.Writer) *Writer {
	sw := &swallowWriter{w: w}
	tw := &Writer{tw: tar.NewWriter(sw), sw: sw}
	if f, ok := w.(*os.File); ok && isPipe(f) {
		tw.pipe = f
	}
	return tw
}

// WriteHeader starts the next entry.
func (w *Writer) WriteHeader(hdr *tar.Header) error { return w.tw.WriteHeader(hdr) }

// Close ends the archive; it does not close the underlying writer.
func (w *Writer) Close() error { return w.tw.Close() }

// BodyFrom writes the body of the entry just started, size bytes read from
// f (positioned at the start of the data). A cancelled ctx stops it between
// chunks.
func (w *Writer) BodyFrom(ctx context.Context, f *os.File, size int64, buf []byte) (int64, error) {
	if w.pipe == nil || size == 0 {
		return w.copyBody(ctx, f, size, buf)
	}
	n, err := spliceOut(ctx, f, w.pipe, size, w.Progress)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A file system without splice: copy the rest through buf,
		// straight to the pipe (the tar.Writer is told below).
		var m int64
		m, err = io.CopyBuffer(struct{ io.Writer }{w.pipe}, io.LimitReader(ctxReader{ctx, f}, size-n), buf)
		w.progress(m)
		n += m
	}
	if err != nil {
		return n, err
	}
	if n != size {
		return n, io.ErrUnexpectedEOF
	}
	// The tar.Writer counts the body it is given: give it size bytes that
	// the swallowWriter drops, so its framing stays right.
	if w.zeros == nil {
		w.zeros = make([]byte, 256<<10)
	}
	w.sw.swallow = size
	for left := size; left > 0; {
		k := min(left, int64(len(w.zeros)))
		if _, err := w.tw.Write(w.zeros[:k]); err != nil {
			return n, err
		}
		left -= k
	}
	return n, nil
}

// copyBody writes the body through the tar.Writer.
func (w *Writer) copyBody(ctx context.Context, f *os.File, size int64, buf []byte) (int64, error) {
	n, err := io.CopyBuffer(progressWriter{w.tw, w.progress}, io.LimitReader(ctxReader{ctx, f}, size), buf)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (w *Writer) progress(n int64) {
	if w.Progress != nil && n > 0 {
		w.Progress(n)
	}
}

// swallowWriter passes writes on, except for the next swallow bytes.
type swallowWriter struct {
	w       io.Writer
	swallow int64
}

func (s *swallowWriter) Write(p []byte) (int, error) {
	k := min(int64(len(p)), s.swallow)
	s.swallow -= k
	if int(k) == len(p) {
		return len(p), nil
	}
	n, err := s.w.Write(p[k:])
	return int(k) + n, err
}

// progressWriter reports what it writes.
type progressWriter struct {
	w  io.Writer
	fn func(int64)
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.fn(int64(n))
	return n, err
}

// Reader reads a tar stream like tar.Reader; BodyTo moves the current
// regular file's body into a file, spliced from the stream when it is a
// pipe.
type Reader struct {
	*tar.Reader
	cr *creditReader
	// pipe is the stream when it is an OS pipe.
	pipe *os.File
}

// NewReader returns a Reader of the tar stream r. Reads stop with ctx's
// error once it is done.
func NewReader(ctx context.Context, r io.Reader) *Reader {
	cr := &creditReader{r: ctxReader{ctx, r}}
	rd := &Reader{Reader: tar.NewReader(cr), cr: cr}
	if f, ok := r.(*os.File); ok && isPipe(f) {
		rd.pipe = f
	}
	return rd
}

// BodyTo writes the body of the entry hdr that Next just returned to f and
// returns its length; progress, when set, is told of each part written.
// Only a plain regular file's body is spliced: any other entry (a sparse
// file, whose size is not the number of bytes in the stream) is copied.
func (r *Reader) BodyTo(ctx context.Context, f *os.File, hdr *tar.Header, buf []byte, progress func(int64)) (int64, error) {
	if progress == nil {
		progress = func(int64) {}
	}
	if r.pipe == nil || hdr.Size == 0 || hdr.Typeflag != tar.TypeReg || checkSparse(hdr) != nil {
		return io.CopyBuffer(progressWriter{struct{ io.Writer }{f}, progress}, r.Reader, buf)
	}
	n, err := spliceIn(ctx, r.pipe, f, hdr.Size, progress)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// The target's file system cannot splice: copy the rest.
		var m int64
		m, err = io.CopyBuffer(progressWriter{struct{ io.Writer }{f}, progress}, io.LimitReader(ctxReader{ctx, r.pipe}, hdr.Size-n), buf)
		n += m
		if err == nil && n != hdr.Size {
			err = io.ErrUnexpectedEOF
		}
	}
	// What was taken from the pipe is the tar.Reader's to skip.
	r.cr.credit += n
	return n, err
}

// creditReader serves the first credit bytes without reading: they were
// taken from the stream already, and whoever reads them (the tar.Reader
// skipping a body) discards them.
type creditReader struct {
	r      io.Reader
	credit int64
}

func (c *creditReader) Read(p []byte) (int, error) {
	if c.credit > 0 {
		k := min(int64(len(p)), c.credit)
		c.credit -= k
		return int(k), nil
	}
	return c.r.Read(p)
}

// spliceOut moves n bytes from the file src to the pipe dst.
func spliceOut(ctx context.Context, src, dst *os.File, n int64, progress func(int64)) (int64, error) {
	return splice(ctx, dst, src, n, true, progress)
}

// spliceIn moves n bytes from the pipe src to the file dst.
func spliceIn(ctx context.Context, src, dst *os.File, n int64, progress func(int64)) (int64, error) {
	return splice(ctx, src, dst, n, false, progress)
}

// splice moves n bytes between a pipe and a file: into the pipe when out,
// out of it otherwise. The pipe may be non-blocking (registered with the
// runtime's poller): the move then waits for room, or for data, there.
func splice(ctx context.Context, pipe, file *os.File, n int64, out bool, progress func(int64)) (int64, error) {
	prc, err := pipe.SyscallConn()
	if err != nil {
		return 0, err
	}
	frc, err := file.SyscallConn()
	if err != nil {
		return 0, err
	}
	var done int64
	var serr error
	cerr := frc.Control(func(ffd uintptr) {
		move := func(pfd uintptr) bool {
			src, dst := int(ffd), int(pfd)
			if !out {
				src, dst = dst, src
			}
			chunk := int64(spliceChunk)
			if !out {
				chunk = drainChunk
			}
			for done < n {
				if serr = ctx.Err(); serr != nil {
					return true
				}
				k, err := spliceOnce(src, dst, int(min(n-done, chunk)))
				switch {
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN:
					return false // wait for room in the pipe, or data
				case err != nil:
					serr = err
					return true
				case k == 0:
					// The file shrank, or the stream ended inside a body.
					serr = io.ErrUnexpectedEOF
					return true
				}
				done += k
				if progress != nil {
					progress(k)
				}
			}
			return true
		}
		var perr error
		if out {
			perr = prc.Write(move)
		} else {
			perr = prc.Read(move)
		}
		if serr == nil {
			serr = perr
		}
	})
	if serr == nil {
		serr = cerr
	}
	if serr != nil && !errors.Is(serr, ctx.Err()) {
		serr = fmt.Errorf("splice: %w", serr)
	}
	return done, serr
}
