package runloop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"strconv"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/execfs"
	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// ReadFile streams a file with download_file; a suspended devbox is
// resumed first.
func (p *Provider) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	rc, err := p.readFile(ctx, id, path)
	if err != nil && p.resumeIfSuspended(ctx, id, err) {
		rc, err = p.readFile(ctx, id, path)
	}
	return rc, err
}

// readFile asks download_file once.
func (p *Provider) readFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	op := "read " + path
	body, err := json.Marshal(wire.DownloadFile{Path: path})
	if err != nil {
		return nil, fmt.Errorf("runloop: %s: %w", op, err)
	}
	h := p.headers(http.MethodPost)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/octet-stream")
	resp, err := p.transport().Do(ctx, &httpapi.Request{Op: op, Method: http.MethodPost, URL: p.url(id, "download_file"), Header: h, Body: body, Idempotent: true})
	if err != nil {
		return nil, err
	}
	return &httpapi.SizedBody{Body: resp.Body, Want: resp.ContentLength, Provider: Name, Op: op}, nil
}

// get copies a file to w, for package execfs.
func (p *Provider) get(ctx context.Context, id, path string, w io.Writer) error {
	rc, err := p.ReadFile(ctx, id, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("runloop: read %s: %w", path, err)
	}
	return nil
}

// WriteFile uploads r with upload_file, streamed as a multipart body; a
// mode other than 0644 is set afterwards with chmod.
func (p *Provider) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	if err := p.put(ctx, id, path, r); err != nil {
		return err
	}
	if perm := mode.Perm(); perm != 0 && perm != 0o644 {
		q, err := execfs.Quote(path)
		if err != nil {
			return err
		}
		var stderr bytes.Buffer
		res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "chmod " + strconv.FormatUint(uint64(perm), 8) + " " + q, Stderr: &stderr})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return errorf(providers.ErrUnavailable, "write "+path, "chmod: %s", stderr.String())
		}
	}
	return nil
}

// replayLimit is how much of a file put keeps to send it again to a
// devbox that was suspended when it was first sent.
const replayLimit = 1 << 20

// put streams r to path with upload_file. The body is sent once: a reader
// that fails aborts the request, and the server keeps nothing. When the
// devbox was suspended it is resumed and the file sent again, provided
// the refused request took no more than replayLimit bytes of r.
func (p *Provider) put(ctx context.Context, id, path string, r io.Reader) error {
	rp := &replay{r: r, limit: replayLimit}
	done, err := p.putOnce(ctx, id, path, rp)
	if err == nil || !p.resumeIfSuspended(ctx, id, err) {
		return err
	}
	// The first request's writer must be done with r before it is read
	// again.
	select {
	case <-done:
	case <-ctx.Done():
		return err
	}
	again, ok := rp.again()
	if !ok {
		return err
	}
	_, err = p.putOnce(ctx, id, path, again)
	return err
}

// putOnce sends one upload_file request; done is closed once its writer
// stopped reading r.
func (p *Provider) putOnce(ctx context.Context, id, path string, r io.Reader) (<-chan struct{}, error) {
	op := "write " + path
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := mw.WriteField("path", path)
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", "file"); err == nil {
				if _, err = io.Copy(part, r); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	defer pr.CloseWithError(fmt.Errorf("runloop: %s: request ended", op))
	h := p.headers(http.MethodPost)
	h.Set("Content-Type", mw.FormDataContentType())
	_, err := p.transport().DoJSON(ctx, &httpapi.Request{Op: op, Method: http.MethodPost, URL: p.url(id, "upload_file"), Header: h, Stream: pr}, nil)
	return done, err
}

// Stat describes a path, through a command.
func (p *Provider) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	return p.fs.Stat(ctx, id, path)
}

// ListDir lists a directory, through a command.
func (p *Provider) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	return p.fs.ListDir(ctx, id, path, depth)
}

// Mkdir creates a directory and its parents, through a command.
func (p *Provider) Mkdir(ctx context.Context, id, path string) error {
	return p.fs.Mkdir(ctx, id, path)
}

// Remove deletes a path, through a command.
func (p *Provider) Remove(ctx context.Context, id, path string, recursive bool) error {
	return p.fs.Remove(ctx, id, path, recursive)
}

// Rename moves a path, through a command.
func (p *Provider) Rename(ctx context.Context, id, from, to string) error {
	return p.fs.Rename(ctx, id, from, to)
}

// Upload unpacks a tar stream under dst: staged with upload_file, unpacked
// by tar in the devbox.
func (p *Provider) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	return p.fs.Upload(ctx, id, dst, archive)
}

// Download writes a tar stream of src to w: packed by tar in the devbox,
// fetched with download_file.
func (p *Provider) Download(ctx context.Context, id, src string, w io.Writer) error {
	return p.fs.Download(ctx, id, src, w)
}
