package archive

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// node is one path found while walking a tree through an *os.Root.
type node struct {
	// rel is the name the path gets in an archive or manifest.
	rel string
	// full is the path relative to the root.
	full string
	info fs.FileInfo
	// target is the link target of a symlink.
	target string
}

// walk visits name and, when it is a directory, everything beneath it in
// packing order: a directory before its contents, and within a directory
// subdirectories first, then the rest, each group by name. A file or
// symlink named directly is visited once under its base name; a directory
// named directly is not visited itself, only its contents. Symlinks are
// reported, never followed.
func walk(ctx context.Context, root *os.Root, name string, visit func(node) error) error {
	name, err := rootName(name)
	if err != nil {
		return err
	}
	fi, err := root.Lstat(name)
	if err != nil {
		return fmt.Errorf("stat %s: %w", name, wrapNotExist(err))
	}
	if !fi.IsDir() {
		n := node{rel: path.Base(name), full: name, info: fi}
		if name == "." {
			n.rel = "."
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if n.target, err = root.Readlink(name); err != nil {
				return fmt.Errorf("readlink %s: %w", name, err)
			}
		}
		return visit(n)
	}
	return walkDir(ctx, root, name, "", visit)
}

// walkDir visits the contents of the directory full, naming them below rel.
func walkDir(ctx context.Context, root *os.Root, full, rel string, visit func(node) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := root.Open(full)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", full, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("read directory %s: %w", full, err)
	}
	nodes := make([]node, 0, len(names))
	for _, n := range names {
		p := path.Join(full, n)
		// Lstat through the root rather than trusting the directory
		// entry, so a path swapped for a symlink is seen as one.
		fi, err := root.Lstat(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue // removed while we walked
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		nd := node{rel: path.Join(rel, n), full: p, info: fi}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if nd.target, err = root.Readlink(p); err != nil {
				return fmt.Errorf("readlink %s: %w", p, err)
			}
		}
		nodes = append(nodes, nd)
	}
	sortEntries(nodes, func(n node) string { return n.rel }, func(n node) bool { return n.info.IsDir() })
	for _, n := range nodes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := visit(n); err != nil {
			return err
		}
		if n.info.IsDir() {
			if err := walkDir(ctx, root, n.full, n.rel, visit); err != nil {
				return err
			}
		}
	}
	return nil
}

// pack writes a tar stream of name, a path inside root, to tw, and closes
// it.
//
// A file or symlink yields one entry named by its base name, or by as
// when as is not empty (a file landing under another name, as in
// `upload ./a.txt /workspace/b.txt`). A directory yields its contents with
// names relative to it, each directory before its contents,
// subdirectories before files, and each group sorted by name, so the same
// tree always packs to the same entry order. Symlinks are written as
// symlink entries and never followed; sockets and devices are skipped.
// File contents are streamed, and a cancelled ctx stops the copy promptly.
func pack(ctx context.Context, tw *Writer, root *os.Root, name, as string) error {
	if as != "" {
		if clean, err := entryName(as); err != nil || clean != as || strings.Contains(as, "/") {
			return fmt.Errorf("archive entry name %q must be a single path element: %w", as, providers.ErrInvalid)
		}
		if fi, err := root.Lstat(name); err == nil && fi.IsDir() {
			return fmt.Errorf("%s is a directory and cannot be packed as %q: %w", name, as, providers.ErrInvalid)
		}
	}
	buf := make([]byte, 1<<20)
	err := walk(ctx, root, name, func(n node) error {
		if as != "" {
			n.rel = as
		}
		return packNode(ctx, tw, root, n, buf)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish archive: %w", err)
	}
	return nil
}

// packNode writes one header and, for a regular file, its contents.
func packNode(ctx context.Context, tw *Writer, root *os.Root, n node, buf []byte) error {
	mode := n.info.Mode()
	hdr := &tar.Header{
		Name:    n.rel,
		Mode:    tarMode(mode),
		ModTime: n.info.ModTime().Truncate(time.Second),
	}
	switch {
	case mode.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, n.rel+"/"
		return writeHeader(tw, hdr)
	case mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, n.target
		return writeHeader(tw, hdr)
	case mode.IsRegular():
		return packFile(ctx, tw, root, n, hdr, buf)
	default:
		return nil // sockets, pipes and devices have no place in an archive
	}
}

// packFile streams one regular file into tw.
func packFile(ctx context.Context, tw *Writer, root *os.Root, n node, hdr *tar.Header, buf []byte) error {
	f, err := root.Open(n.full)
	if err != nil {
		return fmt.Errorf("open %s: %w", n.full, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", n.full, err)
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, n.info) {
		return fmt.Errorf("%s changed while it was being packed", n.full)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	if err := writeHeader(tw, hdr); err != nil {
		return err
	}
	copied, err := tw.BodyFrom(ctx, f, hdr.Size, buf)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pack %s: %d of %d bytes: %w", n.full, copied, hdr.Size, err)
	}
	return nil
}

// headerWriter is a tar.Writer or a Writer.
type headerWriter interface{ WriteHeader(*tar.Header) error }

func writeHeader(tw headerWriter, hdr *tar.Header) error {
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write archive header for %s: %w", hdr.Name, err)
	}
	return nil
}

// Stream is a tar stream that a goroutine packs into an OS pipe (see
// PackPipe). A provider that extracts it in another process can hand that
// process the pipe itself (File) and learn from Wait whether the stream
// was complete; any other reader simply reads it.
type Stream struct {
	f    *os.File
	done chan struct{}
	err  error
}

// PackPipe packs name, a path inside root, into a new pipe from a goroutine and
// returns its read end. progress, when set, is told of the file contents
// entering the pipe as they do (from the packing goroutine). The caller
// must Close the stream; it may then Wait for the packing to end.
func PackPipe(ctx context.Context, root *os.Root, name, as string, progress func(n int64)) (*Stream, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	GrowPipe(w)
	s := &Stream{f: r, done: make(chan struct{})}
	go func() {
		tw := NewWriter(w)
		tw.Progress = progress
		s.err = pack(ctx, tw, root, name, as)
		w.Close()
		close(s.done)
	}()
	return s, nil
}

// Read reads the stream. Where it ends early because the packing failed,
// Read returns that error instead of io.EOF.
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.f.Read(p)
	if err == io.EOF {
		<-s.done
		if s.err != nil {
			return n, s.err
		}
	}
	return n, err
}

// File is the read end of the pipe. It stays the stream's: Close closes it.
func (s *Stream) File() *os.File { return s.f }

// Wait waits for the packing to end and returns its error.
func (s *Stream) Wait() error {
	<-s.done
	return s.err
}

// Close closes the read end; a packing still under way then fails.
func (s *Stream) Close() error { return s.f.Close() }
