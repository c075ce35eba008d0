package approval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/pmezard/go-difflib/difflib"
	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// GateOptions configures a Gate.
type GateOptions struct {
	// Policy decides requests; nil means the built-in defaults. NewGate
	// copies it, so later changes to it do not affect the Gate.
	Policy *Policy
	// Approver is asked when the policy says ask. Nil means a
	// non-interactive run: ask becomes deny, with a hint naming the flag
	// that would allow the request.
	Approver Approver
	// Audit receives one record per request; nil keeps no log.
	Audit *AuditLog
	// AuditRequired refuses an operation whose audit record cannot be
	// written, instead of running it unaudited. Before an allowed
	// operation runs, a record with Phase "started" is written; when that
	// fails the operation does not run and the call returns an
	// *AuditError. When the record of a finished operation cannot be
	// written, the call returns an *AuditError with Ran set. A denial
	// stays a *DeniedError either way. With no Audit log, every allowed
	// operation is refused.
	AuditRequired bool
	// OnEvent, when set, is called after each decision and after each
	// operation finishes, from the goroutine that made the call (so
	// concurrently when the Gate is used concurrently). For ReadFile the
	// operation is opening the file; the caller's reading is not timed.
	OnEvent func(Event)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Mask hides registered secrets in what the Gate reports: targets,
	// details, reasons, rules and errors in audit records, events and
	// DeniedErrors. Nil masks nothing.
	Mask func(string) string
	// Workdir is the base of relative paths; empty means
	// providers.DefaultWorkdir.
	Workdir string
}

// Gate is the one approval gate: a providers.Provider that decides every
// operation on a sandbox's contents before it reaches the provider it
// wraps. A denied request never reaches that provider, except to learn
// where its paths lead when it implements providers.PathResolver: then
// path rules are decided on the paths as typed and as resolved in the
// sandbox, and the operation runs on the resolved paths following no
// symlink (providers.WithNoFollow). The inner provider is a named field,
// not embedded, so that a method added to providers.Provider does not
// compile until its approval is decided.
//
// A Gate is safe for concurrent use.
type Gate struct {
	inner    providers.Provider
	policy   *Policy
	approver Approver
	audit    *AuditLog
	auditReq bool
	onEvent  func(Event)
	now      func() time.Time
	mask     func(string) string
	workdir  string

	mu       sync.Mutex
	session  []PolicyRule
	exact    map[string]struct{} // fingerprints of calls allowed for the session
	approved map[Source]string   // source → origin of its standing approval
	mode     Mode
}

// Mode is how a Gate treats requests that no deny rule decides, switched
// at run time (the TUI's /mode). A Gate starts in ModeAll when its policy
// has Yes (--yes), else in ModeSession; switching to another mode turns
// --yes off until ModeAll is chosen again.
type Mode string

// Gate modes.
const (
	// ModeAsk asks about every request the policy alone would ask about,
	// and about the user's own operations the built-in default would
	// allow (all but reading and listing): the rules added for the
	// session are kept but not applied.
	ModeAsk Mode = "ask"
	// ModeSession applies the rules added for the session (the default).
	ModeSession Mode = "session"
	// ModeAll allows every request that no deny or ask rule matches, as
	// --yes does.
	ModeAll Mode = "all"
)

// ParseMode parses "ask", "session" or "all".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case ModeAsk, ModeSession, ModeAll:
		return m, nil
	}
	return "", fmt.Errorf("unknown approval mode %q: use ask, session or all", s)
}

// SetMode switches the mode for the requests decided from now on.
func (g *Gate) SetMode(m Mode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = m
}

// Mode returns the current mode.
func (g *Gate) Mode() Mode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.modeLocked()
}

func (g *Gate) modeLocked() Mode {
	switch {
	case g.mode != "":
		return g.mode
	case g.policy.Yes:
		return ModeAll
	}
	return ModeSession
}

// Yes reports whether the policy has --yes (in effect in ModeAll only).
func (g *Gate) Yes() bool { return g.policy.Yes }

// Default returns the policy's default effect and where it was set (a
// policy file's `default:`); both are empty for the built-in default.
func (g *Gate) Default() (Effect, string) { return g.policy.Default, g.policy.DefaultOrigin }

// evaluateOne applies the policy, the session rules and the mode to req
// as it is (see evaluate).
func (g *Gate) evaluateOne(req Request) verdict {
	g.mu.Lock()
	mode, session := g.modeLocked(), slices.Clone(g.session)
	g.mu.Unlock()
	p := g.policy
	if p.Yes && mode != ModeAll {
		// --yes is the "all" mode: another mode turns it off.
		c := *p
		c.Yes = false
		p = &c
	}
	switch mode {
	case ModeAsk:
		// No session rules, and the user's own operations ask too: only
		// reading and listing, and what the policy allows by a rule or
		// --yes, pass.
		v := p.evaluate(req, nil)
		if v.stage == stageDefault && v.effect == Allow && req.Kind != KindRead && req.Kind != KindList {
			v.effect, v.origin = Ask, "/mode ask"
		}
		return v
	case ModeAll:
		if !p.Yes {
			c := *p
			c.Yes = true
			v := c.evaluate(req, session)
			if v.stage == stageYes {
				v.origin, v.by = "/mode all", "user"
			}
			return v
		}
	}
	return p.evaluate(req, session)
}

var (
	_ providers.Provider = (*Gate)(nil)
	_ providers.Grepper  = (*Gate)(nil)
	_ providers.Closer   = (*Gate)(nil)
	_ providers.Machine  = (*Gate)(nil)
)

// NewGate wraps inner. Only the engine calls it, once per sandbox session,
// and it never hands inner out again.
func NewGate(inner providers.Provider, opts GateOptions) *Gate {
	g := &Gate{
		inner:    inner,
		policy:   opts.Policy.Clone(),
		approver: opts.Approver,
		audit:    opts.Audit,
		auditReq: opts.AuditRequired,
		onEvent:  opts.OnEvent,
		now:      opts.Now,
		mask:     opts.Mask,
		workdir:  opts.Workdir,
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.mask == nil {
		g.mask = func(s string) string { return s }
	}
	if g.workdir == "" {
		g.workdir = providers.DefaultWorkdir
	}
	return g
}

// AllowForSession adds an allow rule for the rest of this Gate's life, as
// an approver's "always" answer does. Deny and ask rules still win over it.
func (g *Gate) AllowForSession(rule string) error {
	r, err := ParseRule(rule)
	if err != nil {
		return fmt.Errorf("session rule: %w", err)
	}
	pr := PolicyRule{Rule: r, Origin: "session " + quoteFlagValue(r.String()), By: "session"}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.ContainsFunc(g.session, func(x PolicyRule) bool { return x.Rule.String() == r.String() }) {
		g.session = append(g.session, pr)
	}
	return nil
}

// RevokeSessionRule removes a rule AllowForSession added; it reports
// whether there was one.
func (g *Gate) RevokeSessionRule(rule string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.session)
	g.session = slices.DeleteFunc(g.session, func(x PolicyRule) bool { return x.Rule.String() == rule })
	return len(g.session) < n
}

// AllowExactForSession allows requests identical to req — same source,
// kind, target, argv and details (for a write, the same diff: the same
// content over the same file) — for the rest of this Gate's life, as the
// dialog's "allow this exact call" does. Deny and ask rules still win, and
// ModeAsk ignores it like every session rule.
func (g *Gate) AllowExactForSession(req Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exact == nil {
		g.exact = map[string]struct{}{}
	}
	g.exact[fingerprint(req)] = struct{}{}
}

// exactAllowed reports whether AllowExactForSession allowed req.
func (g *Gate) exactAllowed(req Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.exact[fingerprint(req)]
	return ok && g.modeLocked() != ModeAsk
}

// fingerprint is a hash of everything a request does: its source, kind,
// target, argv and details (so a write's content, through its diff and
// size). Two requests with the same fingerprint do the same thing.
func fingerprint(req Request) string {
	req.Provider = ""
	data, _ := json.Marshal(req)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ApproveSource allows every request from src for the rest of this Gate's
// life, except those an explicit deny rule matches. The engine uses it for
// a setup script named on the command line: naming it approves it. origin
// is what decisions report, e.g. `--sandbox-setup "./setup.sh"`.
func (g *Gate) ApproveSource(src Source, origin string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.approved == nil {
		g.approved = map[Source]string{}
	}
	g.approved[src] = origin
}

func (g *Gate) approvedOrigin(src Source) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.approved[src]
	return o, ok
}

// SessionRules returns the rules added for this session, in order.
func (g *Gate) SessionRules() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(g.session))
	for i, r := range g.session {
		out[i] = r.Rule.String()
	}
	return out
}

func (g *Gate) sessionRules() []PolicyRule {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.session)
}

// ---- lifecycle: not gated ----

// Name passes through: it touches no sandbox.
func (g *Gate) Name() string { return g.inner.Name() }

// Capabilities passes through: it touches no sandbox.
func (g *Gate) Capabilities() providers.Capabilities { return g.inner.Capabilities() }

// Create passes through: creating, listing and deleting sandboxes are
// governed by the command line (the verb and --sandbox-id/--keep), not by
// the approval policy.
func (g *Gate) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	return g.inner.Create(ctx, spec)
}

// Get passes through: see Create.
func (g *Gate) Get(ctx context.Context, id string) (providers.Info, error) {
	return g.inner.Get(ctx, id)
}

// List passes through: see Create.
func (g *Gate) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	return g.inner.List(ctx, filter)
}

// Delete passes through: see Create.
func (g *Gate) Delete(ctx context.Context, id string) error {
	return g.inner.Delete(ctx, id)
}

// Close closes the inner provider when it implements providers.Closer.
func (g *Gate) Close() error {
	if c, ok := g.inner.(providers.Closer); ok {
		return c.Close()
	}
	return nil
}

// ---- machines (providers.Machine) ----

// machine returns the inner provider's providers.Machine, or an error
// matching providers.ErrUnsupported that names the provider.
func (g *Gate) machine(op string) (providers.Machine, error) {
	m, ok := g.inner.(providers.Machine)
	if !ok {
		return nil, providers.Errorf(providers.ErrUnsupported, g.inner.Name(), op,
			"provider %s has no machines: its sandboxes keep no processes running between operations, so they cannot be started, stopped or listed", g.inner.Name())
	}
	return m, nil
}

// CanMachine reports whether the provider's sandboxes are machines
// (providers.Machine): Start, Stop, Processes, Signal and Logs work.
func (g *Gate) CanMachine() bool {
	_, ok := g.inner.(providers.Machine)
	return ok
}

// Start passes through, as Delete does: starting and stopping a sandbox
// are lifecycle operations, governed by the command line, not by the
// approval policy. Without providers.Machine it returns ErrUnsupported.
func (g *Gate) Start(ctx context.Context, id string) error {
	m, err := g.machine("start")
	if err != nil {
		return err
	}
	return m.Start(ctx, id)
}

// Stop passes through: see Start.
func (g *Gate) Stop(ctx context.Context, id string) error {
	m, err := g.machine("stop")
	if err != nil {
		return err
	}
	return m.Stop(ctx, id)
}

// ProcessesTarget is the target of the request that lists a sandbox's
// processes (kind list): path rules see it as the sandbox's /proc.
const ProcessesTarget = "/proc"

// Processes is gated as KindList with target ProcessesTarget.
func (g *Gate) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	m, err := g.machine("ps")
	if err != nil {
		return nil, err
	}
	var out []providers.Process
	err = g.do(ctx, g.request(ctx, KindList, id, ProcessesTarget), func(ctx context.Context) (*int, error) {
		var err error
		out, err = m.Processes(ctx, id)
		return nil, err
	})
	return out, err
}

// SignalArgv is the command a Signal request is decided as: `kill -s
// NAME PID`, NAME without its SIG prefix (TERM, KILL…), or the number of
// a signal without a name.
func SignalArgv(pid int, sig syscall.Signal) []string {
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if name == "" {
		name = strconv.Itoa(int(sig))
	}
	return []string{"kill", "-s", name, strconv.Itoa(pid)}
}

// Signal is gated as KindExec of the argv SignalArgv, so that
// `--allow 'exec:kill *'` allows it and rules on kill apply as they do
// to a kill run with exec.
func (g *Gate) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	m, err := g.machine("kill")
	if err != nil {
		return err
	}
	argv := SignalArgv(pid, sig)
	req := g.request(ctx, KindExec, id, QuoteArgv(argv))
	req.Argv = argv
	req.Details.Dest = ""
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, m.Signal(ctx, id, pid, sig)
	})
}

// LogsTarget is the target of the request that reads the output of the
// background command pid (kind read): path rules see it as that
// process's directory of the sandbox's /proc.
func LogsTarget(pid int) string { return ProcessesTarget + "/" + strconv.Itoa(pid) }

// Logs is gated as KindRead with target LogsTarget(pid). It copies the
// output of a background command into w (following it until it ends when
// follow is set) and returns its exit status once it has ended.
func (g *Gate) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	m, err := g.machine("logs")
	if err != nil {
		return nil, err
	}
	var code *int
	err = g.do(ctx, g.request(ctx, KindRead, id, LogsTarget(pid)), func(ctx context.Context) (*int, error) {
		var err error
		code, err = m.Logs(ctx, id, pid, follow, w)
		return nil, err
	})
	return code, err
}

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

// ReadFile is gated as KindRead.
func (g *Gate) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	p, err := g.clean(path)
	if err != nil {
		return nil, err
	}
	req := g.request(ctx, KindRead, id, p)
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return nil, err
	}
	var rc io.ReadCloser
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		var err error
		rc, err = g.inner.ReadFile(at.ctx(ctx), id, at.target)
		return nil, err
	})
	return rc, err
}

// WriteFile is gated as KindWrite; a diff or size the caller attached with
// WithDetails is shown to the approver.
func (g *Gate) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	p, err := g.clean(path)
	if err != nil {
		return err
	}
	req := g.request(ctx, KindWrite, id, p)
	req.Details.Dest = ""
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, g.inner.WriteFile(at.ctx(ctx), id, at.target, r, mode)
	})
}

// Stat is gated as KindList.
func (g *Gate) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	p, err := g.clean(path)
	if err != nil {
		return providers.FileInfo{}, err
	}
	req := g.request(ctx, KindList, id, p)
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return providers.FileInfo{}, err
	}
	var fi providers.FileInfo
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		var err error
		fi, err = g.inner.Stat(at.ctx(ctx), id, at.target)
		fi.Path = rebase(fi.Path, at.target, p)
		return nil, err
	})
	return fi, err
}

// ListDir is gated as KindList.
func (g *Gate) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	p, err := g.clean(path)
	if err != nil {
		return nil, err
	}
	req := g.request(ctx, KindList, id, p)
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return nil, err
	}
	var out []providers.FileInfo
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		var err error
		out, err = g.inner.ListDir(at.ctx(ctx), id, at.target, depth)
		for i := range out {
			out[i].Path = rebase(out[i].Path, at.target, p)
		}
		return nil, err
	})
	return out, err
}

// Mkdir is gated as KindWrite.
func (g *Gate) Mkdir(ctx context.Context, id, path string) error {
	p, err := g.clean(path)
	if err != nil {
		return err
	}
	req := g.request(ctx, KindWrite, id, p)
	req.Details.Dest = ""
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, g.inner.Mkdir(at.ctx(ctx), id, at.target)
	})
}

// Remove is gated as KindDelete.
func (g *Gate) Remove(ctx context.Context, id, path string, recursive bool) error {
	p, err := g.clean(path)
	if err != nil {
		return err
	}
	req := g.request(ctx, KindDelete, id, p)
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, g.inner.Remove(at.ctx(ctx), id, at.target, recursive)
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
	p, err := g.clean(dst)
	if err != nil {
		return err
	}
	req := g.request(ctx, KindUpload, id, p)
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return err
	}
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, g.inner.Upload(at.ctx(ctx), id, at.target, archive)
	})
}

// Download is gated as KindDownload with Target src.
func (g *Gate) Download(ctx context.Context, id, src string, w io.Writer) error {
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
		return nil, g.inner.Download(at.ctx(ctx), id, at.target, w)
	})
}

// DownloadFile is gated as KindDownload with Target src, as Download is:
// one regular file copied into dst by the provider directly (see
// providers.FileDownloader). Without that copy it returns ErrUnsupported,
// asking nobody; CanDownloadFile tells beforehand.
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

// CanDownloadFile reports whether the provider copies a file into a host
// file directly (DownloadFile).
func (g *Gate) CanDownloadFile() bool {
	_, ok := g.inner.(providers.FileDownloader)
	return ok
}

// UploadFile is gated as KindUpload with Target the directory dst goes
// into, as Upload is: one regular host file copied to dst by the provider
// directly (see providers.FileUploader). Without that copy it returns
// ErrUnsupported, asking nobody; CanUploadFile tells beforehand.
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

// CanUploadFile reports whether the provider copies a host file into a
// sandbox directly (UploadFile).
func (g *Gate) CanUploadFile() bool {
	_, ok := g.inner.(providers.FileUploader)
	return ok
}

// EditResult is the outcome of an Edit.
type EditResult struct {
	// Replacements is how many occurrences were replaced.
	Replacements int `json:"replacements"`
	// Diff is the unified diff that was approved and applied.
	Diff string `json:"diff"`
}

// maxEditSize bounds the files Edit loads into memory.
const maxEditSize = 16 << 20

// Edit replaces old with new in a file, after ONE approval of kind
// KindEdit whose Details.Diff is the unified diff. old must occur exactly
// once, or at least once when all is set: otherwise the error matches
// providers.ErrInvalid and says that the text was not found, or how often
// it occurs. The file keeps its mode. Edit refuses to write when the file
// changed while the approver was deciding.
//
// The file is read before the approver is asked (the diff needs it), but
// only when neither the policy for the edit nor that for reading the file
// already denies.
func (g *Gate) Edit(ctx context.Context, id, path, old, new string, all bool) (EditResult, error) {
	p, err := g.clean(path)
	if err != nil {
		return EditResult{}, err
	}
	if old == "" {
		return EditResult{}, fmt.Errorf("edit %s: the text to replace is empty: %w", p, providers.ErrInvalid)
	}
	if old == new {
		return EditResult{}, fmt.Errorf("edit %s: the old and new text are the same: %w", p, providers.ErrInvalid)
	}
	req := g.request(ctx, KindEdit, id, p)
	req.Details.Dest = ""

	// Decide what can be decided without the diff, so a denied edit never
	// reaches the provider, not even to read: on the path as typed, then
	// on where it leads, for reading (through a final symlink) and for
	// writing (which replaces one).
	readReq := req
	readReq.Kind = KindRead
	if denied, err := g.editDenied(ctx, readReq, req); denied {
		return EditResult{}, err
	}
	readAt, err := g.resolve(ctx, &readReq, followFinal)
	if err != nil {
		return EditResult{}, err
	}
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return EditResult{}, err
	}
	if denied, err := g.editDenied(ctx, readReq, req); denied {
		return EditResult{}, err
	}

	before, err := g.readAll(readAt.ctx(ctx), id, readAt.target)
	if err != nil {
		return EditResult{}, err
	}
	n := strings.Count(before, old)
	switch {
	case n == 0:
		return EditResult{}, fmt.Errorf("edit %s: the text to replace was not found: %w", p, providers.ErrInvalid)
	case n > 1 && !all:
		return EditResult{}, fmt.Errorf("edit %s: the text to replace occurs %d times: add surrounding context to make it unique, or pass --all: %w", p, n, providers.ErrInvalid)
	}
	after := strings.Replace(before, old, new, 1)
	if all {
		after = strings.ReplaceAll(before, old, new)
	} else {
		n = 1
	}
	diff := unifiedDiff(p, before, after)
	req.Details.Diff = diff
	req.Details.Bytes = int64(len(after))

	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		now, err := g.readAll(readAt.ctx(ctx), id, readAt.target)
		if err != nil {
			return nil, err
		}
		if now != before {
			return nil, fmt.Errorf("edit %s: the file changed while waiting for approval; edit again: %w", p, providers.ErrInvalid)
		}
		mode := fs.FileMode(0o644)
		if fi, err := g.inner.Stat(at.ctx(ctx), id, at.target); err == nil && fi.Mode&fs.ModeSymlink == 0 {
			mode = fi.Mode.Perm()
		}
		return nil, g.inner.WriteFile(at.ctx(ctx), id, at.target, strings.NewReader(after), mode)
	})
	if err != nil {
		return EditResult{}, err
	}
	return EditResult{Replacements: n, Diff: diff}, nil
}

// editDenied decides an edit as far as it can be without its diff: a read
// of the file that is denied, or an edit that is denied or that no one can
// be asked about. It returns true with the decision's error when so.
func (g *Gate) editDenied(ctx context.Context, readReq, req Request) (bool, error) {
	if g.evaluate(readReq).effect == Deny {
		_, err := g.decide(ctx, readReq)
		return true, err
	}
	if v := g.evaluate(req); v.effect == Deny || (v.effect == Ask && g.approver == nil) {
		_, err := g.decide(ctx, req)
		return true, err
	}
	return false, nil
}

// readAll reads a whole (bounded) file through the inner provider.
func (g *Gate) readAll(ctx context.Context, id, p string) (string, error) {
	rc, err := g.inner.ReadFile(ctx, id, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxEditSize+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > maxEditSize {
		return "", fmt.Errorf("edit %s: file is larger than %d MiB: %w", p, maxEditSize>>20, providers.ErrInvalid)
	}
	return string(data), nil
}

func unifiedDiff(p, before, after string) string { return UnifiedDiff(p, before, after, false) }

// UnifiedDiff renders before → after as a unified diff of the sandbox path
// p, the one diff of every write and edit an approver is shown: a new
// file (isNew) is `--- /dev/null` / `@@ -0,0 +1,N @@`, and a last line
// without a newline adds no blank line.
func UnifiedDiff(p, before, after string, isNew bool) string {
	from := "a" + p
	if isNew {
		from = "/dev/null"
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        splitLines(before),
		B:        splitLines(after),
		FromFile: from,
		ToFile:   "b" + p,
		Context:  3,
	})
	if err != nil {
		return ""
	}
	return d
}

// splitLines splits text into lines that each end in a newline, without
// inventing an empty last line.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// globDepth is how deep Glob lists below its root.
const globDepth = 64

// Glob lists the paths below root that match a doublestar pattern, after
// one approval of kind KindList (target root). A relative pattern is
// matched against the path relative to root, an absolute one against the
// absolute path. Results are sorted by path.
func (g *Gate) Glob(ctx context.Context, id, root, pattern string) ([]providers.FileInfo, error) {
	r, err := g.clean(root)
	if err != nil {
		return nil, err
	}
	if pattern == "" || !doublestar.ValidatePattern(pattern) {
		return nil, fmt.Errorf("glob: bad pattern %q: %w", pattern, providers.ErrInvalid)
	}
	req := g.request(ctx, KindList, id, r)
	req.Details.Pattern = pattern
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return nil, err
	}
	var out []providers.FileInfo
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		entries, err := g.inner.ListDir(at.ctx(ctx), id, at.target, globDepth)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			e.Path = rebase(e.Path, at.target, r)
			name := e.Path
			if !strings.HasPrefix(pattern, "/") {
				rel, ok := relativeTo(r, e.Path)
				if !ok {
					continue
				}
				name = rel
			}
			if ok, _ := doublestar.Match(pattern, name); ok {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(a, b providers.FileInfo) int { return strings.Compare(a.Path, b.Path) })
		return nil, nil
	})
	return out, err
}

func relativeTo(root, p string) (string, bool) {
	if root == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	rel, ok := strings.CutPrefix(p, root+"/")
	return rel, ok && rel != ""
}

// defaultMaxMatches is the GrepRequest.MaxMatches used when it is zero.
const defaultMaxMatches = 1000

// maxGrepOutput bounds the output of the grep fallback.
const maxGrepOutput = 16 << 20

// Grep searches file contents after one approval of kind KindList (target
// req.Path). It uses the inner provider's providers.Grepper when there is
// one, and otherwise runs `grep -rnHIE` inside the sandbox as argv (no
// shell). At most MaxMatches (default 1000) matches are returned.
func (g *Gate) Grep(ctx context.Context, id string, gr providers.GrepRequest) ([]providers.GrepMatch, error) {
	if gr.Path == "" {
		gr.Path = g.workdir
	}
	p, err := g.clean(gr.Path)
	if err != nil {
		return nil, err
	}
	if gr.Pattern == "" {
		return nil, fmt.Errorf("grep: empty pattern: %w", providers.ErrInvalid)
	}
	gr.Path = p
	if gr.MaxMatches <= 0 {
		gr.MaxMatches = defaultMaxMatches
	}
	req := g.request(ctx, KindList, id, p)
	req.Details.Pattern = gr.Pattern
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return nil, err
	}
	gr.Path = at.target
	var out []providers.GrepMatch
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		var err error
		if gr2, ok := g.inner.(providers.Grepper); ok {
			out, err = gr2.Grep(at.ctx(ctx), id, gr)
		} else {
			// Best effort: grep itself follows the symlinks of its root.
			out, err = g.grepExec(ctx, id, gr)
		}
		if len(out) > gr.MaxMatches {
			out = out[:gr.MaxMatches]
		}
		for i := range out {
			out[i].Path = rebase(out[i].Path, at.target, p)
		}
		return nil, err
	})
	return out, err
}

// grepArgv builds the argv of the grep fallback.
func grepArgv(gr providers.GrepRequest) []string {
	argv := []string{"grep", "-rnHIE"}
	if gr.IgnoreCase {
		argv = append(argv, "-i")
	}
	if gr.Glob != "" {
		argv = append(argv, "--include="+gr.Glob)
	}
	return append(argv, "--", gr.Pattern, gr.Path)
}

func (g *Gate) grepExec(ctx context.Context, id string, gr providers.GrepRequest) ([]providers.GrepMatch, error) {
	stdout := &capWriter{max: maxGrepOutput}
	stderr := &capWriter{max: 4096}
	res, err := g.inner.Exec(ctx, id, providers.ExecRequest{Argv: grepArgv(gr), Cwd: "/", Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("grep: %w", err)
	}
	matches := parseGrep(stdout.buf.String(), gr.MaxMatches)
	switch {
	case res.ExitCode == 0, res.ExitCode == 1 && len(matches) == 0:
		return matches, nil
	case len(matches) > 0:
		// Some files could not be read; the matches found still count.
		return matches, nil
	default:
		msg := strings.TrimSpace(stderr.buf.String())
		if msg == "" {
			msg = "exit status " + strconv.Itoa(res.ExitCode)
		}
		return nil, &providers.Error{Kind: providers.ErrInvalid, Provider: g.inner.Name(), Op: "grep " + gr.Path, Msg: msg}
	}
}

// parseGrep parses `path:line:text` lines, stopping after max matches.
func parseGrep(out string, max int) []providers.GrepMatch {
	var ms []providers.GrepMatch
	for line := range strings.Lines(out) {
		if len(ms) >= max {
			break
		}
		if m, ok := parseGrepLine(strings.TrimSuffix(line, "\n")); ok {
			ms = append(ms, m)
		}
	}
	return ms
}

// parseGrepLine splits at the first ":DIGITS:".
func parseGrepLine(line string) (providers.GrepMatch, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(line) && line[j] >= '0' && line[j] <= '9' {
			j++
		}
		if j > i+1 && j < len(line) && line[j] == ':' {
			n, err := strconv.Atoi(line[i+1 : j])
			if err != nil {
				return providers.GrepMatch{}, false
			}
			return providers.GrepMatch{Path: line[:i], Line: n, Text: line[j+1:]}, true
		}
	}
	return providers.GrepMatch{}, false
}

// capWriter keeps the first max bytes and discards the rest.
type capWriter struct {
	buf bytes.Buffer
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// ---- the decision ----

func (g *Gate) clean(p string) (string, error) {
	return providers.CleanPath(p, g.workdir)
}

// request builds a request from ctx (source and details) and the call.
func (g *Gate) request(ctx context.Context, k Kind, id, target string) Request {
	return Request{
		Source:   SourceFrom(ctx),
		Kind:     k,
		Provider: g.inner.Name(),
		Sandbox:  id,
		Target:   target,
		Details:  DetailsFrom(ctx),
	}
}

// do decides req and, when allowed, runs op and reports its outcome.
// op returns the exit code of an exec, nil for other operations.
func (g *Gate) do(ctx context.Context, req Request, op func(context.Context) (*int, error)) error {
	dec, err := g.decide(ctx, req)
	if err != nil {
		return err
	}
	if g.auditReq {
		if err := g.auditStarted(req, dec); err != nil {
			aerr := &AuditError{Request: g.maskRequest(req), Err: err}
			g.report(EventOperation, req, dec, nil, aerr, 0)
			return aerr
		}
	}
	start := g.now()
	code, opErr := op(ctx)
	werr := g.report(EventOperation, req, dec, code, opErr, g.now().Sub(start))
	if werr != nil && g.auditReq && opErr == nil {
		return &AuditError{Request: g.maskRequest(req), Ran: true, Err: werr}
	}
	return opErr
}

// auditStarted writes the record of an allowed operation about to run,
// for AuditRequired.
func (g *Gate) auditStarted(req Request, dec Decision) error {
	if g.audit == nil {
		return errors.New("no audit log is open")
	}
	mreq, mdec := g.maskRequest(req), g.maskDecision(dec)
	return g.audit.Write(AuditRecord{
		Time: g.now(), Source: mreq.Source, Kind: mreq.Kind, Target: mreq.Target, Dest: mreq.Details.Dest,
		Provider: mreq.Provider, Sandbox: mreq.Sandbox, Background: mreq.Details.Background,
		Resolved: mreq.Details.Resolved, ResolvedDest: mreq.Details.ResolvedDest,
		Decision: string(Allow), By: mdec.By, Rule: mdec.Rule, Reason: mdec.Reason, Phase: "started",
	})
}

// AuditError is an operation refused because its audit record could not
// be written while the audit is required (GateOptions.AuditRequired), or,
// with Ran set, one that ran but whose outcome could not be recorded. The
// CLI exits 1 (error) with it: it is no decision of the policy, and
// freeing the disk, not changing a rule, is what lets the call run.
type AuditError struct {
	// Request is the request, secrets masked.
	Request Request
	// Ran is true when the operation ran and only the record of its
	// outcome is missing.
	Ran bool
	Err error
}

// Error names the operation and why the audit failed.
func (e *AuditError) Error() string {
	if e.Ran {
		return output.Escape(fmt.Sprintf("%s %q ran, but the audit log could not record it, and the audit is required: %v", e.Request.Kind, e.Request.Target, e.Err))
	}
	return output.Escape(fmt.Sprintf("refused %s %q: the audit log cannot be written, and the audit is required: %v", e.Request.Kind, e.Request.Target, e.Err))
}

// Unwrap returns the audit log's error.
func (e *AuditError) Unwrap() error { return e.Err }

// decide returns the decision for req, or a *DeniedError, or ctx.Err()
// when ctx ends while an approver is deciding. Every outcome is reported.
func (g *Gate) decide(ctx context.Context, req Request) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	session := g.sessionRules()
	v, decisive := g.evaluateFor(req)
	if origin, ok := g.approvedOrigin(req.Source); ok && v.effect != Allow && v.stage != stageDeny {
		v = verdict{Allow, origin, "flag", v.stage}
	}
	if v.effect == Ask && v.stage != stageAsk && g.exactAllowed(req) {
		v = verdict{Allow, ExactOrigin, "session", v.stage}
	}
	var dec Decision
	switch {
	case v.effect == Allow:
		dec = Decision{Allow: true, By: v.by, Rule: v.origin}
	case v.effect == Ask && g.approver != nil:
		d, err := g.ask(ctx, req)
		if err != nil {
			g.report(EventDecision, req, Decision{By: "user", Rule: v.origin, Reason: "not answered"}, nil, err, 0)
			return Decision{}, err
		}
		dec = d
		if dec.By == "" {
			dec.By = "user"
		}
		if dec.Allow && dec.SessionExact {
			g.AllowExactForSession(req)
		}
		if dec.Allow {
			for _, r := range append([]string{dec.SessionRule}, dec.SessionRules...) {
				if r != "" {
					// An invalid rule from an approver only loses the
					// "always": this call was still allowed.
					_ = g.AllowForSession(r)
				}
			}
		}
	case v.effect == Ask:
		dec = Decision{By: v.by, Rule: v.origin, Reason: "approval required, and no one can be asked in a non-interactive run"}
	default:
		dec = Decision{By: v.by, Rule: v.origin}
	}
	if dec.Allow {
		g.report(EventDecision, req, dec, nil, nil, 0)
		return dec, nil
	}
	denied := &DeniedError{
		Request:  g.maskRequest(req),
		Decision: g.maskDecision(dec),
		Hint:     g.mask(g.policy.hint(decisive, session)),
	}
	g.report(EventDecision, req, dec, nil, nil, 0)
	return dec, denied
}

// ask runs the approver, returning early with ctx.Err() when ctx ends.
func (g *Gate) ask(ctx context.Context, req Request) (Decision, error) {
	type answer struct {
		d   Decision
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		d, err := g.approver.Approve(ctx, req)
		ch <- answer{d, err}
	}()
	select {
	case a := <-ch:
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		if a.err != nil {
			return Decision{}, fmt.Errorf("approval: %w", a.err)
		}
		return a.d, nil
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// report sends an event and, for a finished operation or a denial, writes
// the audit record; it returns the audit log's error.
func (g *Gate) report(typ string, req Request, dec Decision, code *int, err error, d time.Duration) error {
	now := g.now()
	mreq, mdec := g.maskRequest(req), g.maskDecision(dec)
	errText := ""
	if err != nil {
		errText = g.mask(err.Error())
	}
	if g.onEvent != nil {
		g.onEvent(Event{
			Type: typ, Time: now, Request: mreq, Decision: mdec,
			ExitCode: code, Error: errText, Duration: d, DurationMS: d.Milliseconds(),
		})
	}
	// One audit record per request: when it ran, or when it did not.
	if typ == EventDecision && dec.Allow {
		return nil
	}
	effect := string(Deny)
	if dec.Allow {
		effect = string(Allow)
	}
	return g.audit.Write(AuditRecord{
		Time: now, Source: mreq.Source, Kind: mreq.Kind, Target: mreq.Target, Dest: mreq.Details.Dest,
		Provider: mreq.Provider, Sandbox: mreq.Sandbox, Background: mreq.Details.Background,
		Resolved: mreq.Details.Resolved, ResolvedDest: mreq.Details.ResolvedDest,
		Decision: effect, By: mdec.By, Rule: mdec.Rule, Reason: mdec.Reason,
		ExitCode: code, Error: errText, DurationMS: d.Milliseconds(),
	})
}

func (g *Gate) maskRequest(r Request) Request {
	r.Target = g.mask(r.Target)
	if r.Argv != nil {
		argv := make([]string, len(r.Argv))
		for i, a := range r.Argv {
			argv[i] = g.mask(a)
		}
		r.Argv = argv
	}
	d := r.Details
	d.Cwd, d.User, d.Diff, d.Dest, d.Pattern, d.From = g.mask(d.Cwd), g.mask(d.User), g.mask(d.Diff), g.mask(d.Dest), g.mask(d.Pattern), g.mask(d.From)
	d.Resolved, d.ResolvedDest = g.mask(d.Resolved), g.mask(d.ResolvedDest)
	if d.Files != nil {
		files := slices.Clone(d.Files)
		for i := range files {
			files[i].Path = g.mask(files[i].Path)
		}
		d.Files = files
	}
	r.Details = d
	return r
}

func (g *Gate) maskDecision(d Decision) Decision {
	d.Rule, d.Reason, d.SessionRule = g.mask(d.Rule), g.mask(d.Reason), g.mask(d.SessionRule)
	if d.SessionRules != nil {
		rules := make([]string, len(d.SessionRules))
		for i, r := range d.SessionRules {
			rules[i] = g.mask(r)
		}
		d.SessionRules = rules
	}
	return d
}

// IsDenied reports whether err is (or wraps) a *DeniedError.
func IsDenied(err error) bool {
	var d *DeniedError
	return errors.As(err, &d)
}
