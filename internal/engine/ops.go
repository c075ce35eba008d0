package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
	"github.com/bmatcuk/doublestar/v4"
)

// previewLimit is the largest write whose diff is shown for approval.
const previewLimit = 256 << 10

// hashLimit is the largest upload whose files are hashed for approval.
const hashLimit = 64 << 20

// Exec runs a command with the session's environment under the gate.
//
// A request naming a session (req.Session) runs in that shell session of
// the sandbox: the gate decides on the command as given and only then runs
// it through providers.SessionCommand. A bad session name is refused
// before anyone is asked.
func (s *Session) Exec(ctx context.Context, req providers.ExecRequest) (providers.ExecResult, error) {
	if req.Session != "" {
		if err := providers.ValidSessionName(req.Session); err != nil {
			return providers.ExecResult{}, err
		}
	}
	if len(s.env) > 0 {
		env := maps.Clone(s.env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	if req.User == "" {
		req.User = s.user
	}
	return s.gate.Exec(ctx, s.info.ID, req)
}

// Read streams a file to w.
func (s *Session) Read(ctx context.Context, p string, w io.Writer) error {
	p, err := providers.CleanPath(p, "")
	if err != nil {
		return err
	}
	rc, err := s.gate.ReadFile(ctx, s.info.ID, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	return nil
}

// Write creates a file from r. An existing file is an error matching
// providers.ErrExists unless force is set. Small writes carry a diff for the
// approver.
func (s *Session) Write(ctx context.Context, p string, r io.Reader, force bool) error {
	p, err := providers.CleanPath(p, "")
	if err != nil {
		return err
	}
	// A look at what is there, part of the write, not a call of its own.
	cur, err := s.gate.Peek(ctx, s.info.ID, p, previewLimit)
	if err != nil {
		return err
	}
	if cur.Dir {
		return fmt.Errorf("%s is a directory: %w", p, providers.ErrInvalid)
	}
	if cur.Exists && !force {
		return &ExistsError{What: p + " already exists"}
	}
	d := approval.DetailsFrom(ctx)
	if br, ok := smallContent(r); ok {
		d.Diff = approval.UnifiedDiff(p, cur.Content, string(br), !cur.Exists)
		d.Bytes = int64(len(br))
		r = bytes.NewReader(br)
	}
	return s.gate.WriteFile(approval.WithDetails(ctx, d), s.info.ID, p, r, 0o644)
}

// smallContent returns the bytes of r when r is an in-memory reader small
// enough to preview.
func smallContent(r io.Reader) ([]byte, bool) {
	type sized interface {
		io.Reader
		Len() int
	}
	sr, ok := r.(sized)
	if !ok || sr.Len() > previewLimit {
		return nil, false
	}
	b, err := io.ReadAll(sr)
	return b, err == nil
}

// Edit replaces old with new in a file (every occurrence with all).
func (s *Session) Edit(ctx context.Context, p, old, new string, all bool) (approval.EditResult, error) {
	p, err := providers.CleanPath(p, "")
	if err != nil {
		return approval.EditResult{}, err
	}
	return s.gate.Edit(ctx, s.info.ID, p, old, new, all)
}

// Ls lists a directory to the given depth.
func (s *Session) Ls(ctx context.Context, p string, depth int) ([]providers.FileInfo, error) {
	p, err := providers.CleanPath(p, "")
	if err != nil {
		return nil, err
	}
	return s.gate.Ls(ctx, s.info.ID, p, depth)
}

// Glob finds paths under root matching a doublestar pattern. An absolute
// pattern ("/etc/host*") is searched from its literal leading directory, so
// root does not have to be given for it.
func (s *Session) Glob(ctx context.Context, root, pattern string) ([]providers.FileInfo, error) {
	if strings.HasPrefix(pattern, "/") {
		root, _ = doublestar.SplitPattern(pattern)
	}
	root, err := providers.CleanPath(root, "")
	if err != nil {
		return nil, err
	}
	return s.gate.Glob(ctx, s.info.ID, root, pattern)
}

// Grep searches file contents.
func (s *Session) Grep(ctx context.Context, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	p, err := providers.CleanPath(req.Path, "")
	if err != nil {
		return nil, err
	}
	req.Path = p
	return s.gate.Grep(ctx, s.info.ID, req)
}

// TransferOptions tune Upload and Download.
type TransferOptions struct {
	// Force overwrites existing files at the destination.
	Force bool
	// Progress, when set, is called with the bytes moved so far and the
	// total expected (0 when unknown).
	Progress func(done, total int64)
}

// Upload copies a host file or directory into the sandbox. A directory's
// contents land in remote; a file lands at remote, or inside it when remote
// ends in "/" or is a directory. Existing remote files are refused unless
// Force is set. The data is streamed as tar; it is never held in memory.
func (s *Session) Upload(ctx context.Context, local, remote string, o TransferOptions) error {
	abs, err := filepath.Abs(local)
	if err != nil {
		return err
	}
	lfi, err := os.Lstat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("local path %s does not exist: %w", local, providers.ErrInvalid)
		}
		return err
	}
	dirMode := strings.HasSuffix(remote, "/")
	remote, err = providers.CleanPath(remote, "")
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Dir(abs))
	if err != nil {
		return err
	}
	defer root.Close()
	name := filepath.Base(abs)
	files, err := archive.Manifest(ctx, root, name, false)
	if err != nil {
		return err
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	if total <= hashLimit {
		if files, err = archive.Manifest(ctx, root, name, true); err != nil {
			return err
		}
	}

	// Where the entries go, and under which names.
	dst, entry := remote, ""
	remoteExists := false
	if !lfi.IsDir() {
		rfi, err := s.gate.Stat(ctx, s.info.ID, remote)
		remoteExists = err == nil
		switch {
		case err == nil && rfi.IsDir():
			dirMode = true
		case err == nil && !o.Force:
			return &ExistsError{What: remote + " already exists in the sandbox"}
		case err != nil && !errors.Is(err, providers.ErrNotFound):
			return err
		}
		if dirMode {
			entry = name
		} else {
			dst, entry = path.Dir(remote), path.Base(remote)
		}
	}
	details := approval.Details{Dest: remote, Bytes: total, From: abs}
	// Which destination files exist already: a directory upload lists the
	// destination; a single file needs only its own target checked.
	existing := map[string]struct{}{}
	switch target := path.Join(dst, entry); {
	case entry == "":
		if existing, err = s.existingRemote(ctx, dst); err != nil {
			return err
		}
	case dirMode:
		if _, err := s.gate.Stat(ctx, s.info.ID, target); err == nil {
			existing[target] = struct{}{}
		} else if !errors.Is(err, providers.ErrNotFound) {
			return err
		}
	default:
		if remoteExists {
			existing[target] = struct{}{}
		}
	}
	var clash []string
	for _, f := range files {
		rel := f.Path
		if entry != "" {
			rel = entry
		}
		target := path.Join(dst, rel)
		_, exists := existing[target]
		if exists {
			clash = append(clash, target)
		}
		details.Files = append(details.Files, approval.FileEntry{Path: target, Size: f.Size, SHA256: f.SHA256, Exists: exists})
	}
	if len(clash) > 0 && !o.Force {
		return &ExistsError{What: fmt.Sprintf("%d file(s) already exist in the sandbox (first: %s)", len(clash), clash[0])}
	}

	if lfi.Mode().IsRegular() && s.gate.Features().UploadFile {
		return s.uploadFile(approval.WithDetails(ctx, details), root, name, path.Join(dst, entry), o)
	}

	// The tar stream goes through an OS pipe, file contents spliced into
	// it: a provider that extracts in another process hands that process
	// the pipe, and no byte passes through this one.
	meter := newMeter(total, o.Progress)
	stream, err := archive.PackPipe(ctx, root, name, entry, meter.add)
	if err != nil {
		return err
	}
	err = s.gate.Upload(approval.WithDetails(ctx, details), s.info.ID, dst, stream)
	stream.Close() // a packing still under way (the upload failed) ends
	if perr := stream.Wait(); err == nil && perr != nil {
		err = perr
	}
	if err == nil {
		meter.report()
	}
	return err
}

// existingRemote lists the files already under dir (empty when missing).
func (s *Session) existingRemote(ctx context.Context, dir string) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	list, err := s.gate.ListDir(ctx, s.info.ID, dir, 64)
	if errors.Is(err, providers.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		var fi providers.FileInfo
		if fi, err = s.gate.Stat(ctx, s.info.ID, dir); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("%s is a file in the sandbox, not a directory: %w", dir, providers.ErrInvalid)
		}
		return nil, err
	}
	for _, fi := range list {
		if !fi.IsDir() {
			out[fi.Path] = struct{}{}
		}
	}
	return out, nil
}

// Download copies a sandbox file or directory to the host. The host target
// must not exist unless Force is set; a failed or interrupted download
// leaves no partial file behind.
func (s *Session) Download(ctx context.Context, remote, local string, o TransferOptions) error {
	remote, err := providers.CleanPath(remote, "")
	if err != nil {
		return err
	}
	rfi, err := s.gate.Stat(ctx, s.info.ID, remote)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(local)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(abs); err == nil && !o.Force {
		return &ExistsError{What: local + " already exists"}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	details := approval.Details{Dest: abs}
	if rfi.IsDir() {
		list, err := s.gate.ListDir(ctx, s.info.ID, remote, 64)
		if err != nil {
			return err
		}
		for _, fi := range list {
			if !fi.IsDir() {
				details.Files = append(details.Files, approval.FileEntry{Path: fi.Path, Size: fi.Size})
				details.Bytes += fi.Size
			}
		}
	} else {
		details.Files = []approval.FileEntry{{Path: remote, Size: rfi.Size}}
		details.Bytes = rfi.Size
	}
	root, err := os.OpenRoot(filepath.Dir(abs))
	if err != nil {
		return err
	}
	defer root.Close()
	if rfi.Mode.IsRegular() && s.gate.Features().DownloadFile {
		return s.downloadFile(approval.WithDetails(ctx, details), remote, root, filepath.Base(abs), rfi, o)
	}

	// An OS pipe rather than an io.Pipe: a provider that runs the
	// download in another process hands it the write end, and the tar
	// stream reaches the extraction without a copy through this process.
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	archive.GrowPipe(pw)
	errc := make(chan error, 1)
	dctx, cancel := context.WithCancel(approval.WithDetails(ctx, details))
	defer cancel()
	go func() {
		err := s.gate.Download(dctx, s.info.ID, remote, pw)
		pw.Close()
		errc <- err
	}()
	meter := newMeter(details.Bytes, o.Progress)
	opts := archive.ExtractOptions{Force: o.Force, Progress: meter.add}
	dst := filepath.Base(abs)
	if !rfi.IsDir() {
		opts.SingleFileAs = dst
		dst = "."
	}
	_, xerr := archive.Extract(ctx, pr, root, dst, opts)
	if xerr != nil {
		cancel()
		pr.Close() // the writer stops with EPIPE
	}
	derr := <-errc
	if derr != nil {
		return derr
	}
	if xerr == nil {
		meter.report()
	}
	return xerr
}

// uploadFile copies the regular host file name of root to target through
// the provider's direct copy (providers.FileUploader), with its mode and
// time, as the tar stream's extraction gives them. Progress is the host
// file's offset, which the copy advances.
func (s *Session) uploadFile(ctx context.Context, root *os.Root, name, target string, o TransferOptions) error {
	// Non-blocking: a FIFO put in the file's place must not hang the open.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file: %w", name, providers.ErrInvalid)
	}
	meter := newMeter(fi.Size(), o.Progress)
	stop := meter.follow(func() int64 {
		off, _ := f.Seek(0, io.SeekCurrent)
		return off
	})
	err = s.gate.UploadFile(ctx, s.info.ID, target, f, fi.Mode().Perm(), fi.ModTime())
	stop()
	if err == nil {
		meter.report()
	}
	return err
}

// downloadFile copies the regular file remote, described by rfi, to name
// in root through the provider's direct copy (providers.FileDownloader):
// into a temporary file that becomes name once complete, with the remote
// file's mode and time, as an extracted file gets them. Progress is the
// temporary file's growing size.
func (s *Session) downloadFile(ctx context.Context, remote string, root *os.Root, name string, rfi providers.FileInfo, o TransferOptions) error {
	meter := newMeter(rfi.Size, o.Progress)
	err := archive.WriteFile(ctx, root, name, o.Force, rfi.Mode.Perm(), rfi.ModTime, func(f *os.File) error {
		stop := meter.follow(func() int64 {
			fi, _ := f.Stat()
			if fi == nil {
				return 0
			}
			return fi.Size()
		})
		defer stop()
		return s.gate.DownloadFile(ctx, s.info.ID, remote, f)
	})
	if err == nil {
		meter.report()
	}
	return err
}

// meter reports a transfer's progress, at most every 100 ms.
type meter struct {
	n     int64
	total int64
	fn    func(done, total int64)
	last  time.Time
}

// newMeter reports to fn (which may be nil) the bytes moved out of total.
func newMeter(total int64, fn func(done, total int64)) *meter {
	return &meter{total: total, fn: fn}
}

// add counts n more bytes.
func (m *meter) add(n int64) {
	m.n += n
	if now := time.Now(); now.Sub(m.last) > 100*time.Millisecond {
		m.last = now
		m.report()
	}
}

// follow counts what at returns (the bytes moved so far), reported every
// 100 ms, until the returned stop, which takes its final count.
func (m *meter) follow(at func() int64) (stop func()) {
	if m.fn == nil {
		return func() {}
	}
	size := func() { m.n = at() }
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				size()
				m.report()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		size()
	}
}

// report passes the count so far to the callback; a transfer calls it once
// more when it ends, so that the last bytes are reported.
func (m *meter) report() {
	if m.fn != nil {
		m.fn(m.n, m.total)
	}
}

// ExistsError refuses to replace what is there without force. It says how
// to allow it on the command line and in a plan, in one sentence without
// the sentinel it matches (providers.ErrExists).
type ExistsError struct {
	// What names what is there ("/workspace/a already exists").
	What string
}

// Error says what is there and how to overwrite it.
func (e *ExistsError) Error() string {
	return e.What + "; to overwrite, pass --force (in a plan: force: true)"
}

// Unwrap makes it match providers.ErrExists.
func (e *ExistsError) Unwrap() error { return providers.ErrExists }
