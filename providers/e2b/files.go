package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// filesURL is the /files endpoint for one path, with the user as envd
// expects it in the query.
func (p *Provider) filesRequest(ctx context.Context, id, op, method, file string) (request, error) {
	r, err := p.envdRequest(ctx, id, op, "/files")
	if err != nil {
		return r, err
	}
	q := url.Values{}
	q.Set("path", file)
	q.Set("username", p.opts.User)
	r.url += "?" + q.Encode()
	r.method = method
	r.header.Del("Authorization")
	return r, nil
}

// ReadFile streams a file from GET /files. The reply is retried before any
// byte was handed out, never after.
func (p *Provider) ReadFile(ctx context.Context, id, file string) (io.ReadCloser, error) {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return nil, err
	}
	r, err := p.filesRequest(ctx, id, "read "+file, http.MethodGet, file)
	if err != nil {
		return nil, err
	}
	r.idempotent = true
	resp, err := p.doEnvd(ctx, id, r)
	if err != nil {
		return nil, err
	}
	return &sizedBody{rc: resp.Body, want: resp.ContentLength, op: "read " + file}, nil
}

// sizedBody fails a read that ends before Content-Length, so a cut
// download is an error and never a short file.
type sizedBody struct {
	rc   io.ReadCloser
	want int64
	got  int64
	op   string
}

func (b *sizedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.got += int64(n)
	if err == io.EOF && b.want >= 0 && b.got < b.want {
		return n, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: b.op, Msg: fmt.Sprintf("download cut after %d of %d bytes", b.got, b.want)}
	}
	if err != nil && err != io.EOF {
		return n, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: b.op, Msg: fmt.Sprintf("download cut after %d bytes: %v", b.got, err), Err: err}
	}
	return n, err
}

func (b *sizedBody) Close() error { return b.rc.Close() }

// WriteFile streams r to a temporary name beside path with POST /files
// (application/octet-stream), then renames it into place, so a reader
// that fails leaves no partial file. Modes other than 0644 are set with
// chmod.
func (p *Provider) WriteFile(ctx context.Context, id, file string, r io.Reader, mode fs.FileMode) error {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return err
	}
	if file == "/" {
		return fmt.Errorf("e2b: write /: %w", providers.ErrInvalid)
	}
	tmp := path.Join(path.Dir(file), "."+path.Base(file)+".upload-"+randomSuffix())
	req, err := p.filesRequest(ctx, id, "write "+file, http.MethodPost, tmp)
	if err != nil {
		return err
	}
	req.header.Set("Content-Type", "application/octet-stream")
	req.stream = r
	resp, err := p.do(ctx, req)
	if err != nil {
		p.removeQuietly(id, tmp)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if perm := mode.Perm(); perm != 0 && perm != 0o644 {
		res, err := p.Exec(ctx, id, providers.ExecRequest{Argv: []string{"chmod", strconv.FormatUint(uint64(perm), 8), tmp}})
		if err == nil && res.ExitCode != 0 {
			err = providers.Errorf(providers.ErrUnavailable, Name, "chmod "+file, "chmod exited %d", res.ExitCode)
		}
		if err != nil {
			p.removeQuietly(id, tmp)
			return err
		}
	}
	if err := p.move(ctx, id, tmp, file); err != nil {
		p.removeQuietly(id, tmp)
		return err
	}
	return nil
}

func (p *Provider) removeQuietly(id, file string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.unary(ctx, id, "remove "+file, wire.FSRemove, wire.PathRequest{Path: file}, nil, true)
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Stat describes one path.
func (p *Provider) Stat(ctx context.Context, id, file string) (providers.FileInfo, error) {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return providers.FileInfo{}, err
	}
	var out wire.EntryResponse
	if err := p.unary(ctx, id, "stat "+file, wire.FSStat, wire.PathRequest{Path: file}, &out, true); err != nil {
		return providers.FileInfo{}, err
	}
	fi := fileInfo(out.Entry)
	if fi.Path == "" {
		fi.Path, fi.Name = file, path.Base(file)
	}
	return fi, nil
}

// ListDir lists a directory to the given depth.
func (p *Provider) ListDir(ctx context.Context, id, dir string, depth int) ([]providers.FileInfo, error) {
	dir, err := providers.CleanPath(dir, "")
	if err != nil {
		return nil, err
	}
	if depth < 1 {
		depth = 1
	}
	var out wire.ListDirResponse
	if err := p.unary(ctx, id, "list "+dir, wire.FSListDir, wire.ListDirRequest{Path: dir, Depth: uint32(depth)}, &out, true); err != nil {
		return nil, err
	}
	list := make([]providers.FileInfo, 0, len(out.Entries))
	for _, e := range out.Entries {
		list = append(list, fileInfo(e))
	}
	return list, nil
}

// Mkdir creates a directory and its parents; an existing one is fine.
func (p *Provider) Mkdir(ctx context.Context, id, dir string) error {
	dir, err := providers.CleanPath(dir, "")
	if err != nil {
		return err
	}
	err = p.unary(ctx, id, "mkdir "+dir, wire.FSMakeDir, wire.PathRequest{Path: dir}, nil, true)
	if errors.Is(err, providers.ErrExists) {
		fi, serr := p.Stat(ctx, id, dir)
		if serr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}

// Remove deletes a path. envd removes recursively, so a non-recursive
// remove of a directory checks that it is empty first.
func (p *Provider) Remove(ctx context.Context, id, file string, recursive bool) error {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return err
	}
	if file == "/" {
		return fmt.Errorf("e2b: remove /: %w", providers.ErrInvalid)
	}
	fi, err := p.Stat(ctx, id, file)
	if err != nil {
		return err
	}
	if fi.IsDir() && !recursive {
		entries, err := p.ListDir(ctx, id, file, 1)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return providers.Errorf(providers.ErrInvalid, Name, "remove "+file, "directory not empty (remove it recursively)")
		}
	}
	return p.unary(ctx, id, "remove "+file, wire.FSRemove, wire.PathRequest{Path: file}, nil, true)
}

// Rename moves a path within the sandbox.
func (p *Provider) Rename(ctx context.Context, id, from, to string) error {
	from, err := providers.CleanPath(from, "")
	if err != nil {
		return err
	}
	to, err = providers.CleanPath(to, "")
	if err != nil {
		return err
	}
	return p.move(ctx, id, from, to)
}

// move is not idempotent (a repeated move finds its source gone), so it
// is only retried when refused with 429.
func (p *Provider) move(ctx context.Context, id, from, to string) error {
	return p.unary(ctx, id, "rename "+from, wire.FSMove, wire.MoveRequest{Source: from, Destination: to}, nil, false)
}

// Upload unpacks a tar stream with per-file calls.
func (p *Provider) Upload(ctx context.Context, id, dst string, r io.Reader) error {
	dst, err := providers.CleanPath(dst, "")
	if err != nil {
		return err
	}
	return archive.UploadViaFiles(ctx, p, id, dst, r)
}

// Download writes a tar stream of src with per-file calls.
func (p *Provider) Download(ctx context.Context, id, src string, w io.Writer) error {
	src, err := providers.CleanPath(src, "")
	if err != nil {
		return err
	}
	return archive.DownloadViaFiles(ctx, p, id, src, w)
}

// fileInfo converts envd's entry.
func fileInfo(e wire.EntryInfo) providers.FileInfo {
	mode := fs.FileMode(e.Mode)
	switch e.Type {
	case wire.FileTypeDirectory:
		mode |= fs.ModeDir
	case wire.FileTypeSymlink:
		mode = mode&^fs.ModeDir | fs.ModeSymlink
	}
	fi := providers.FileInfo{Path: e.Path, Name: e.Name, Size: e.Size, Mode: mode}
	if fi.Name == "" && fi.Path != "" {
		fi.Name = path.Base(fi.Path)
	}
	if e.ModifiedTime != nil {
		fi.ModTime = e.ModifiedTime.Time
	}
	if e.SymlinkTarget != nil {
		fi.Target = *e.SymlinkTarget
	}
	return fi
}
