// Package execfs implements the file operations a provider's API has no
// endpoint for — stat, list, mkdir, remove, rename and directory transfer
// as tar — with shell commands run in the sandbox, for any provider whose
// API can run commands and move single files (Runloop's, for one).
//
// Every path reaches the shell through Quote, single-quoted, so no file
// name is ever read as shell syntax or as an option. Listings come back
// NUL-separated from GNU find's -printf, so names holding newlines or
// tabs survive. Failures a caller can act on are told by the script's
// exit status (see the exit* constants) and mapped to the shared kinds of
// package providers; anything else keeps the command's stderr.
package execfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Exec runs script with /bin/sh -c in sandbox id, copying its stdout and
// stderr to the writers, and returns its exit status. An error means the
// command could not be run or its status is unknown.
type Exec func(ctx context.Context, id, script string, stdout, stderr io.Writer) (int, error)

// FS runs file operations through Exec. Put and Get move one file to and
// from the sandbox; Upload and Download stage a tar archive with them.
type FS struct {
	// Provider names the provider in errors.
	Provider string
	Exec     Exec
	// Put creates or replaces the file path with the bytes of r.
	Put func(ctx context.Context, id, path string, r io.Reader) error
	// Get copies the file path to w.
	Get func(ctx context.Context, id, path string, w io.Writer) error
}

// Exit statuses the scripts use for the failures that have a kind.
const (
	exitNotFound = 73
	exitNotDir   = 74
	exitIsDir    = 75
	exitExists   = 76
)

// Quote returns p single-quoted for a POSIX shell. A relative path that
// starts with "-" is prefixed with "./" so no command takes it for an
// option. A NUL byte, which no path can hold, yields an error.
func Quote(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q holds a NUL byte: %w", p, providers.ErrInvalid)
	}
	if p == "" {
		return "", fmt.Errorf("empty path: %w", providers.ErrInvalid)
	}
	if strings.HasPrefix(p, "-") {
		p = "./" + p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'", nil
}

// quoteAll quotes every path, failing at the first that cannot be.
func quoteAll(ps ...string) ([]string, error) {
	out := make([]string, len(ps))
	for i, p := range ps {
		q, err := Quote(p)
		if err != nil {
			return nil, err
		}
		out[i] = q
	}
	return out, nil
}

// run runs script and turns a non-zero status into an error of the kind
// its exit status names, keeping stderr as the message.
func (f *FS) run(ctx context.Context, id, op, script string, stdout io.Writer) error {
	if stdout == nil {
		stdout = io.Discard
	}
	var stderr bytes.Buffer
	code, err := f.Exec(ctx, id, script, stdout, &limited{w: &stderr, left: 8 << 10})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if code == 0 {
		return nil
	}
	msg := strings.TrimSpace(stderr.String())
	kind := providers.ErrUnavailable
	switch code {
	case exitNotFound:
		kind, msg = providers.ErrNotFound, "no such file or directory"
	case exitNotDir:
		kind, msg = providers.ErrInvalid, "not a directory"
	case exitIsDir:
		kind, msg = providers.ErrInvalid, "is a directory (remove it recursively)"
	case exitExists:
		kind, msg = providers.ErrExists, "exists and is not a directory"
	}
	if msg == "" {
		msg = "exit status " + strconv.Itoa(code)
	}
	return &providers.Error{Kind: kind, Provider: f.Provider, Op: op, Msg: msg}
}

// limited keeps the first left bytes written to it and drops the rest.
type limited struct {
	w    io.Writer
	left int
}

func (l *limited) Write(b []byte) (int, error) {
	if l.left > 0 {
		n := min(len(b), l.left)
		l.left -= n
		_, _ = l.w.Write(b[:n])
	}
	return len(b), nil
}

// exists is a shell test that exits with exitNotFound unless $p exists
// (a dangling symlink counts).
const exists = `[ -e "$p" ] || [ -L "$p" ] || exit 73; `

// findFormat prints six NUL-terminated fields per entry: type, mode bits
// in octal, size, modification time, path and symlink target.
const findFormat = `%y\0%#m\0%s\0%T@\0%p\0%l\0`

// Stat describes one path without following a final symlink.
func (f *FS) Stat(ctx context.Context, id, p string) (providers.FileInfo, error) {
	q, err := Quote(p)
	if err != nil {
		return providers.FileInfo{}, err
	}
	var out bytes.Buffer
	script := "p=" + q + "; " + exists + `find "$p" -maxdepth 0 -printf '` + findFormat + `'`
	if err := f.run(ctx, id, "stat "+p, script, &out); err != nil {
		return providers.FileInfo{}, err
	}
	infos, err := parseFind(out.Bytes(), "", p)
	if err != nil || len(infos) != 1 {
		return providers.FileInfo{}, &providers.Error{Kind: providers.ErrUnavailable, Provider: f.Provider, Op: "stat " + p, Msg: fmt.Sprintf("unexpected find output %q", out.String())}
	}
	return infos[0], nil
}

// ListDir lists the directory p to depth levels (at least one).
func (f *FS) ListDir(ctx context.Context, id, p string, depth int) ([]providers.FileInfo, error) {
	q, err := Quote(p)
	if err != nil {
		return nil, err
	}
	depth = max(depth, 1)
	var out bytes.Buffer
	script := "p=" + q + "; " + exists + `[ -d "$p" ] || exit 74; find "$p/" -mindepth 1 -maxdepth ` + strconv.Itoa(depth) + ` -printf '` + findFormat + `'`
	if err := f.run(ctx, id, "list "+p, script, &out); err != nil {
		return nil, err
	}
	infos, err := parseFind(out.Bytes(), p, "")
	if err != nil {
		return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: f.Provider, Op: "list " + p, Msg: err.Error()}
	}
	return infos, nil
}

// parseFind reads the output of findFormat. Paths printed under dir+"/"
// are cleaned to dir's spelling; a single stat entry takes the name the
// caller asked about (same).
func parseFind(b []byte, dir, same string) ([]providers.FileInfo, error) {
	fields := strings.Split(string(b), "\x00")
	if len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	if len(fields)%6 != 0 {
		return nil, fmt.Errorf("find printed %d fields, not a multiple of 6", len(fields))
	}
	out := make([]providers.FileInfo, 0, len(fields)/6)
	for i := 0; i < len(fields); i += 6 {
		typ, perm, size, mtime, p, target := fields[i], fields[i+1], fields[i+2], fields[i+3], fields[i+4], fields[i+5]
		bits, err := strconv.ParseUint(perm, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("mode %q: %w", perm, err)
		}
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("size %q: %w", size, err)
		}
		secs, err := strconv.ParseFloat(mtime, 64)
		if err != nil {
			return nil, fmt.Errorf("time %q: %w", mtime, err)
		}
		if same != "" {
			p = same
		} else {
			p = path.Clean(p)
		}
		fi := providers.FileInfo{
			Path:    p,
			Name:    path.Base(p),
			Size:    n,
			Mode:    fileMode(typ, bits),
			ModTime: time.Unix(0, int64(secs*1e9)).UTC(),
		}
		if typ == "l" {
			fi.Target = target
		}
		out = append(out, fi)
	}
	return out, nil
}

// fileMode builds an fs.FileMode from find's type letter and the octal
// mode bits.
func fileMode(typ string, bits uint64) fs.FileMode {
	m := fs.FileMode(bits & 0o777)
	if bits&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if bits&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if bits&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch typ {
	case "d":
		m |= fs.ModeDir
	case "l":
		m |= fs.ModeSymlink
	case "p":
		m |= fs.ModeNamedPipe
	case "s":
		m |= fs.ModeSocket
	case "c":
		m |= fs.ModeDevice | fs.ModeCharDevice
	case "b":
		m |= fs.ModeDevice
	}
	return m
}

// Mkdir creates p and its missing parents.
func (f *FS) Mkdir(ctx context.Context, id, p string) error {
	q, err := Quote(p)
	if err != nil {
		return err
	}
	script := "p=" + q + `; if [ -e "$p" ] && [ ! -d "$p" ]; then exit 76; fi; mkdir -p -- "$p"`
	return f.run(ctx, id, "mkdir "+p, script, nil)
}

// Remove deletes p; a directory only when recursive is set.
func (f *FS) Remove(ctx context.Context, id, p string, recursive bool) error {
	q, err := Quote(p)
	if err != nil {
		return err
	}
	script := "p=" + q + "; " + exists
	if recursive {
		script += `rm -rf -- "$p"`
	} else {
		script += `if [ -d "$p" ] && [ ! -L "$p" ]; then rmdir -- "$p" 2>/dev/null || exit 75; else rm -f -- "$p"; fi`
	}
	return f.run(ctx, id, "remove "+p, script, nil)
}

// Rename moves from to to, replacing a file there.
func (f *FS) Rename(ctx context.Context, id, from, to string) error {
	qs, err := quoteAll(from, to)
	if err != nil {
		return err
	}
	script := "p=" + qs[0] + "; " + exists + `mkdir -p -- "$(dirname -- ` + qs[1] + `)" && mv -fT -- "$p" ` + qs[1]
	return f.run(ctx, id, "rename "+from, script, nil)
}

// stagingPath names a fresh file in the sandbox's /tmp for an archive.
func stagingPath() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "/tmp/.execfs-" + hex.EncodeToString(b[:]) + ".tar"
}

// Upload unpacks the tar stream archive under dst: the stream is checked
// entry by entry as it is sent (absolute names, ".." and links that leave
// dst are refused before anything is unpacked), staged in the sandbox's
// /tmp with Put, unpacked by tar and removed. A refused or cut stream
// leaves nothing under dst.
func (f *FS) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	qd, err := Quote(dst)
	if err != nil {
		return err
	}
	stage := stagingPath()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(copyChecked(pw, archive)) }()
	err = f.Put(ctx, id, stage, pr)
	pr.CloseWithError(errors.New("upload ended"))
	cleanup := func() {
		_ = f.run(context.WithoutCancel(ctx), id, "upload "+dst, "rm -f -- '"+stage+"'", nil)
	}
	if err != nil {
		cleanup()
		return fmt.Errorf("upload %s: %w", dst, err)
	}
	script := "s='" + stage + "'; d=" + qd + `; mkdir -p -- "$d" && tar -x -f "$s" -C "$d" --no-same-owner --no-overwrite-dir; rc=$?; rm -f -- "$s"; exit $rc`
	return f.run(ctx, id, "upload "+dst, script, nil)
}

// copyChecked copies the tar stream r to w, refusing entries that would
// land outside the destination.
func copyChecked(w io.Writer, r io.Reader) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		if err := checkEntry(hdr); err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// checkEntry refuses names and link targets that leave the destination,
// and entry types other than files, directories and symlinks.
func checkEntry(hdr *tar.Header) error {
	escapes := func(name string) bool {
		return name == "" || strings.IndexByte(name, 0) >= 0 || path.IsAbs(name) || !fs.ValidPath(strings.TrimSuffix(path.Clean(name), "/"))
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
	default:
		return fmt.Errorf("archive entry %q has unsupported type %q: %w", hdr.Name, hdr.Typeflag, providers.ErrUnsupported)
	}
	name := strings.TrimPrefix(hdr.Name, "./")
	if name != "" && name != "." && escapes(name) {
		return fmt.Errorf("archive entry %q leaves the destination: %w", hdr.Name, providers.ErrInvalid)
	}
	if hdr.Typeflag == tar.TypeSymlink && (path.IsAbs(hdr.Linkname) || escapes(path.Join(path.Dir(name), hdr.Linkname))) {
		return fmt.Errorf("archive entry %q links to %q outside the destination: %w", hdr.Name, hdr.Linkname, providers.ErrInvalid)
	}
	return nil
}

// Download writes a tar stream of src to w: a directory's contents
// relative to it, or a single entry named by src's base name. tar packs
// it into a staging file in the sandbox's /tmp, which Get streams and
// which is removed afterwards.
func (f *FS) Download(ctx context.Context, id, src string, w io.Writer) error {
	q, err := Quote(src)
	if err != nil {
		return err
	}
	stage := stagingPath()
	script := "p=" + q + "; s='" + stage + "'; " + exists +
		`if [ -d "$p" ] && [ ! -L "$p" ]; then cd -- "$p" && find . -mindepth 1 -maxdepth 1 -printf '%P\0' | tar -c -f "$s" --null --no-unquote -T -; ` +
		`else cd -- "$(dirname -- "$p")" && tar -c -f "$s" -- "$(basename -- "$p")"; fi`
	defer func() {
		_ = f.run(context.WithoutCancel(ctx), id, "download "+src, "rm -f -- '"+stage+"'", nil)
	}()
	if err := f.run(ctx, id, "download "+src, script, nil); err != nil {
		return err
	}
	if err := f.Get(ctx, id, stage, w); err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	return nil
}
