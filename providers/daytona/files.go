package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
	"github.com/agentbox/sandbox/providers/daytona/wire"
	"github.com/agentbox/sandbox/providers/httpapi"
)

// filesURL is the toolbox URL of a file endpoint with its query.
func (p *Provider) filesURL(ctx context.Context, id, endpoint string, q url.Values) (string, error) {
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return "", err
	}
	return base + endpoint + "?" + q.Encode(), nil
}

// ReadFile streams a file from GET /files/download. The request is
// retried before any byte was handed out, never after.
func (p *Provider) ReadFile(ctx context.Context, id, file string) (io.ReadCloser, error) {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return nil, err
	}
	u, err := p.filesURL(ctx, id, "/files/download", url.Values{"path": {file}})
	if err != nil {
		return nil, err
	}
	r, err := p.newRequest("read "+file, http.MethodGet, u, nil, true)
	if err != nil {
		return nil, err
	}
	r.Header.Set("Accept", "application/octet-stream")
	resp, err := p.transport().Do(ctx, r)
	if err != nil {
		return nil, err
	}
	return &httpapi.SizedBody{Body: resp.Body, Want: resp.ContentLength, Provider: Name, Op: "read " + file}, nil
}

// WriteFile streams r with POST /files/upload-v2 (a raw body) to a
// temporary name beside file, sets its mode unless it is 0644, then moves
// it into place, so a reader that fails leaves no partial file.
func (p *Provider) WriteFile(ctx context.Context, id, file string, r io.Reader, mode fs.FileMode) error {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return err
	}
	if file == "/" {
		return fmt.Errorf("daytona: write /: %w", providers.ErrInvalid)
	}
	tmp := path.Join(path.Dir(file), "."+path.Base(file)+".upload-"+randomHex(6))
	u, err := p.filesURL(ctx, id, "/files/upload-v2", url.Values{"path": {tmp}})
	if err != nil {
		return err
	}
	req, err := p.newRequest("write "+file, http.MethodPost, u, nil, false)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Stream = r
	resp, err := p.transport().Do(ctx, req)
	if err != nil {
		p.removeQuietly(ctx, id, tmp)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	drain(resp.Body)
	// The toolbox creates files 0644; other modes are set before the
	// file takes its name.
	if perm := mode.Perm(); perm != 0 && perm != 0o644 {
		if err := p.chmod(ctx, id, tmp, perm); err != nil {
			p.removeQuietly(ctx, id, tmp)
			return err
		}
	}
	if err := p.move(ctx, id, tmp, file); err != nil {
		p.removeQuietly(ctx, id, tmp)
		return err
	}
	return nil
}

// chmod sets a path's permission bits with POST /files/permissions.
func (p *Provider) chmod(ctx context.Context, id, file string, perm fs.FileMode) error {
	u, err := p.filesURL(ctx, id, "/files/permissions", url.Values{"path": {file}, "mode": {fmt.Sprintf("%04o", uint32(perm))}})
	if err != nil {
		return err
	}
	return p.call(ctx, "chmod "+file, http.MethodPost, u, nil, nil, true)
}

// removeQuietly removes what this call wrote and could not finish, even
// when ctx has ended.
func (p *Provider) removeQuietly(ctx context.Context, id, file string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = p.remove(ctx, id, file, false)
}

// Stat describes one path with GET /files/info.
func (p *Provider) Stat(ctx context.Context, id, file string) (providers.FileInfo, error) {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return providers.FileInfo{}, err
	}
	u, err := p.filesURL(ctx, id, "/files/info", url.Values{"path": {file}})
	if err != nil {
		return providers.FileInfo{}, err
	}
	var fi wire.FileInfo
	if err := p.call(ctx, "stat "+file, http.MethodGet, u, nil, &fi, true); err != nil {
		return providers.FileInfo{}, err
	}
	if fi.Path == "" {
		fi.Path = file
	}
	return fileInfo(path.Dir(file), fi), nil
}

// ListDir lists a directory to the given depth with GET /files.
func (p *Provider) ListDir(ctx context.Context, id, dir string, depth int) ([]providers.FileInfo, error) {
	dir, err := providers.CleanPath(dir, "")
	if err != nil {
		return nil, err
	}
	depth = max(depth, 1)
	u, err := p.filesURL(ctx, id, "/files", url.Values{"path": {dir}, "depth": {strconv.Itoa(depth)}})
	if err != nil {
		return nil, err
	}
	var entries []wire.FileInfo
	if err := p.call(ctx, "list "+dir, http.MethodGet, u, nil, &entries, true); err != nil {
		return nil, err
	}
	list := make([]providers.FileInfo, 0, len(entries))
	for _, e := range entries {
		list = append(list, fileInfo(dir, e))
	}
	return list, nil
}

// Mkdir creates a directory and its parents with POST /files/folder; an
// existing directory is fine.
func (p *Provider) Mkdir(ctx context.Context, id, dir string) error {
	dir, err := providers.CleanPath(dir, "")
	if err != nil {
		return err
	}
	u, err := p.filesURL(ctx, id, "/files/folder", url.Values{"path": {dir}, "mode": {"0755"}})
	if err != nil {
		return err
	}
	return p.call(ctx, "mkdir "+dir, http.MethodPost, u, nil, nil, true)
}

// Remove deletes a path with DELETE /files.
func (p *Provider) Remove(ctx context.Context, id, file string, recursive bool) error {
	file, err := providers.CleanPath(file, "")
	if err != nil {
		return err
	}
	if file == "/" {
		return fmt.Errorf("daytona: remove /: %w", providers.ErrInvalid)
	}
	return p.remove(ctx, id, file, recursive)
}

func (p *Provider) remove(ctx context.Context, id, file string, recursive bool) error {
	u, err := p.filesURL(ctx, id, "/files", url.Values{"path": {file}, "recursive": {strconv.FormatBool(recursive)}})
	if err != nil {
		return err
	}
	return p.call(ctx, "remove "+file, http.MethodDelete, u, nil, nil, true)
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
// is only retried when refused with 429. The toolbox refuses to move onto
// an existing path (409): a file or symlink there is replaced, as
// rename(2) does, by removing it (a non-recursive delete, which the
// toolbox refuses for a directory) and moving again.
func (p *Provider) move(ctx context.Context, id, from, to string) error {
	u, err := p.filesURL(ctx, id, "/files/move", url.Values{"source": {from}, "destination": {to}})
	if err != nil {
		return err
	}
	err = p.call(ctx, "rename "+from, http.MethodPost, u, nil, nil, false)
	if !errors.Is(err, providers.ErrExists) {
		return err
	}
	if p.remove(ctx, id, to, false) != nil {
		return err
	}
	return p.call(ctx, "rename "+from, http.MethodPost, u, nil, nil, false)
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

// Grep searches file contents with GET /files/find (a regular
// expression, searched recursively) and filters the matches by glob and
// count here.
func (p *Provider) Grep(ctx context.Context, id string, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	dir, err := providers.CleanPath(req.Path, "")
	if err != nil {
		return nil, err
	}
	pattern := req.Pattern
	if req.IgnoreCase {
		pattern = "(?i)" + pattern
	}
	u, err := p.filesURL(ctx, id, "/files/find", url.Values{"path": {dir}, "pattern": {pattern}})
	if err != nil {
		return nil, err
	}
	var found []wire.Match
	if err := p.call(ctx, "grep "+dir, http.MethodGet, u, nil, &found, true); err != nil {
		return nil, err
	}
	limit := req.MaxMatches
	if limit <= 0 {
		limit = 1000
	}
	out := []providers.GrepMatch{}
	for _, m := range found {
		if req.Glob != "" && !globMatch(req.Glob, m.File) {
			continue
		}
		out = append(out, providers.GrepMatch{Path: m.File, Line: m.Line, Text: m.Content})
		if len(out) >= limit {
			break
		}
	}
	return out, nil
}

// globMatch matches a glob against a path's base name, or the whole path
// when the glob has a slash.
func globMatch(glob, file string) bool {
	name := file
	if !strings.Contains(glob, "/") {
		name = path.Base(file)
	}
	ok, _ := path.Match(glob, name)
	return ok
}

// fileInfo converts the toolbox's description of a path in dir.
func fileInfo(dir string, e wire.FileInfo) providers.FileInfo {
	perm, _ := strconv.ParseUint(e.Permissions, 8, 32)
	mode := fs.FileMode(perm) & fs.ModePerm
	switch {
	case e.IsDir:
		mode |= fs.ModeDir
	case strings.HasPrefix(e.Mode, "L"):
		mode |= fs.ModeSymlink
	}
	p := e.Path
	if p == "" {
		p = path.Join(dir, e.Name)
	}
	fi := providers.FileInfo{Path: p, Name: e.Name, Size: e.Size, Mode: mode}
	if fi.Name == "" {
		fi.Name = path.Base(p)
	}
	if t, err := time.Parse(time.RFC3339Nano, e.ModifiedAt); err == nil {
		fi.ModTime = t
	}
	return fi
}

var _ providers.Grepper = (*Provider)(nil)
