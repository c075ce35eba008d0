package archive

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// ExtractOptions tunes Extract.
type ExtractOptions struct {
	// Force overwrites existing files and symlinks. Without it an existing
	// path is an error that matches providers.ErrExists and names the path.
	// Existing directories are always merged into.
	Force bool
	// SingleFileAs, when set and the archive holds exactly one entry, a
	// regular file, writes that file to this exact path (relative to the
	// root) instead of under dst. This is how `download /workspace/a.txt
	// ./b.txt` names its result. Any other archive is extracted under dst
	// as usual.
	SingleFileAs string
	// Progress, when set, is told of the file contents written, as they
	// are.
	Progress func(n int64)
}

// Extract unpacks the tar stream r under dst, a directory inside root that
// is created when missing, and returns the paths it wrote (relative to
// root, in archive order).
//
// Entry names must be relative and free of ".." and NUL bytes, and no entry
// is written through a symlink below dst; root itself guarantees nothing
// lands outside it. Directories, regular files and symlinks are supported;
// hard links and device nodes are refused with an error matching
// providers.ErrUnsupported. Every file is written to a temporary name in its
// directory and renamed into place once complete, so an interrupted or
// failed extraction never leaves a partial file behind (entries completed
// before the failure stay).
func Extract(ctx context.Context, r io.Reader, root *os.Root, dst string, opts ExtractOptions) ([]string, error) {
	dst, err := rootName(dst)
	if err != nil {
		return nil, err
	}
	x := &extractor{ctx: ctx, root: root, dst: dst, force: opts.Force, dirs: map[string]bool{}, progress: opts.Progress, buf: make([]byte, 1<<20)}
	tr := NewReader(ctx, r)

	var pending *tar.Header
	if opts.SingleFileAs != "" {
		single, err := rootName(opts.SingleFileAs)
		if err != nil {
			return nil, err
		}
		if pending, err = x.single(tr, single); err != nil || pending == nil {
			return x.written, err
		}
	}
	for {
		hdr := pending
		pending = nil
		if hdr == nil {
			if hdr, err = x.next(tr); err != nil {
				return x.written, err
			}
			if hdr == nil {
				return x.written, nil
			}
		}
		if err := x.entry(tr, hdr); err != nil {
			return x.written, err
		}
	}
}

// extractor carries the state of one Extract.
type extractor struct {
	ctx     context.Context
	root    *os.Root
	dst     string
	force   bool
	written []string
	// dirs holds directories known to be real directories (not symlinks).
	dirs       map[string]bool
	dstCreated bool
	progress   func(int64)
	buf        []byte
}

// next returns the next header worth handling, or nil at the end.
func (x *extractor) next(tr *Reader) (*tar.Header, error) {
	for {
		if err := x.ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if isEOF(err) {
			return nil, nil
		}
		if err != nil {
			if cerr := x.ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := checkSparse(hdr); err != nil {
			return nil, err
		}
		return hdr, nil
	}
}

// WriteFile makes the file name of root the way Extract makes a single
// file: fill writes a new temporary file beside it, which gets the mode
// perm and the modification time mtime (unless zero) and then takes the
// name, refusing an existing one unless force (and a directory always).
// Nothing is left behind when any step fails.
func WriteFile(ctx context.Context, root *os.Root, name string, force bool, perm fs.FileMode, mtime time.Time, fill func(*os.File) error) error {
	name, err := rootName(name)
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("a file cannot name the root: %w", providers.ErrInvalid)
	}
	x := &extractor{ctx: ctx, root: root, force: force}
	if err := x.checkTarget(name); err != nil {
		return err
	}
	tmp, f, err := x.createTemp(path.Dir(name))
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(tmp, perm)
	}
	if err == nil && !mtime.IsZero() {
		err = root.Chtimes(tmp, mtime, mtime)
	}
	if err != nil {
		root.Remove(tmp)
		return err
	}
	return x.commit(tmp, name)
}

// single handles SingleFileAs: when the first entry is a regular file it is
// written to a temporary file beside single; if the archive then ends, it
// becomes single, otherwise it is moved under dst like any other entry and
// the header that followed it is returned for the main loop.
func (x *extractor) single(tr *Reader, single string) (*tar.Header, error) {
	hdr, err := x.next(tr)
	if err != nil || hdr == nil {
		return nil, err
	}
	if !isRegular(hdr) {
		return hdr, nil
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("archive entry %q: a regular file cannot name the root: %w", hdr.Name, providers.ErrInvalid)
	}
	if err := x.root.MkdirAll(path.Dir(single), 0o755); err != nil {
		return nil, fmt.Errorf("create directory for %s: %w", single, err)
	}
	tmp, err := x.writeTemp(path.Dir(single), tr, hdr)
	if err != nil {
		return nil, err
	}
	after, err := x.next(tr)
	if err != nil {
		x.root.Remove(tmp)
		return nil, err
	}
	target := single
	if after != nil {
		target = path.Join(x.dst, name)
		if err := x.parents(target); err != nil {
			x.root.Remove(tmp)
			return nil, err
		}
	}
	if err := x.commit(tmp, target); err != nil {
		return nil, err
	}
	return after, nil
}

// entry extracts one entry under dst.
func (x *extractor) entry(tr *Reader, hdr *tar.Header) error {
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if err := x.ensureDst(); err != nil {
		return err
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the destination itself
		}
		return fmt.Errorf("archive entry %q names the destination itself: %w", hdr.Name, providers.ErrInvalid)
	}
	target := path.Join(x.dst, name)
	switch {
	case hdr.Typeflag == tar.TypeDir:
		return x.dir(target, hdr)
	case isRegular(hdr):
		if err := x.parents(target); err != nil {
			return err
		}
		if err := x.checkTarget(target); err != nil {
			return err
		}
		tmp, err := x.writeTemp(path.Dir(target), tr, hdr)
		if err != nil {
			return err
		}
		return x.commit(tmp, target)
	case hdr.Typeflag == tar.TypeSymlink:
		return x.symlink(target, hdr)
	case hdr.Typeflag == tar.TypeLink:
		return fmt.Errorf("archive entry %q is a hard link to %q: hard links are not extracted: %w", hdr.Name, hdr.Linkname, providers.ErrUnsupported)
	case hdr.Typeflag == tar.TypeChar, hdr.Typeflag == tar.TypeBlock, hdr.Typeflag == tar.TypeFifo:
		return fmt.Errorf("archive entry %q is a device node or pipe: these are not extracted: %w", hdr.Name, providers.ErrUnsupported)
	default:
		return fmt.Errorf("archive entry %q has unsupported type %q: %w", hdr.Name, hdr.Typeflag, providers.ErrUnsupported)
	}
}

// isRegular reports a regular file entry ('\x00' is the pre-POSIX type).
func isRegular(hdr *tar.Header) bool {
	return hdr.Typeflag == tar.TypeReg || hdr.Typeflag == '\x00'
}

// checkSparse refuses sparse files (old GNU and PAX forms). Their holes are
// expanded by the tar reader from nothing, so a few hundred bytes of archive
// could otherwise make Extract write terabytes of zeros.
func checkSparse(hdr *tar.Header) error {
	sparse := hdr.Typeflag == tar.TypeGNUSparse
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			sparse = true
		}
	}
	if sparse {
		return fmt.Errorf("archive entry %q is a sparse file: sparse files are not extracted: %w", hdr.Name, providers.ErrUnsupported)
	}
	return nil
}

// ensureDst creates dst on first use.
func (x *extractor) ensureDst() error {
	if x.dstCreated {
		return nil
	}
	if err := x.root.MkdirAll(x.dst, 0o755); err != nil {
		return fmt.Errorf("create destination %s: %w", x.dst, err)
	}
	x.dstCreated = true
	x.dirs[x.dst] = true
	return nil
}

// parents makes sure every directory between dst and target exists and is
// a real directory, creating missing ones. A symlink on the way is refused,
// so an archive cannot plant a link and then write through it.
func (x *extractor) parents(target string) error {
	if err := x.ensureDst(); err != nil {
		return err
	}
	dir := path.Dir(target)
	if x.dirs[dir] {
		return nil
	}
	var chain []string
	for d := dir; !x.dirs[d] && d != x.dst && d != "." && d != "/"; d = path.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if err := x.realDir(chain[i], 0o755); err != nil {
			return err
		}
	}
	return nil
}

// realDir creates d, or checks that it is a directory and not a symlink.
func (x *extractor) realDir(d string, perm fs.FileMode) error {
	fi, err := x.root.Lstat(d)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := x.root.Mkdir(d, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory %s: %w", d, err)
		}
		fi, err = x.root.Lstat(d)
		if err != nil {
			return fmt.Errorf("create directory %s: %w", d, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory: %w", d, providers.ErrExists)
		}
	case err != nil:
		return fmt.Errorf("stat %s: %w", d, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: archive entries are never written through symlinks: %w", d, providers.ErrInvalid)
	case !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory: %w", d, providers.ErrExists)
	}
	x.dirs[d] = true
	return nil
}

// dir extracts a directory entry.
func (x *extractor) dir(target string, hdr *tar.Header) error {
	if err := x.parents(target); err != nil {
		return err
	}
	if x.dirs[target] {
		return nil
	}
	if err := x.realDir(target, fs.FileMode(hdr.Mode).Perm()|0o700); err != nil {
		return err
	}
	x.written = append(x.written, target)
	return nil
}

// checkTarget fails when target exists and may not be replaced.
func (x *extractor) checkTarget(target string) error {
	fi, err := x.root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", target, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s exists and is a directory: %w", target, providers.ErrExists)
	}
	if !x.force {
		return fmt.Errorf("%s already exists (use --force to overwrite): %w", target, providers.ErrExists)
	}
	return nil
}

// writeTemp streams the current entry into a new temporary file in dir and
// returns its name. On any failure the temporary file is removed.
func (x *extractor) writeTemp(dir string, tr *Reader, hdr *tar.Header) (string, error) {
	tmp, f, err := x.createTemp(dir)
	if err != nil {
		return "", err
	}
	_, err = tr.BodyTo(x.ctx, f, hdr, x.buf, x.progress)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = x.root.Chmod(tmp, fs.FileMode(hdr.Mode).Perm())
	}
	if err == nil && !hdr.ModTime.IsZero() {
		err = x.root.Chtimes(tmp, hdr.ModTime, hdr.ModTime)
	}
	if err != nil {
		x.root.Remove(tmp)
		if cerr := x.ctx.Err(); cerr != nil {
			return "", cerr
		}
		return "", fmt.Errorf("extract %s: %w", hdr.Name, err)
	}
	return tmp, nil
}

// createTemp creates a new, empty, private file in dir.
func (x *extractor) createTemp(dir string) (string, *os.File, error) {
	for range 10 {
		tmp := path.Join(dir, tempName())
		f, err := x.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create temporary file in %s: %w", dir, err)
		}
		return tmp, f, nil
	}
	return "", nil, fmt.Errorf("create temporary file in %s: too many collisions", dir)
}

// tempName returns a hidden, random file name.
func tempName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return ".sandbox-extract-" + hex.EncodeToString(b[:]) + ".tmp"
}

// commit renames tmp to target, refusing to replace an existing path
// unless forced. On failure tmp is removed.
func (x *extractor) commit(tmp, target string) error {
	if err := x.checkTarget(target); err != nil {
		x.root.Remove(tmp)
		return err
	}
	if err := x.root.Rename(tmp, target); err != nil {
		x.root.Remove(tmp)
		return fmt.Errorf("move %s into place: %w", target, err)
	}
	x.written = append(x.written, target)
	return nil
}

// symlink extracts a symlink entry. The link is created under a temporary
// name and renamed into place.
func (x *extractor) symlink(target string, hdr *tar.Header) error {
	if hdr.Linkname == "" {
		return fmt.Errorf("archive entry %q is a symlink with an empty target: %w", hdr.Name, providers.ErrInvalid)
	}
	if err := x.parents(target); err != nil {
		return err
	}
	if err := x.checkTarget(target); err != nil {
		return err
	}
	for range 10 {
		tmp := path.Join(path.Dir(target), tempName())
		err := x.root.Symlink(hdr.Linkname, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create symlink %s: %w", target, err)
		}
		return x.commit(tmp, target)
	}
	return fmt.Errorf("create symlink %s: too many collisions", target)
}
