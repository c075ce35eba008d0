// Package fake is an in-memory, deterministic sandbox provider for unit
// tests of the engine, the approval gate and the conformance suite. It is
// registered as "fake" and hidden from `sandbox providers`.
//
// Sandboxes get ids "fake-1", "fake-2", … in creation order and hold a
// virtual filesystem: a map from absolute paths to directories, files and
// symlinks. Symlinks are stored as entries but never followed: a path that
// goes through one is not found, and reading one fails. Every sandbox starts
// with /, /workspace and /tmp. Upload and Download go through
// archive.UploadViaFiles and archive.DownloadViaFiles; the fake implements
// archive.Symlinker and providers.Grepper (RE2 patterns).
//
// # Exec
//
// Exec runs no real programs. It understands this fixed set of commands,
// given as Argv or as a shell string:
//
//	true, false          exit 0 or 1
//	exit N               (shell strings only) stop with status N
//	echo [-n] ARGS…      print ARGS separated by spaces, then a newline
//	cat                  copy stdin to stdout
//	cat FILE…            print files (relative to the working directory)
//	sleep DURATION       wait ("2", "0.5", "1500ms"); honours ctx and Timeout
//	pwd                  print the working directory
//	cd DIR               change the working directory of the rest of the command
//	export NAME=VALUE…   set variables for the rest of the command
//	unset NAME…          remove variables for the rest of the command
//	env                  print the merged environment, sorted, KEY=VALUE
//	fail-start           fail as if the sandbox could not start the command:
//	                     a Go error matching providers.ErrUnavailable
//
// Anything else exits 127 with "command not found" on stderr. A shell
// string may hold several commands separated by ";" or newlines (the status
// is the last one's), words may be quoted with '…' or "…", and a command may
// end in "> FILE" or ">> FILE" to send its stdout to a file. There is no
// variable expansion, and pipes, "&&", "||", "&" and "<" exit 2. When
// Timeout elapses the error matches providers.ErrTimeout; when ctx is
// cancelled it matches ctx.Err().
//
// # Machines
//
// The fake implements providers.Machine. A command run with
// ExecRequest.Background runs in a goroutine, with no stdin, its stdout
// and stderr kept in memory for Logs; it gets the next pid of its sandbox
// (from 2; PID 1 is the machine's init, which Processes lists too). Signal
// cancels it: it ends with status 128+signal. Stop ends every background
// command the same way (SIGKILL), removes everything under /tmp, forgets
// the sessions (see below) and marks the sandbox stopped: Processes lists
// nothing, Logs still reads what the commands wrote, and the next Exec,
// file operation or Start starts it again, forgetting the old commands. A
// background command that was signalled or stopped touches no file after
// that, and never starts a stopped sandbox again.
//
// # Sessions
//
// The fake keeps ExecRequest.Session itself (providers.SessionKeeper): a
// command of a session starts with the environment and working directory
// the session's previous command ended with (the directory only when the
// request sets no Cwd and it still exists), the request's Env on top. A
// real sandbox keeps that state under /tmp (providers.SessionDir), which a
// stop empties: Stop forgets the sessions too.
//
// # Test hooks
//
// FailNext makes the next call of a method fail with a given error, Calls
// lists the methods called so far, and SetClock replaces the clock used for
// creation times, modification times and TTL expiry. A Provider is safe for
// concurrent use.
package fake

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
)

// Name is the registry name of the fake provider.
const Name = "fake"

// capabilities is everything but Resources.
func capabilities() providers.Capabilities {
	return providers.Capabilities{Network: true, TTL: true, Labels: true, Stdin: true, Image: true}
}

// Registration describes the fake provider to the registry.
func Registration() providers.Registration {
	return providers.Registration{
		Name:         Name,
		Description:  "in-memory provider for tests: no real commands, a virtual filesystem",
		Capabilities: capabilities(),
		Hidden:       true,
		New:          func(providers.Config) (providers.Provider, error) { return New(), nil },
	}
}

// Provider is the fake provider. The zero value is not usable; call New.
type Provider struct {
	mu     sync.Mutex
	now    func() time.Time
	seq    int
	boxes  map[string]*box
	calls  []string
	faults map[string][]error
}

// Interfaces the fake implements.
var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Grepper  = (*Provider)(nil)
	_ providers.Machine  = (*Provider)(nil)
	_ archive.Symlinker  = (*Provider)(nil)
)

// box is one sandbox.
type box struct {
	seq   int
	info  providers.Info
	env   map[string]string
	files map[string]*entry
	// sessions are the named shell sessions (ExecRequest.Session).
	sessions map[string]*session
	// procs are the background commands since the last start, by pid.
	procs   map[int]*proc
	lastPID int
}

// entry is one path of a virtual filesystem. data is never modified in
// place, so it can be read without holding the lock once taken.
type entry struct {
	mode   fs.FileMode
	data   []byte
	mtime  time.Time
	target string
}

// New returns an empty fake provider.
func New() *Provider {
	return &Provider{now: time.Now, boxes: map[string]*box{}, faults: map[string][]error{}}
}

// FailNext makes the next call of method (as named in the Provider
// interface: "Create", "Exec", "WriteFile", …) return err instead of doing
// anything. Several calls queue several failures.
func (p *Provider) FailNext(method string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[method] = append(p.faults[method], err)
}

// Calls returns the names of the methods called so far, in order. Upload
// and Download are recorded once each; the file operations they use
// internally are not recorded.
func (p *Provider) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// ResetCalls forgets the recorded calls.
func (p *Provider) ResetCalls() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = nil
}

// SetClock replaces the clock (time.Now by default).
func (p *Provider) SetClock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// enter records a call of method and returns an injected failure, if any.
func (p *Provider) enter(method string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, method)
	if q := p.faults[method]; len(q) > 0 {
		p.faults[method] = q[1:]
		return q[0]
	}
	return nil
}

// Name returns "fake".
func (p *Provider) Name() string { return Name }

// Capabilities declares everything but Resources.
func (p *Provider) Capabilities() providers.Capabilities { return capabilities() }

// Create makes a sandbox with an empty /workspace.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	if err := p.enter("Create"); err != nil {
		return providers.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return providers.Info{}, err
	}
	if spec.Resources != (providers.Resources{}) {
		return providers.Info{}, providers.Errorf(providers.ErrUnsupported, Name, "create", "resource limits are not supported")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	now := p.now()
	b := &box{
		seq: p.seq,
		info: providers.Info{
			ID:        "fake-" + strconv.Itoa(p.seq),
			Provider:  Name,
			State:     providers.StateRunning,
			Labels:    maps.Clone(spec.Labels),
			CreatedAt: now,
			Image:     spec.Image,
			Network:   spec.Network,
		},
		env:   maps.Clone(spec.Env),
		files: map[string]*entry{},
	}
	if b.info.Labels == nil {
		b.info.Labels = map[string]string{}
	}
	if spec.TTL > 0 {
		b.info.ExpiresAt = now.Add(spec.TTL)
	}
	for _, d := range []string{"/", "/workspace", "/tmp"} {
		b.files[d] = &entry{mode: fs.ModeDir | 0o755, mtime: now}
	}
	p.boxes[b.info.ID] = b
	return cloneInfo(b.info), nil
}

// Get describes a sandbox.
func (p *Provider) Get(ctx context.Context, id string) (providers.Info, error) {
	if err := p.enter("Get"); err != nil {
		return providers.Info{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "get")
	if err != nil {
		return providers.Info{}, err
	}
	return cloneInfo(b.info), nil
}

// List returns the sandboxes matching filter in creation order.
func (p *Provider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	if err := p.enter("List"); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire()
	var boxes []*box
	for _, b := range p.boxes {
		if filter.Matches(b.info.Labels) {
			boxes = append(boxes, b)
		}
	}
	slices.SortFunc(boxes, func(a, b *box) int { return a.seq - b.seq })
	out := make([]providers.Info, 0, len(boxes))
	for _, b := range boxes {
		out = append(out, cloneInfo(b.info))
	}
	return out, nil
}

// Delete removes a sandbox and its files.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := p.enter("Delete"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.box(id, "delete"); err != nil {
		return err
	}
	p.killAll(p.boxes[id])
	delete(p.boxes, id)
	return nil
}

// box returns a live sandbox. The caller holds p.mu.
func (p *Provider) box(id, op string) (*box, error) {
	p.expire()
	b, ok := p.boxes[id]
	if !ok {
		return nil, providers.Errorf(providers.ErrNotFound, Name, op, "sandbox %q not found", id)
	}
	return b, nil
}

// expire drops sandboxes whose TTL has passed. The caller holds p.mu.
func (p *Provider) expire() {
	now := p.now()
	for id, b := range p.boxes {
		if !b.info.ExpiresAt.IsZero() && !now.Before(b.info.ExpiresAt) {
			delete(p.boxes, id)
		}
	}
}

func cloneInfo(in providers.Info) providers.Info {
	in.Labels = maps.Clone(in.Labels)
	return in
}

// Upload unpacks a tar stream with archive.UploadViaFiles.
func (p *Provider) Upload(ctx context.Context, id, dst string, r io.Reader) error {
	if err := p.enter("Upload"); err != nil {
		return err
	}
	return archive.UploadViaFiles(ctx, quiet{p}, id, dst, r)
}

// Download writes a tar stream with archive.DownloadViaFiles.
func (p *Provider) Download(ctx context.Context, id, src string, w io.Writer) error {
	if err := p.enter("Download"); err != nil {
		return err
	}
	return archive.DownloadViaFiles(ctx, quiet{p}, id, src, w)
}

// notFound builds the error for a missing path.
func notFound(op, p string) error {
	return providers.Errorf(providers.ErrNotFound, Name, op, "%s: no such file or directory", p)
}

// invalid builds an ErrInvalid error.
func invalid(op, format string, args ...any) error {
	return providers.Errorf(providers.ErrInvalid, Name, op, format, args...)
}

// quiet is the provider seen by the archive helpers: the same sandboxes,
// without recording calls or injecting faults.
type quiet struct{ p *Provider }

var _ providers.Provider = quiet{}

func (q quiet) Name() string                         { return Name }
func (q quiet) Capabilities() providers.Capabilities { return capabilities() }
func (q quiet) Create(context.Context, providers.Spec) (providers.Info, error) {
	return providers.Info{}, fmt.Errorf("fake: internal view cannot create: %w", providers.ErrUnsupported)
}
func (q quiet) Get(context.Context, string) (providers.Info, error) {
	return providers.Info{}, fmt.Errorf("fake: internal view cannot get: %w", providers.ErrUnsupported)
}
func (q quiet) List(context.Context, providers.Filter) ([]providers.Info, error) {
	return nil, fmt.Errorf("fake: internal view cannot list: %w", providers.ErrUnsupported)
}
func (q quiet) Delete(context.Context, string) error {
	return fmt.Errorf("fake: internal view cannot delete: %w", providers.ErrUnsupported)
}
func (q quiet) Exec(context.Context, string, providers.ExecRequest) (providers.ExecResult, error) {
	return providers.ExecResult{}, fmt.Errorf("fake: internal view cannot exec: %w", providers.ErrUnsupported)
}
func (q quiet) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return q.p.readFile(ctx, id, path)
}
func (q quiet) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	return q.p.writeFile(ctx, id, path, r, mode)
}
func (q quiet) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	return q.p.stat(ctx, id, path)
}
func (q quiet) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	return q.p.listDir(ctx, id, path, depth)
}
func (q quiet) Mkdir(ctx context.Context, id, path string) error { return q.p.mkdir(ctx, id, path) }
func (q quiet) Remove(ctx context.Context, id, path string, recursive bool) error {
	return q.p.remove(ctx, id, path, recursive)
}
func (q quiet) Rename(ctx context.Context, id, from, to string) error {
	return q.p.rename(ctx, id, from, to)
}
func (q quiet) Upload(context.Context, string, string, io.Reader) error {
	return fmt.Errorf("fake: internal view cannot upload: %w", providers.ErrUnsupported)
}
func (q quiet) Download(context.Context, string, string, io.Writer) error {
	return fmt.Errorf("fake: internal view cannot download: %w", providers.ErrUnsupported)
}
func (q quiet) Symlink(ctx context.Context, id, target, path string) error {
	return q.p.symlink(ctx, id, target, path)
}
