package modal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/execfs"
)

// Exec runs a command through the SDK, streaming its output and stdin.
func (p *Provider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	if req.Session != "" {
		var err error
		if req, err = providers.SessionCommand(req); err != nil {
			return providers.ExecResult{}, err
		}
	}
	switch {
	case req.Background:
		return providers.ExecResult{}, providers.Errorf(providers.ErrUnsupported, Name, "exec", "background commands are not supported")
	case req.User != "" && req.User != "root":
		return providers.ExecResult{}, providers.Errorf(providers.ErrUnsupported, Name, "exec", "running as user %q is not supported", req.User)
	case req.Network != providers.NetworkDefault:
		return providers.ExecResult{}, providers.Errorf(providers.ErrUnsupported, Name, "exec", "the network is set per sandbox, not per command")
	}
	argv := req.Argv
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	if len(argv) == 0 {
		return providers.ExecResult{}, providers.Errorf(providers.ErrInvalid, Name, "exec", "empty command")
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = DefaultWorkdir
	}
	sb, err := p.handle(ctx, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	params := &modalsdk.SandboxExecParams{Workdir: cwd, Env: req.Env}
	if req.Timeout > 0 {
		// Modal takes whole seconds; the server kills the command then.
		params.Timeout = (req.Timeout + time.Second - 1).Truncate(time.Second)
	}
	start := time.Now()
	cp, err := sb.Exec(ctx, argv, params)
	if err != nil {
		return providers.ExecResult{}, p.mapErr("exec", err)
	}
	var wg sync.WaitGroup
	copyOut := func(w io.Writer, r io.ReadCloser) {
		defer wg.Done()
		if w == nil {
			w = io.Discard
		}
		_, _ = io.Copy(w, r)
	}
	wg.Add(2)
	go copyOut(req.Stdout, cp.Stdout)
	go copyOut(req.Stderr, cp.Stderr)
	stdinErr := make(chan error, 1)
	go func() {
		if req.Stdin != nil {
			if _, err := io.Copy(cp.Stdin, req.Stdin); err != nil {
				stdinErr <- err
				return
			}
		}
		stdinErr <- cp.Stdin.Close()
	}()
	type waited struct {
		code int
		err  error
	}
	done := make(chan waited, 1)
	go func() {
		code, err := cp.Wait(ctx, nil)
		done <- waited{code, err}
	}()
	var w waited
	select {
	case w = <-done:
	case <-ctx.Done():
		return providers.ExecResult{}, fmt.Errorf("%s: exec: %w", Name, ctx.Err())
	}
	elapsed := time.Since(start)
	timedOut := req.Timeout > 0 && elapsed >= req.Timeout
	if w.err != nil {
		var execTO modalsdk.ExecTimeoutError
		if errors.As(w.err, &execTO) || timedOut {
			return providers.ExecResult{ExitCode: 137, Duration: elapsed}, providers.Errorf(providers.ErrTimeout, Name, "exec", "command timed out after %v", req.Timeout)
		}
		return providers.ExecResult{}, p.mapErr("exec", w.err)
	}
	// The output streams end with the command.
	wg.Wait()
	res := providers.ExecResult{ExitCode: w.code, Duration: elapsed}
	if timedOut && w.code >= 128 {
		return res, providers.Errorf(providers.ErrTimeout, Name, "exec", "command timed out after %v", req.Timeout)
	}
	select {
	case err := <-stdinErr:
		if err != nil && req.Stdin != nil {
			// A command that exits without reading its input is not a
			// failure; a reader that fails is the caller's to know.
			var perr *providers.Error
			if !errors.As(p.mapErr("", err), &perr) {
				return res, fmt.Errorf("%s: exec: stdin: %w", Name, err)
			}
		}
	default:
	}
	return res, nil
}

// shell runs a /bin/sh script for execfs and Create.
func (p *Provider) shell(ctx context.Context, id, script string, stdout, stderr io.Writer) (int, error) {
	res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: script, Cwd: "/", Stdout: stdout, Stderr: stderr})
	return res.ExitCode, err
}

// put writes one file through the SDK's filesystem API.
func (p *Provider) put(ctx context.Context, id, name string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", Name, name, err)
	}
	sb, err := p.handle(ctx, id)
	if err != nil {
		return err
	}
	if err := sb.Filesystem.WriteBytes(ctx, data, name, nil); err != nil {
		return p.mapErr("write "+name, err)
	}
	return nil
}

// get reads one file through the SDK's filesystem API.
func (p *Provider) get(ctx context.Context, id, name string, w io.Writer) error {
	sb, err := p.handle(ctx, id)
	if err != nil {
		return err
	}
	data, err := sb.Filesystem.ReadBytes(ctx, name, nil)
	if err != nil {
		return p.mapErr("read "+name, err)
	}
	_, err = w.Write(data)
	return err
}

// absolute resolves a relative path against the working directory.
func absolute(name string) string {
	if !path.IsAbs(name) {
		name = path.Join(DefaultWorkdir, name)
	}
	return path.Clean(name)
}

// ReadFile reads a whole file (the SDK returns it in one piece).
func (p *Provider) ReadFile(ctx context.Context, id, name string) (io.ReadCloser, error) {
	var buf bytes.Buffer
	if err := p.get(ctx, id, absolute(name), &buf); err != nil {
		return nil, err
	}
	return io.NopCloser(&buf), nil
}

// WriteFile reads r to its end before anything is sent, so a failing
// reader leaves no file; the SDK creates missing parents. A mode other
// than the helper's 0644 is set with chmod.
func (p *Provider) WriteFile(ctx context.Context, id, name string, r io.Reader, mode fs.FileMode) error {
	name = absolute(name)
	if err := p.put(ctx, id, name, r); err != nil {
		return err
	}
	if perm := mode.Perm(); perm != 0 && perm != 0o644 {
		q, err := execfs.Quote(name)
		if err != nil {
			return err
		}
		var stderr bytes.Buffer
		code, err := p.shell(ctx, id, fmt.Sprintf("chmod %o %s", perm, q), nil, &stderr)
		if err != nil {
			return err
		}
		if code != 0 {
			return providers.Errorf(providers.ErrUnavailable, Name, "chmod "+name, "%s", bytes.TrimSpace(stderr.Bytes()))
		}
	}
	return nil
}

// Stat describes a path (through the shell helpers of execfs).
func (p *Provider) Stat(ctx context.Context, id, name string) (providers.FileInfo, error) {
	return p.fs.Stat(ctx, id, absolute(name))
}

// ListDir lists a directory.
func (p *Provider) ListDir(ctx context.Context, id, name string, depth int) ([]providers.FileInfo, error) {
	return p.fs.ListDir(ctx, id, absolute(name), depth)
}

// Mkdir creates a directory and its parents.
func (p *Provider) Mkdir(ctx context.Context, id, name string) error {
	return p.fs.Mkdir(ctx, id, absolute(name))
}

// Remove deletes a path.
func (p *Provider) Remove(ctx context.Context, id, name string, recursive bool) error {
	return p.fs.Remove(ctx, id, absolute(name), recursive)
}

// Rename moves a path.
func (p *Provider) Rename(ctx context.Context, id, from, to string) error {
	return p.fs.Rename(ctx, id, absolute(from), absolute(to))
}

// Upload unpacks a tar stream under dst.
func (p *Provider) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	return p.fs.Upload(ctx, id, absolute(dst), archive)
}

// Download writes a tar stream of src.
func (p *Provider) Download(ctx context.Context, id, src string, w io.Writer) error {
	return p.fs.Download(ctx, id, absolute(src), w)
}
