//go:build linux

package local

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
)

// The approval gate decides a file operation on the path as it resolves in
// the sandbox (providers.PathResolver), and then runs it on that resolved
// path with providers.WithNoFollow. Here, inside the sandbox, both halves:
// resolvePath finds where a path leads, and strictFS performs an
// operation without following any symlink, every check and open one step
// (openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH, then *at calls on the
// descriptors it returned), so that a process of the sandbox swapping a
// directory for a symlink after the decision makes the operation fail
// instead of leading it elsewhere. Trees (list, upload, download, grep, a
// recursive remove) are walked through an os.Root opened on the approved
// directory, which never leaves it.

// maxLinks bounds the symlinks one resolution follows, as the kernel's
// MAXSYMLINKS does.
const maxLinks = 40

// errSymlinkInPath is the failure of an operation that met a symlink where
// the approved path had none.
var errSymlinkInPath = fmt.Errorf("a symlink is in the path, which changed after it was resolved and approved: %w", syscall.ELOOP)

// strictFS opens the resolved paths of a file operation. In the weak mode
// the paths are the host's, and anchors are the host directories standing
// in for the sandbox's (workspace, home, temporary directory): the host's
// path to them is trusted and followed, only what lies below is checked.
type strictFS struct {
	// anchors pairs each host directory as configured with its canonical
	// path (symlinks resolved), which resolution meets.
	anchors [][2]string
}

// newStrictFS returns the strictFS of cfg's sandbox.
func newStrictFS(cfg *initConfig) strictFS {
	var s strictFS
	if !cfg.Weak {
		return s
	}
	for _, a := range []string{cfg.Workspace, cfg.HomeSrc, cfg.TmpSrc} {
		if a == "" {
			continue
		}
		a = filepath.Clean(a)
		canon, err := filepath.EvalSymlinks(a)
		if err != nil {
			canon = a
		}
		s.anchors = append(s.anchors, [2]string{a, canon})
	}
	return s
}

// split returns the directory that p is opened from (the longest anchor
// holding it, else "/") and the rest of p, relative to it ("." for itself).
func (s strictFS) split(p string) (string, string) {
	best := "/"
	for _, a := range s.anchors {
		if (p == a[0] || strings.HasPrefix(p, a[0]+"/")) && len(a[0]) > len(best) {
			best = a[0]
		}
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, best), "/")
	if rel == "" {
		rel = "."
	}
	return best, rel
}

// resolvePath returns p with every symlink resolved, as `realpath -m`
// does: the existing part component by component, a link's target
// relative to the directory holding the link, the missing part appended.
// It is only the basis of a decision; the operation that follows checks
// again, in one step, that the path holds no symlink.
func (s strictFS) resolvePath(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", &os.PathError{Op: "resolve", Path: p, Err: fs.ErrInvalid}
	}
	todo := components(p)
	cur := "/"
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			// Missing: the rest is appended as it is (a later ".."
			// may climb back to what exists).
			cur = next
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", &os.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(components(target), todo...)
	}
	best := -1
	for i, a := range s.anchors {
		if (cur == a[1] || strings.HasPrefix(cur, a[1]+"/")) && (best < 0 || len(a[1]) > len(s.anchors[best][1])) {
			best = i
		}
	}
	if best >= 0 {
		a := s.anchors[best]
		return a[0] + strings.TrimPrefix(cur, a[1]), nil
	}
	return cur, nil
}

// components splits a path into its names, without empty ones and ".".
func components(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// strictErr names p in an error of opening it, explaining a symlink.
func strictErr(op, p string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		err = errSymlinkInPath
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

// openBeneath opens rel beneath the directory dirfd, following no symlink
// and never leaving it: openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH,
// or, on kernels without it, one openat with O_NOFOLLOW per component.
func openBeneath(dirfd int, rel string, flags int, perm uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(perm)
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case (err == unix.EINTR || err == unix.EAGAIN) && tries < 16:
			continue
		case err == unix.ENOSYS, err == unix.EPERM && !openat2Works():
			return openWalk(dirfd, rel, flags, perm)
		}
		return -1, err
	}
}

// openat2Works tells a real EPERM of openat2 from a kernel or a filter
// without it (old container runtimes answer EPERM): opening a missing
// name fails with ENOENT where openat2 works.
func openat2Works() bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, "/\x01sandbox-no-such-name", &how)
	if err == nil {
		unix.Close(fd)
	}
	return err == nil || err == unix.ENOENT
}

// openWalk is openBeneath without openat2.
func openWalk(dirfd int, rel string, flags int, perm uint32) (int, error) {
	parts := components(rel)
	if len(parts) == 0 {
		parts = []string{"."}
	}
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for i, c := range parts {
		if c == ".." {
			return -1, unix.EXDEV
		}
		fl, pm := unix.O_PATH|unix.O_DIRECTORY, uint32(0)
		if i == len(parts)-1 {
			fl, pm = flags, perm
		}
		fd, err := unix.Openat(cur, c, fl|unix.O_NOFOLLOW|unix.O_CLOEXEC, pm)
		if err == unix.ENOTDIR || err == unix.ELOOP || err == nil && fl&unix.O_PATH != 0 && isLink(fd) {
			var st unix.Stat_t
			if unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if err == nil {
					unix.Close(fd)
				}
				err = unix.ELOOP
			}
		}
		if err != nil {
			return -1, err
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur = fd
	}
	fd := cur
	cur = dirfd
	return fd, nil
}

// isLink reports whether fd (opened with O_PATH|O_NOFOLLOW) is a symlink.
func isLink(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// kind is the file type (unix.S_IFDIR, S_IFREG, …) of the resolved path
// p, reached without following any symlink.
func (s strictFS) kind(p string) (uint32, error) {
	fd, err := s.open(p, unix.O_PATH, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return st.Mode & unix.S_IFMT, nil
}

// open opens the resolved path p without following any symlink.
func (s strictFS) open(p string, flags int, perm uint32) (int, error) {
	anchor, rel := s.split(p)
	afd, err := unix.Open(anchor, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: anchor, Err: err}
	}
	defer unix.Close(afd)
	fd, err := openBeneath(afd, rel, flags, perm)
	if err != nil {
		return -1, strictErr("open", p, err)
	}
	return fd, nil
}

// openFile is open as an *os.File.
func (s strictFS) openFile(p string, flags int, perm uint32) (*os.File, error) {
	fd, err := s.open(p, flags, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// root opens the directory p as an os.Root: opened first without
// following symlinks, then as an os.Root through its descriptor's entry in
// /proc (or, where that cannot be opened, by name again), and refused
// unless both are the same directory: its device and inode identify it.
func (s strictFS) root(p string) (*os.Root, error) {
	fd, err := s.open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	r, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		r, err = os.OpenRoot(p)
	}
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Dev != want.Dev || st.Ino != want.Ino {
		r.Close()
		return nil, strictErr("open", p, syscall.ELOOP)
	}
	return r, nil
}

// parentRoot opens the directory holding p as an os.Root and returns the
// name of p in it ("." when p is the top of the view).
func (s strictFS) parentRoot(p string) (*os.Root, string, error) {
	if _, rel := s.split(p); rel == "." {
		r, err := s.root(p)
		return r, ".", err
	}
	r, err := s.root(path.Dir(p))
	return r, path.Base(p), err
}

// mkdirAll creates the directory p and its missing parents without
// following any symlink, and returns it opened with O_PATH. An existing
// non-directory at p is reported as EEXIST.
func (s strictFS) mkdirAll(p string) (int, error) {
	anchor, rel := s.split(p)
	cur, err := unix.Open(anchor, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: anchor, Err: err}
	}
	done := anchor
	parts := components(rel)
	for i, c := range parts {
		done = path.Join(done, c)
		fd, err := openBeneath(cur, c, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == unix.ENOENT {
			if err = unix.Mkdirat(cur, c, 0o755); err == nil || err == unix.EEXIST {
				fd, err = openBeneath(cur, c, unix.O_PATH|unix.O_DIRECTORY, 0)
			}
		}
		unix.Close(cur)
		if err == unix.ENOTDIR && i == len(parts)-1 {
			err = unix.EEXIST
		}
		if err != nil {
			return -1, strictErr("mkdir", done, err)
		}
		cur = fd
	}
	return cur, nil
}

// serveStrict performs a file operation made with NoFollow, or a
// resolution.
func serveStrict(s strictFS, req *fileRequest, msg *statusMsg, rep *reporter, ctl *bufio.Reader) error {
	p := req.Path
	switch req.Op {
	case opResolve:
		r, err := s.resolvePath(p)
		if err != nil {
			return err
		}
		msg.Info = &providers.FileInfo{Path: r, Name: path.Base(r)}
		return nil
	case opRead:
		return serveRead(p, rep, func(p string) (*os.File, error) {
			return s.openFile(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		})
	case opWrite:
		return s.write(req, ctl)
	case opStat:
		r, name, err := s.parentRoot(p)
		if err != nil {
			return err
		}
		defer r.Close()
		fi, err := r.Lstat(name)
		if err != nil {
			return rootErr(p, err)
		}
		info := rootInfo(r, name, p, fi)
		msg.Info = &info
		return nil
	case opList:
		infos, err := s.list(p, req.Depth)
		msg.Infos = infos
		return err
	case opMkdir:
		fd, err := s.mkdirAll(p)
		if err == nil {
			unix.Close(fd)
		}
		return err
	case opRemove:
		return s.remove(p, req.Recursive)
	case opRename:
		return s.rename(p, req.To)
	case opUpload:
		return serveUpload(p, ctl, func(dst string) (*os.Root, error) {
			fd, err := s.mkdirAll(dst)
			if err != nil {
				return nil, err
			}
			unix.Close(fd)
			return s.root(dst)
		})
	case opDownload:
		return s.download(p, rep)
	case opGrep:
		var err error
		msg.Matches, err = s.grep(req.Grep)
		return err
	}
	return fmt.Errorf("unknown file operation %q: %w", req.Op, fs.ErrInvalid)
}

// write is serveWrite within the approved directory: the temporary file is
// created and renamed over the name in a descriptor of it.
func (s strictFS) write(req *fileRequest, ctl *bufio.Reader) error {
	p, mode := req.Path, req.Mode
	if mode == 0 {
		mode = 0o644
	}
	dir, name := path.Dir(p), path.Base(p)
	if _, rel := s.split(p); rel == "." {
		return &os.PathError{Op: "write", Path: p, Err: syscall.EISDIR}
	}
	dirfd, err := s.mkdirAll(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	// As serveWrite: a directory, or a symlink to one, is not replaced
	// (a stat only; a symlink there is otherwise replaced, not followed).
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, 0); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return &os.PathError{Op: "write", Path: p, Err: syscall.EISDIR}
	}
	tmp := tempName(name)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return &os.PathError{Op: "open", Path: path.Join(dir, tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Join(dir, tmp))
	err = fillTemp(f, req)
	if err == nil {
		// The mode given wins over the umask.
		err = f.Chmod(mode.Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && req.MTime != 0 {
		ts := unix.NsecToTimespec(req.MTime)
		if e := unix.UtimesNanoAt(dirfd, tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); e != nil {
			err = &os.PathError{Op: "chtimes", Path: path.Join(dir, tmp), Err: e}
		}
	}
	if err == nil && (req.Direct && aborted(ctlFD) || !req.Direct && !committed(ctl)) {
		err = errAborted
	}
	if err == nil {
		if e := unix.Renameat(dirfd, tmp, dirfd, name); e != nil {
			err = &os.LinkError{Op: "rename", Old: path.Join(dir, tmp), New: p, Err: e}
		}
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

// rootInfo describes name, in r, as the path p.
func rootInfo(r *os.Root, name, p string, fi fs.FileInfo) providers.FileInfo {
	out := providers.FileInfo{Path: p, Name: path.Base(p), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime().UTC()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		out.Target, _ = r.Readlink(name)
	}
	return out
}

// list is listDir within the approved directory.
func (s strictFS) list(dir string, depth int) ([]providers.FileInfo, error) {
	r, err := s.root(dir)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, &os.PathError{Op: "list", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil, err
	}
	defer r.Close()
	return listRoot(r, dir, depth)
}

// remove is removePath within the approved parent directory.
func (s strictFS) remove(p string, recursive bool) error {
	if p == "/" {
		return &os.PathError{Op: "remove", Path: p, Err: syscall.EINVAL}
	}
	r, name, err := s.parentRoot(p)
	if err != nil {
		return err
	}
	defer r.Close()
	if name == "." {
		return &os.PathError{Op: "remove", Path: p, Err: syscall.EINVAL}
	}
	fi, err := r.Lstat(name)
	if err != nil {
		return rootErr(p, err)
	}
	switch {
	case !fi.IsDir():
		err = r.Remove(name)
	case !recursive:
		return fmt.Errorf("%s is a directory: remove it recursively: %w", p, syscall.EISDIR)
	default:
		err = r.RemoveAll(name)
	}
	return rootErr(p, err)
}

// rename renames from to to, each name within its approved parent.
func (s strictFS) rename(from, to string) error {
	fromDir, err := s.open(path.Dir(from), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fromDir)
	toDir, err := s.open(path.Dir(to), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(toDir)
	if _, rel := s.split(from); rel == "." || from == "/" {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EBUSY}
	}
	if err := unix.Renameat(fromDir, path.Base(from), toDir, path.Base(to)); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// download is serveDownload within the approved path: a regular file
// opened without following symlinks, or a directory walked in its os.Root.
func (s strictFS) download(src string, rep *reporter) error {
	kind, err := s.kind(src)
	if err != nil {
		return err
	}
	switch kind {
	case unix.S_IFDIR:
	case unix.S_IFREG:
		f, err := s.openFile(src, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return writeArchive(rep, func(tw *archive.Writer, buf []byte) error {
			return addEntryFrom(tw, path.Base(src), fi, buf, nil, func() (*os.File, error) { return f, nil })
		})
	default:
		// A socket, device or FIFO: nothing of it is archived.
		return writeArchive(rep, func(*archive.Writer, []byte) error { return nil })
	}
	r, err := s.root(src)
	if err != nil {
		return err
	}
	defer r.Close()
	return writeArchive(rep, func(tw *archive.Writer, buf []byte) error {
		return walkRoot(r, func(rel string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if rel == "." {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			readlink := func() (string, error) { return r.Readlink(rel) }
			return addEntryFrom(tw, rel, info, buf, readlink, func() (*os.File, error) {
				return r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			})
		})
	})
}

// grep is the search within the approved path: a regular file opened
// without following symlinks, or a directory walked in its os.Root.
func (s strictFS) grep(req *providers.GrepRequest) ([]providers.GrepMatch, error) {
	re, max, err := grepPattern(req)
	if err != nil {
		return nil, err
	}
	root := req.Path
	if root == "" {
		root = providers.DefaultWorkdir
	}
	g := newGrepSearch(req, root, re, max)
	kind, err := s.kind(root)
	if err != nil {
		return nil, err
	}
	if kind != unix.S_IFDIR {
		if kind == unix.S_IFREG && (req.Glob == "" || globMatch(req.Glob, root, root)) {
			g.matches = grepFile(root, func() (*os.File, error) {
				return s.openFile(root, unix.O_RDONLY|unix.O_NONBLOCK, 0)
			}, g.re, g.matches, g.max, g.scan)
		}
		return g.matches, nil
	}
	r, err := s.root(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	err = walkRoot(r, func(rel string, d fs.DirEntry, err error) error {
		return g.visit(path.Join(root, rel), d, err, func() (*os.File, error) {
			return r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		})
	})
	return g.result(err)
}

// grepPattern compiles the pattern of a search and returns its bound.
func grepPattern(req *providers.GrepRequest) (*regexp.Regexp, int, error) {
	pattern := req.Pattern
	if req.IgnoreCase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, 0, fmt.Errorf("pattern: %v: %w", err, fs.ErrInvalid)
	}
	max := req.MaxMatches
	if max <= 0 {
		max = defaultMaxMatches
	}
	return re, max, nil
}

// rootErr names p in an error of an os.Root operation on one of its names.
func rootErr(p string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return &os.PathError{Op: pe.Op, Path: p, Err: pe.Err}
	}
	return err
}

// readDirIn lists the directory rel of r, sorted by name.
func readDirIn(r *os.Root, rel string) ([]fs.DirEntry, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// walkRoot is fs.WalkDir over the tree of r, from "." in lexical order:
// it never descends into a symlink, and what a swap makes it follow stays
// within r. Names need not be UTF-8, unlike those of r.FS().
func walkRoot(r *os.Root, fn fs.WalkDirFunc) error {
	fi, err := r.Stat(".")
	if err != nil {
		err = fn(".", nil, err)
	} else {
		err = walkRootDir(r, ".", fs.FileInfoToDirEntry(fi), fn)
	}
	if err == fs.SkipDir || err == fs.SkipAll {
		return nil
	}
	return err
}

func walkRootDir(r *os.Root, rel string, d fs.DirEntry, fn fs.WalkDirFunc) error {
	if err := fn(rel, d, nil); err != nil || !d.IsDir() {
		if err == fs.SkipDir && d.IsDir() {
			err = nil
		}
		return err
	}
	entries, err := readDirIn(r, rel)
	if err != nil {
		if err = fn(rel, d, err); err != nil {
			if err == fs.SkipDir {
				err = nil
			}
			return err
		}
	}
	for _, e := range entries {
		if err := walkRootDir(r, path.Join(rel, e.Name()), e, fn); err != nil {
			if err == fs.SkipDir {
				break
			}
			return err
		}
	}
	return nil
}
