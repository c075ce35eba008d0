//go:build linux

package local

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
)

// fileCall is one file operation about to run in a sandbox's init.
type fileCall struct {
	op    string // names the operation in errors: "read /workspace/x"
	id    string
	dir   string
	req   fileRequest
	stdio initStdio
	// res are the sandbox's limits: a file operation's init gets the
	// same ones as a command's (its /tmp, /run, /dev/shm sizes and
	// rlimits), cold or in a holder's spare.
	res providers.Resources
	// user is the sandbox's default user, as whom the operation runs.
	user string
}

// prepare checks the sandbox and cleans the paths of a request. A ctx from
// providers.WithNoFollow makes the init follow no symlink in them.
func (p *Provider) prepare(ctx context.Context, id, verb string, req fileRequest) (*fileCall, error) {
	req.NoFollow = providers.NoFollow(ctx)
	m, dir, err := p.load(id)
	if err != nil {
		return nil, err
	}
	clean, err := cleanPath(verb, req.Path)
	if err != nil {
		return nil, err
	}
	req.Path = clean
	op := verb + " " + clean
	if req.Op == opRename {
		to, err := cleanPath(verb, req.To)
		if err != nil {
			return nil, err
		}
		req.To = to
		op += " -> " + to
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(op, ctx, 0)
	}
	return &fileCall{op: op, id: id, dir: dir, req: req, res: m.Resources, user: m.User}, nil
}

// cleanPath applies the contract's path rules.
func cleanPath(verb, p string) (string, error) {
	c, err := providers.CleanPath(p, providers.DefaultWorkdir)
	if err != nil {
		return "", &providers.Error{Kind: providers.ErrInvalid, Provider: Name, Op: verb, Msg: err.Error(), Err: err}
	}
	return c, nil
}

// start launches the init for a file operation. File operations see the
// sandbox's own network setting irrelevant: they never use the network,
// so they run in a private one.
func (p *Provider) start(fc *fileCall) (*proc, error) {
	req := fc.req
	cfg := &initConfig{Mode: modeFile, File: &req, Resources: fc.res, User: fc.user}
	return p.launch(fc.dir, fc.id, cfg, machineRequest{Any: true, User: fc.user}, fc.stdio)
}

// result interprets the final status of a file operation.
func (fc *fileCall) result(ctx context.Context, pr *proc, last statusMsg, got bool) (statusMsg, error) {
	switch {
	case got && last.Done:
		return last, nil
	case got && last.Setup:
		return last, setupErr(fc.id, last)
	case got && last.Err != "" && ctx.Err() == nil:
		return last, errorOf(fc.op, last)
	case ctx.Err() != nil:
		return last, ctxErr(fc.op, ctx, 0)
	case got && last.Err != "":
		return last, errorOf(fc.op, last)
	}
	return last, pr.initDied()
}

// run performs a file operation that moves no data.
func (p *Provider) run(ctx context.Context, fc *fileCall) (statusMsg, error) {
	pr, err := p.start(fc)
	if err != nil {
		return statusMsg{}, err
	}
	pr.closeCtl(false)
	stop := pr.watch(ctx, nil)
	last, got := pr.finish()
	stop()
	return fc.result(ctx, pr, last, got)
}

var _ providers.PathResolver = (*Provider)(nil)

// ResolvePath returns path with every symlink in it resolved inside the
// sandbox (see providers.PathResolver): the init of the sandbox walks it
// component by component, as `realpath -m` does.
func (p *Provider) ResolvePath(ctx context.Context, id, path string) (string, error) {
	fc, err := p.prepare(ctx, id, "resolve", fileRequest{Op: opResolve, Path: path})
	if err != nil {
		return "", err
	}
	m, err := p.run(ctx, fc)
	if err != nil {
		return "", err
	}
	if m.Info == nil || !strings.HasPrefix(m.Info.Path, "/") {
		return "", errors.New("local: " + fc.op + ": the init sent no resolved path")
	}
	return m.Info.Path, nil
}

// Stat describes one path without following a final symlink.
func (p *Provider) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	fc, err := p.prepare(ctx, id, "stat", fileRequest{Op: opStat, Path: path})
	if err != nil {
		return providers.FileInfo{}, err
	}
	m, err := p.run(ctx, fc)
	if err != nil {
		return providers.FileInfo{}, err
	}
	if m.Info == nil {
		return providers.FileInfo{}, errors.New("local: stat: the init sent no file information")
	}
	return *m.Info, nil
}

// ListDir lists a directory to the given depth.
func (p *Provider) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	fc, err := p.prepare(ctx, id, "list", fileRequest{Op: opList, Path: path, Depth: depth})
	if err != nil {
		return nil, err
	}
	m, err := p.run(ctx, fc)
	if err != nil {
		return nil, err
	}
	if m.Infos == nil {
		m.Infos = []providers.FileInfo{}
	}
	return m.Infos, nil
}

// Mkdir creates a directory and its missing parents.
func (p *Provider) Mkdir(ctx context.Context, id, path string) error {
	fc, err := p.prepare(ctx, id, "mkdir", fileRequest{Op: opMkdir, Path: path})
	if err != nil {
		return err
	}
	_, err = p.run(ctx, fc)
	return err
}

// Remove deletes a path; a directory only when recursive is set.
func (p *Provider) Remove(ctx context.Context, id, path string, recursive bool) error {
	fc, err := p.prepare(ctx, id, "remove", fileRequest{Op: opRemove, Path: path, Recursive: recursive})
	if err != nil {
		return err
	}
	_, err = p.run(ctx, fc)
	return err
}

// Rename moves a path within the sandbox.
func (p *Provider) Rename(ctx context.Context, id, from, to string) error {
	fc, err := p.prepare(ctx, id, "rename", fileRequest{Op: opRename, Path: from, To: to})
	if err != nil {
		return err
	}
	_, err = p.run(ctx, fc)
	return err
}

// Grep searches file contents inside the sandbox.
func (p *Provider) Grep(ctx context.Context, id string, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	if req.Path == "" {
		req.Path = providers.DefaultWorkdir
	}
	pattern := req.Pattern
	if req.IgnoreCase {
		pattern = "(?i)" + pattern
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, &providers.Error{Kind: providers.ErrInvalid, Provider: Name, Op: "grep", Msg: "pattern: " + err.Error(), Err: err}
	}
	fc, err := p.prepare(ctx, id, "grep", fileRequest{Op: opGrep, Path: req.Path})
	if err != nil {
		return nil, err
	}
	req.Path = fc.req.Path
	fc.req.Grep = &req
	m, err := p.run(ctx, fc)
	if err != nil {
		return nil, err
	}
	if m.Matches == nil {
		m.Matches = []providers.GrepMatch{}
	}
	return m.Matches, nil
}

// ReadFile streams a file out of the sandbox. The init opens it inside the
// sandbox's view, so symlinks resolve there.
func (p *Provider) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	fc, err := p.prepare(ctx, id, "read", fileRequest{Op: opRead, Path: path})
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	fc.stdio.stdout = w
	pr, err := p.start(fc)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	pr.closeCtl(false)
	stop := pr.watch(ctx, nil)
	first, ok := pr.next()
	if !ok || !first.Open {
		r.Close()
		last, got := pr.finish()
		stop()
		if ok {
			last, got = first, true
		}
		_, err := fc.result(ctx, pr, last, got)
		if err == nil {
			err = errors.New("local: " + fc.op + ": the init sent no data")
		}
		return nil, err
	}
	return &fileReader{r: r, pr: pr, fc: fc, ctx: ctx, stop: stop}, nil
}

// DownloadFile copies the regular file src into dst (see
// providers.FileDownloader): the init that opens src inside the sandbox's
// view gets dst as its output and copies with sendfile, in the kernel.
func (p *Provider) DownloadFile(ctx context.Context, id, src string, dst *os.File) error {
	fc, err := p.prepare(ctx, id, "download", fileRequest{Op: opRead, Path: src})
	if err != nil {
		return err
	}
	fc.stdio.stdout = dst
	_, err = p.run(ctx, fc)
	return err
}

// UploadFile copies the regular host file src to dst (see
// providers.FileUploader): the init that writes dst inside the sandbox's
// view, through a temporary file, gets src as its input and copies with
// sendfile, in the kernel. Its control pipe stays open until the init
// ends: closed before, when ctx ends, it tells the init to discard the
// copy.
func (p *Provider) UploadFile(ctx context.Context, id, dst string, src *os.File, perm fs.FileMode, mtime time.Time) error {
	req := fileRequest{Op: opWrite, Path: dst, Mode: perm, Direct: true}
	if !mtime.IsZero() {
		req.MTime = mtime.UnixNano()
	}
	fc, err := p.prepare(ctx, id, "upload to", req)
	if err != nil {
		return err
	}
	fc.stdio.stdin = src
	pr, err := p.start(fc)
	if err != nil {
		return err
	}
	stop := pr.watch(ctx, func() { pr.closeCtl(false) })
	last, got := pr.finish()
	stop()
	_, err = fc.result(ctx, pr, last, got)
	return err
}

// fileReader is the stream of ReadFile. At EOF it checks that the init
// finished the copy; a failure mid-way is returned instead of io.EOF.
type fileReader struct {
	r    *os.File
	pr   *proc
	fc   *fileCall
	ctx  context.Context
	stop func()

	once sync.Once
	err  error // outcome of the init, set by end
}

func (f *fileReader) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if err == io.EOF {
		f.end(false)
		if f.err != nil {
			return n, f.err
		}
	}
	return n, err
}

// end collects the init's outcome; with kill, the reader gave up early.
func (f *fileReader) end(kill bool) {
	f.once.Do(func() {
		if kill {
			f.pr.kill()
		}
		last, got := f.pr.finish()
		f.stop()
		if !kill {
			_, f.err = f.fc.result(f.ctx, f.pr, last, got)
		}
	})
}

// Close stops the stream; reading to the end first is not required.
func (f *fileReader) Close() error {
	f.r.Close()
	f.end(true)
	return nil
}

// WriteFile replaces a file with the bytes of r, atomically: the init
// writes a temporary file and renames it only after the host confirms that
// r ended without error.
func (p *Provider) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	fc, err := p.prepare(ctx, id, "write", fileRequest{Op: opWrite, Path: path, Mode: mode.Perm()})
	if err != nil {
		return err
	}
	return p.pushStream(ctx, fc, r)
}

// Upload unpacks a tar stream under dst inside the sandbox.
func (p *Provider) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	fc, err := p.prepare(ctx, id, "upload to", fileRequest{Op: opUpload, Path: dst})
	if err != nil {
		return err
	}
	return p.pushStream(ctx, fc, archive)
}

// pushStream runs an operation that consumes r on the init's stdin. The
// commit byte follows only a complete input; on a reader error or a
// cancelled ctx the init discards its temporary files.
func (p *Provider) pushStream(ctx context.Context, fc *fileCall, r io.Reader) error {
	if s, ok := r.(*archive.Stream); ok {
		// A tar stream packed into an OS pipe: the init reads that pipe
		// itself, so the data never passes through this process, and
		// the input is complete once the packing ended without error.
		fc.stdio.stdin = s.File()
		return p.push(ctx, fc, func(*proc) error { return s.Wait() }, func(*proc) {})
	}
	fc.stdio.stdin = struct{ io.Reader }{r} // through a pipe the provider feeds
	var closeIn sync.Once
	closeStdin := func(pr *proc) { closeIn.Do(func() { pr.stdinW.Close() }) }
	return p.push(ctx, fc, func(pr *proc) error {
		// Large reads: an io.Pipe hands over one read's worth per
		// switch between goroutines.
		_, err := io.CopyBuffer(struct{ io.Writer }{pr.stdinW}, r, make([]byte, outCopyBuf))
		closeStdin(pr)
		return err
	}, closeStdin)
}

// feedSettle bounds how long push waits for its feed's error once the
// operation ended.
const feedSettle = time.Second

// push starts the operation fc, delivers its input with feed (from a
// goroutine) and commits it once feed returned nil; abort stops the
// feeding when ctx ends first.
func (p *Provider) push(ctx context.Context, fc *fileCall, feed func(*proc) error, abort func(*proc)) error {
	pr, err := p.start(fc)
	if err != nil {
		return err
	}
	fed := make(chan error, 1)
	go func() {
		err := feed(pr)
		pr.closeCtl(err == nil && ctx.Err() == nil)
		fed <- err
	}()
	stop := pr.watch(ctx, func() {
		abort(pr)
		pr.closeCtl(false)
	})
	last, got := pr.finish()
	stop()
	select {
	case err := <-fed:
		// A broken pipe only means that the init stopped reading: its
		// own report says why.
		if err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, os.ErrClosed) && !(got && last.Done) {
			return &providers.Error{Provider: Name, Op: fc.op, Msg: "reading the input: " + err.Error() + " (nothing was written)", Err: err}
		}
	case <-time.After(feedSettle):
		// Still feeding: the init is gone. A copy ends on its next
		// write, a packing when the caller closes the stream. (The
		// wait lets a feed that failed, and so ended the operation,
		// report its own error first.)
	}
	_, err = fc.result(ctx, pr, last, got)
	return err
}

// Download writes a tar stream of src to w.
func (p *Provider) Download(ctx context.Context, id, src string, w io.Writer) error {
	fc, err := p.prepare(ctx, id, "download", fileRequest{Op: opDownload, Path: src})
	if err != nil {
		return err
	}
	if w == nil {
		w = io.Discard
	}
	fc.stdio.stdout = w
	_, err = p.run(ctx, fc)
	return err
}
