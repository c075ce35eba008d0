package approval

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// ---- gated operations ----

// Exec is gated as KindExec. The target is the shell string, or the argv
// quoted; rules see the argv as one segment. A background command
// (ExecRequest.Background) is decided by the same rules, and its request
// says so in Details.Background.
func (g *Gate) Exec(ctx context.Context, id string, er providers.ExecRequest) (providers.ExecResult, error) {
	if er.Argv != nil && er.Shell != "" {
		return providers.ExecResult{}, fmt.Errorf("exec: both argv and a shell string given: %w", providers.ErrInvalid)
	}
	if er.Background {
		// A provider without machines would run it in the foreground.
		if _, err := g.machine("exec"); err != nil {
			return providers.ExecResult{}, err
		}
	}
	req := g.execRequest(ctx, id, er)
	var res providers.ExecResult
	err := g.do(ctx, req, func(ctx context.Context) (*int, error) {
		// A session becomes its wrapper script only now, after the
		// decision on the user's own command (providers.SessionCommand).
		run, err := providers.ForProvider(g.inner, er)
		if err == nil {
			res, err = g.inner.Exec(ctx, id, run)
		}
		if err != nil || er.Background {
			// A background command has no status yet.
			return nil, err
		}
		code := res.ExitCode
		return &code, nil
	})
	return res, err
}

// execRequest is the request an exec of er is decided as.
func (g *Gate) execRequest(ctx context.Context, id string, er providers.ExecRequest) Request {
	req := g.request(ctx, KindExec, id, er.Shell)
	if er.Argv != nil {
		req.Argv = slices.Clone(er.Argv)
		req.Target = QuoteArgv(er.Argv)
	}
	req.Details.Cwd = er.Cwd
	req.Details.Dest = ""
	req.Details.Background = er.Background
	req.Details.User = er.User
	return req
}

// onPath gates an operation of kind k on one sandbox path: it cleans and
// resolves the path (following its symlinks as f says), decides the
// request, and, allowed, runs op on the path the request resolved to
// (target), in a context that follows no symlink; p is the path as
// cleaned. A write names no destination: its Dest is that of a rename.
func (g *Gate) onPath(ctx context.Context, k Kind, id, path string, f follow, op func(ctx context.Context, target, p string) error) error {
	p, err := g.clean(path)
	if err != nil {
		return err
	}
	req := g.request(ctx, k, id, p)
	if k == KindWrite {
		req.Details.Dest = ""
	}
	at, err := g.resolve(ctx, &req, f)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, op(at.ctx(ctx), at.target, p)
	})
}

// ReadFile is gated as KindRead.
func (g *Gate) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := g.onPath(ctx, KindRead, id, path, followFinal, func(ctx context.Context, target, _ string) error {
		var err error
		rc, err = g.inner.ReadFile(ctx, id, target)
		return err
	})
	return rc, err
}

// WriteFile is gated as KindWrite; a diff or size the caller attached with
// WithDetails is shown to the approver.
func (g *Gate) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	return g.onPath(ctx, KindWrite, id, path, followParent, func(ctx context.Context, target, _ string) error {
		return g.inner.WriteFile(ctx, id, target, r, mode)
	})
}

// Stat is gated as KindList.
func (g *Gate) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	var fi providers.FileInfo
	err := g.onPath(ctx, KindList, id, path, followParent, func(ctx context.Context, target, p string) error {
		var err error
		fi, err = g.inner.Stat(ctx, id, target)
		fi.Path = rebase(fi.Path, target, p)
		return err
	})
	return fi, err
}

// ListDir is gated as KindList.
func (g *Gate) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	var out []providers.FileInfo
	err := g.onPath(ctx, KindList, id, path, followFinal, func(ctx context.Context, target, p string) error {
		var err error
		out, err = g.inner.ListDir(ctx, id, target, depth)
		for i := range out {
			out[i].Path = rebase(out[i].Path, target, p)
		}
		return err
	})
	return out, err
}

// Ls lists path to depth when it is a directory, or else returns what it
// is (a file, or a symlink, which is not followed), in one call gated as
// KindList.
func (g *Gate) Ls(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	var out []providers.FileInfo
	err := g.onPath(ctx, KindList, id, path, followParent, func(ctx context.Context, target, p string) error {
		fi, err := g.inner.Stat(ctx, id, target)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			fi.Path = rebase(fi.Path, target, p)
			out = []providers.FileInfo{fi}
			return nil
		}
		out, err = g.inner.ListDir(ctx, id, target, depth)
		for i := range out {
			out[i].Path = rebase(out[i].Path, target, p)
		}
		return err
	})
	return out, err
}

// Mkdir is gated as KindWrite.
func (g *Gate) Mkdir(ctx context.Context, id, path string) error {
	return g.onPath(ctx, KindWrite, id, path, followFinal, func(ctx context.Context, target, _ string) error {
		return g.inner.Mkdir(ctx, id, target)
	})
}

// Remove is gated as KindDelete.
func (g *Gate) Remove(ctx context.Context, id, path string, recursive bool) error {
	return g.onPath(ctx, KindDelete, id, path, followParent, func(ctx context.Context, target, _ string) error {
		return g.inner.Remove(ctx, id, target, recursive)
	})
}

// Rename is gated as KindWrite with Target from and Details.Dest to; path
// rules must allow both.
func (g *Gate) Rename(ctx context.Context, id, from, to string) error {
	f, err := g.clean(from)
	if err != nil {
		return err
	}
	t, err := g.clean(to)
	if err != nil {
		return err
	}
	req := g.request(ctx, KindWrite, id, f)
	req.Details.Dest = t
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, g.inner.Rename(at.ctx(ctx), id, at.target, at.dest)
	})
}

// Upload is gated as KindUpload with Target dst; the file list and sizes
// the caller attached with WithDetails are shown to the approver.
func (g *Gate) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	return g.onPath(ctx, KindUpload, id, dst, followFinal, func(ctx context.Context, target, _ string) error {
		return g.inner.Upload(ctx, id, target, archive)
	})
}

// Download is gated as KindDownload with Target src.
func (g *Gate) Download(ctx context.Context, id, src string, w io.Writer) error {
	return g.onPath(ctx, KindDownload, id, src, followFinal, func(ctx context.Context, target, _ string) error {
		return g.inner.Download(ctx, id, target, w)
	})
}

// DownloadFile is gated as KindDownload with Target src, as Download is:
// one regular file copied into dst by the provider directly (see
// providers.FileDownloader). Without that copy it returns ErrUnsupported,
// asking nobody; Features().DownloadFile tells beforehand.
func (g *Gate) DownloadFile(ctx context.Context, id, src string, dst *os.File) error {
	fd, ok := g.inner.(providers.FileDownloader)
	if !ok {
		return providers.Errorf(providers.ErrUnsupported, g.inner.Name(), "download", "no direct copy of a file")
	}
	p, err := g.clean(src)
	if err != nil {
		return err
	}
	req := g.request(ctx, KindDownload, id, p)
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, fd.DownloadFile(at.ctx(ctx), id, at.target, dst)
	})
}

// UploadFile is gated as KindUpload with Target the directory dst goes
// into, as Upload is: one regular host file copied to dst by the provider
// directly (see providers.FileUploader). Without that copy it returns
// ErrUnsupported, asking nobody; Features().UploadFile tells beforehand.
func (g *Gate) UploadFile(ctx context.Context, id, dst string, src *os.File, perm fs.FileMode, mtime time.Time) error {
	fu, ok := g.inner.(providers.FileUploader)
	if !ok {
		return providers.Errorf(providers.ErrUnsupported, g.inner.Name(), "upload", "no direct copy of a file")
	}
	p, err := g.clean(dst)
	if err != nil {
		return err
	}
	// The directory the file goes into is resolved; the file's own name,
	// a symlink or not, is replaced.
	req := g.request(ctx, KindUpload, id, path.Dir(p))
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, fu.UploadFile(at.ctx(ctx), id, path.Join(at.target, path.Base(p)), src, perm, mtime)
	})
}
