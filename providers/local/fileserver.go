//go:build linux

package local

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
)

// serveFile performs one file operation inside the sandbox's view and
// reports its outcome. Data flows over stdin (write, upload) and stdout
// (read, download).
func serveFile(cfg *initConfig, rep *reporter, ctl *bufio.Reader) int {
	req := cfg.File
	if req == nil {
		rep.setupFail(errors.New("file mode without a request"))
		return 125
	}
	var err error
	msg := statusMsg{Done: true}
	if req.NoFollow || req.Op == opResolve {
		// Resolved and approved paths: nothing in them is followed.
		err = serveStrict(newStrictFS(cfg), req, &msg, rep, ctl)
		return reportFile(cfg, rep, msg, err)
	}
	switch req.Op {
	case opRead:
		err = serveRead(req.Path, rep, func(p string) (*os.File, error) {
			return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		})
	case opWrite:
		err = serveWrite(req, ctl)
	case opStat:
		var fi providers.FileInfo
		fi, err = statPath(req.Path)
		msg.Info = &fi
	case opList:
		msg.Infos, err = listDir(req.Path, req.Depth)
	case opMkdir:
		err = mkdirAll(req.Path)
	case opRemove:
		err = removePath(req.Path, req.Recursive)
	case opRename:
		err = os.Rename(req.Path, req.To)
	case opUpload:
		err = serveUpload(req.Path, ctl, func(dst string) (*os.Root, error) {
			if err := mkdirAll(dst); err != nil {
				return nil, err
			}
			return os.OpenRoot(dst)
		})
	case opDownload:
		err = serveDownload(req.Path, rep)
	case opGrep:
		msg.Matches, err = grep(req.Grep)
	default:
		err = fmt.Errorf("unknown file operation %q: %w", req.Op, fs.ErrInvalid)
	}
	return reportFile(cfg, rep, msg, err)
}

// reportFile sends the outcome of a file operation and returns the init's
// exit status.
func reportFile(cfg *initConfig, rep *reporter, msg statusMsg, err error) int {
	if cfg.Weak {
		weakUnmap(cfg, &msg, err)
	}
	if err != nil {
		rep.fail(err)
		return 1
	}
	rep.send(msg)
	return 0
}

// copyBuf is the size of the buffers that move file data.
const copyBuf = 256 << 10

// serveRead streams a regular file to stdout after reporting that it
// opened; open opens it read-only and non-blocking: opening a FIFO must not
// wait for a writer.
func serveRead(p string, rep *reporter, open func(string) (*os.File, error)) error {
	// Only regular files are read (a device such as /dev/zero never ends).
	f, err := open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &os.PathError{Op: "read", Path: p, Err: syscall.EISDIR}
	}
	if !fi.Mode().IsRegular() {
		return &os.PathError{Op: "read", Path: p, Err: errNotRegular}
	}
	rep.send(statusMsg{Open: true})
	if out, err := os.Stdout.Stat(); err == nil && out.Mode().IsRegular() {
		// A host file (DownloadFile): copied in the kernel.
		return sendAll(int(os.Stdout.Fd()), int(f.Fd()), nil)
	}
	_, err = io.CopyBuffer(os.Stdout, f, make([]byte, copyBuf))
	return err
}

// sendChunk is how much sendAll copies between two looks at abort: a
// cancelled upload stops within one chunk's copy.
const sendChunk = 16 << 20

// sendAll copies the file in to out, from their offsets, until in ends, or
// until abort (when not nil) says to stop, which returns errAborted.
func sendAll(out, in int, abort func() bool) error {
	for {
		if abort != nil && abort() {
			return errAborted
		}
		n, err := unix.Sendfile(out, in, nil, sendChunk)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return err
		case n == 0:
			return nil
		}
	}
}

// errNotRegular refuses to read a FIFO, device or socket.
var errNotRegular = fmt.Errorf("not a regular file: %w", fs.ErrInvalid)

// committed waits for the host's verdict on the input stream.
func committed(ctl *bufio.Reader) bool {
	b, err := ctl.ReadByte()
	return err == nil && b == commitByte
}

// aborted says whether the host closed the control pipe fd, which it does
// during a direct write only to abort it (see fileRequest.Direct).
func aborted(fd int) bool { return pollNow(fd) != 0 }

// errAborted says that the host did not confirm the input stream.
var errAborted = errors.New("input stream aborted: nothing was written")

// tempName returns a hidden sibling name for an atomic write. It is a
// fixed prefix and random hex, 29 bytes whatever the target: deriving it
// from the target's name pushed names of 234 bytes and more over NAME_MAX
// (255), so they could not be written. The argument is ignored.
func tempName(string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return ".sandbox-tmp-" + hex.EncodeToString(b[:])
}

// serveWrite replaces p with stdin through a temporary file and a rename,
// creating missing parents; an aborted stream leaves nothing behind.
func serveWrite(req *fileRequest, ctl *bufio.Reader) error {
	p, mode := req.Path, req.Mode
	if mode == 0 {
		mode = 0o644
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return &os.PathError{Op: "write", Path: p, Err: syscall.EISDIR}
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, tempName(filepath.Base(p)))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return err
	}
	err = fillTemp(f, req)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && (req.Direct && aborted(ctlFD) || !req.Direct && !committed(ctl)) {
		err = errAborted
	}
	if err == nil {
		// The mode given wins over the umask.
		err = os.Chmod(tmp, mode.Perm())
	}
	if err == nil && req.MTime != 0 {
		t := time.Unix(0, req.MTime)
		err = os.Chtimes(tmp, t, t)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// fillTemp copies the input of the write req into its temporary file f:
// a host file (UploadFile, req.Direct) in the kernel, stopping early once
// the host aborts; else the input stream.
func fillTemp(f *os.File, req *fileRequest) error {
	if req.Direct {
		return sendAll(int(f.Fd()), 0, func() bool { return aborted(ctlFD) })
	}
	return copyStdin(f)
}

// copyStdin copies the input stream of a write into f.
func copyStdin(f *os.File) error {
	_, err := io.CopyBuffer(f, os.Stdin, make([]byte, copyBuf))
	return err
}

// fileInfo converts an Lstat result for the sandbox path p.
func fileInfo(p string, fi fs.FileInfo) providers.FileInfo {
	out := providers.FileInfo{Path: p, Name: path.Base(p), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime().UTC()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		out.Target, _ = os.Readlink(p)
	}
	return out
}

// statPath describes p without following a final symlink.
func statPath(p string) (providers.FileInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return providers.FileInfo{}, err
	}
	return fileInfo(p, fi), nil
}

// listDir lists dir to the given depth (at least 1), sorted by path,
// without descending into symlinks.
func listDir(dir string, depth int) ([]providers.FileInfo, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &os.PathError{Op: "list", Path: dir, Err: syscall.ENOTDIR}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return listRoot(r, dir, depth)
}

// listRoot lists the tree of r, shown as dir, to the given depth (at
// least 1), sorted by path, without descending into symlinks; parts that
// cannot be read or vanished meanwhile are left out.
func listRoot(r *os.Root, dir string, depth int) ([]providers.FileInfo, error) {
	if depth < 1 {
		depth = 1
	}
	var out []providers.FileInfo
	var walk func(rel string, level int) error
	walk = func(rel string, level int) error {
		entries, err := readDirIn(r, rel)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := path.Join(rel, e.Name())
			info, err := e.Info()
			if err != nil {
				continue // vanished meanwhile
			}
			out = append(out, rootInfo(r, name, path.Join(dir, name), info))
			if info.IsDir() && level < depth {
				if err := walk(name, level+1); err != nil && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(".", 1); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b providers.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// mkdirAll is mkdir -p; an existing non-directory is reported as such.
func mkdirAll(p string) error {
	err := os.MkdirAll(p, 0o755)
	if errors.Is(err, syscall.ENOTDIR) {
		if fi, serr := os.Stat(p); serr == nil && !fi.IsDir() {
			return &os.PathError{Op: "mkdir", Path: p, Err: syscall.EEXIST}
		}
	}
	return err
}

// removePath deletes p; a directory only when recursive is set (an empty
// one too, so that the flag alone decides).
func removePath(p string, recursive bool) error {
	if p == "/" {
		return &os.PathError{Op: "remove", Path: p, Err: syscall.EINVAL}
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return os.Remove(p)
	}
	if !recursive {
		return fmt.Errorf("%s is a directory: remove it recursively: %w", p, syscall.EISDIR)
	}
	return os.RemoveAll(p)
}

// serveUpload extracts the tar stream on stdin under dst, each regular file
// through a temporary name and a rename, never leaving dst: every path is
// resolved through the os.Root that openRoot creates (when missing) and
// opens on dst.
func serveUpload(dst string, ctl *bufio.Reader, openRoot func(string) (*os.Root, error)) error {
	root, err := openRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	// Straight from the pipe, unbuffered: file contents are spliced from
	// it into their files.
	tr := archive.NewReader(context.Background(), os.Stdin)
	buf := make([]byte, copyBuf)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if err := extract(root, name, hdr, tr, buf); err != nil {
			return fmt.Errorf("extract %s: %w", path.Join(dst, name), err)
		}
	}
	// Drain what follows the archive's end so that the host's copy ends.
	_, _ = io.Copy(io.Discard, os.Stdin)
	if !committed(ctl) {
		return errAborted
	}
	return nil
}

// errBadEntry rejects archive entries that would leave the destination.
var errBadEntry = errors.New("archive entry escapes the destination")

// entryName validates and cleans the name of a tar entry: relative, no ".."
// component, no NUL. "." stands for the destination itself.
func entryName(name string) (string, error) {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("archive entry %q: empty or NUL in name: %w", name, fs.ErrInvalid)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("archive entry %q: absolute name: %w", name, errBadEntry)
	}
	for part := range strings.SplitSeq(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("archive entry %q: parent reference: %w", name, errBadEntry)
		}
	}
	return path.Clean(name), nil
}

// extract creates one entry beneath root.
func extract(root *os.Root, name string, hdr *tar.Header, r *archive.Reader, buf []byte) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	perm := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
		if perm != 0 {
			return root.Chmod(name, perm|0o700)
		}
		return nil
	case tar.TypeReg, tar.TypeRegA:
		if fi, err := root.Lstat(name); err == nil && fi.IsDir() {
			return syscall.EISDIR
		}
		tmp := path.Join(path.Dir(name), tempName(path.Base(name)))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = r.BodyTo(context.Background(), f, hdr, buf, nil)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = root.Chmod(tmp, perm)
		}
		if err == nil && !hdr.ModTime.IsZero() {
			err = root.Chtimes(tmp, hdr.ModTime, hdr.ModTime)
		}
		if err == nil {
			err = root.Rename(tmp, name)
		}
		if err != nil {
			_ = root.Remove(tmp)
		}
		return err
	case tar.TypeSymlink:
		if err := removeIfNotDir(root, name); err != nil {
			return err
		}
		return root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return err
		}
		if err := removeIfNotDir(root, name); err != nil {
			return err
		}
		return root.Link(target, name)
	}
	// Devices, FIFOs and the like are not recreated.
	return nil
}

// removeIfNotDir clears the way for a link at name.
func removeIfNotDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		return syscall.EISDIR
	}
	return root.Remove(name)
}

// serveDownload writes a tar stream of src to stdout: a directory's
// contents relative to it, or one entry named by a file's base name.
// Symlinks are archived as symlinks, never followed below src.
func serveDownload(src string, rep *reporter) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	return writeArchive(rep, func(tw *archive.Writer, buf []byte) error {
		if !fi.IsDir() {
			return addEntry(tw, src, path.Base(src), fi, buf)
		}
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == src {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel := strings.TrimPrefix(p, strings.TrimSuffix(src, "/")+"/")
			return addEntry(tw, p, rel, info, buf)
		})
	})
}

// writeArchive reports that a download opened and streams the tar archive
// that add writes to stdout.
func writeArchive(rep *reporter, add func(tw *archive.Writer, buf []byte) error) error {
	rep.send(statusMsg{Open: true})
	// Straight into the pipe to the host, file contents spliced.
	tw := archive.NewWriter(os.Stdout)
	if err := add(tw, make([]byte, copyBuf)); err != nil {
		return err
	}
	return tw.Close()
}

// addEntry archives the path p.
func addEntry(tw *archive.Writer, p, name string, fi fs.FileInfo, buf []byte) error {
	return addEntryFrom(tw, name, fi, buf,
		func() (string, error) { return os.Readlink(p) },
		func() (*os.File, error) { return os.Open(p) })
}

// addEntryFrom archives one path, described by fi, as name: readlink
// reads a symlink's target, open opens a regular file.
func addEntryFrom(tw *archive.Writer, name string, fi fs.FileInfo, buf []byte, readlink func() (string, error), open func() (*os.File, error)) error {
	var target string
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if target, err = readlink(); err != nil {
			return err
		}
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
		return nil // sockets, devices, FIFOs
	}
	hdr, err := tar.FileInfoHeader(fi, target)
	if err != nil {
		return err
	}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	if !fi.Mode().IsRegular() {
		return tw.WriteHeader(hdr)
	}
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = tw.BodyFrom(context.Background(), f, hdr.Size, buf)
	return err
}

// defaultMaxMatches bounds a search when the request does not.
const defaultMaxMatches = 1000

// maxLineLen bounds the text of one reported match.
const maxLineLen = 4096

// grep searches regular text files under req.Path.
func grep(req *providers.GrepRequest) ([]providers.GrepMatch, error) {
	re, max, err := grepPattern(req)
	if err != nil {
		return nil, err
	}
	root := req.Path
	if root == "" {
		root = providers.DefaultWorkdir
	}
	if _, err := os.Stat(root); err != nil {
		return nil, err
	}
	g := newGrepSearch(req, root, re, max)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		return g.visit(p, d, err, func() (*os.File, error) { return os.Open(p) })
	})
	return g.result(err)
}

// grepSearch is one search of a tree: what it looks for and what it
// found so far.
type grepSearch struct {
	root, glob string
	re         *regexp.Regexp
	max        int
	scan       []byte
	matches    []providers.GrepMatch
}

// errEnoughMatches ends a search's walk once it found its maximum.
var errEnoughMatches = errors.New("enough matches")

func newGrepSearch(req *providers.GrepRequest, root string, re *regexp.Regexp, max int) *grepSearch {
	return &grepSearch{root: root, glob: req.Glob, re: re, max: max, scan: make([]byte, 64<<10), matches: []providers.GrepMatch{}}
}

// visit is one step of the walk, at path p (open opens it): it skips
// what grep -s skips (unreadable parts, /proc, /dev, /sys, what is not a
// regular file or does not match the glob) and searches the rest.
func (g *grepSearch) visit(p string, d fs.DirEntry, err error, open func() (*os.File, error)) error {
	if err != nil {
		if p == g.root {
			return err
		}
		return nil
	}
	if d.IsDir() {
		if p != g.root && (p == "/proc" || p == "/dev" || p == "/sys") {
			return fs.SkipDir
		}
		return nil
	}
	if !d.Type().IsRegular() || g.glob != "" && !globMatch(g.glob, g.root, p) {
		return nil
	}
	g.matches = grepFile(p, open, g.re, g.matches, g.max, g.scan)
	if len(g.matches) >= g.max {
		return errEnoughMatches
	}
	return nil
}

// result is the outcome of a walk that ended with err.
func (g *grepSearch) result(err error) ([]providers.GrepMatch, error) {
	if err != nil && err != errEnoughMatches {
		return nil, err
	}
	return g.matches, nil
}

// globMatch matches a glob against the base name, or against the path
// relative to the search root when the glob holds a slash.
func globMatch(glob, root, p string) bool {
	name := path.Base(p)
	if strings.Contains(glob, "/") {
		name = strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
	}
	ok, _ := doublestar.Match(glob, name)
	return ok
}

// grepFile appends the matching lines of one file, p, that open opens;
// files with a NUL byte in their first block are binary and skipped.
func grepFile(p string, open func() (*os.File, error), re *regexp.Regexp, matches []providers.GrepMatch, max int, buf []byte) []providers.GrepMatch {
	f, err := open()
	if err != nil {
		return matches
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, len(buf))
	head, _ := br.Peek(8 << 10)
	if bytes.IndexByte(head, 0) >= 0 {
		return matches
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(buf, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !re.Match(line) {
			continue
		}
		if len(line) > maxLineLen {
			line = line[:maxLineLen]
		}
		matches = append(matches, providers.GrepMatch{Path: p, Line: n, Text: string(line)})
		if len(matches) >= max {
			break
		}
	}
	return matches
}
