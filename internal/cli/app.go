package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/config"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/interactive"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/internal/procs"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/setup"
)

// App holds what every command shares. Cheap values are resolved before
// every command (init); the policy, the audit log and the engine are built
// on first use (Engine), so a verb that needs none of them (version,
// providers, completion) runs whatever the state directory.
type App struct {
	deps    Deps
	streams Streams
	flags   globalFlags
	// args are the program's arguments, for a hand-over (Deps.Handoff).
	args []string

	env        *config.Env
	dirs       config.Dirs
	sandboxEnv map[string]string
	masker     *config.Masker
	// defaultProvider is the provider of the config file or
	// $SANDBOX_PROVIDER.
	defaultProvider string
	// cmd is the command being run.
	cmd *cobra.Command

	// Built by Engine.
	policy *approval.Policy
	audit  *approval.AuditLog
	engine *engine.Engine

	// events prints --json events as JSON Lines on stdout, masked.
	events *output.Lines
	// stream is the --json event stream of this run when the verb prints
	// one (not a document); nil otherwise.
	stream *eventStream
	// bridge is the TUI's approver and event sink when bare `sandbox`
	// opens the TUI; nil otherwise.
	bridge interactive.Bridge
}

// armInterrupts makes SIGINT and SIGTERM cancel the root context, at once
// or after a while (Deps.ArmInterrupts).
func (a *App) armInterrupts(after time.Duration) {
	if a.deps.ArmInterrupts != nil {
		a.deps.ArmInterrupts(after)
	}
}

// init runs before every command: it resolves the configuration and checks
// the flags, without touching the state directory. Errors in flags and
// files are usage errors (exit 2).
func (a *App) init(cmd *cobra.Command) error {
	a.cmd = cmd
	if cmd.Annotations[allCPUs] == "true" {
		procs.Default()
	}
	if cmd.Annotations[lateInterrupts] != "true" {
		a.armInterrupts(0)
	}
	wd, err := a.deps.Getwd()
	if err != nil {
		return err
	}
	dot, err := config.LoadDotEnv(filepath.Join(wd, ".env"))
	switch {
	case errors.Is(err, fs.ErrPermission):
		// The .env of a directory the user passes through is not
		// theirs to read; only --env-file is a file they named.
		fmt.Fprintf(a.streams.Err, "sandbox: warning: %v; it is ignored\n", err)
		dot = map[string]string{}
	case err != nil:
		return &UsageError{Err: err}
	}
	a.env = config.NewEnv(a.deps.Getenv, dot)
	warnDotEnv(a.streams.Err, a.env.Ignored())
	if a.dirs, err = config.ResolveDirs(a.env); err != nil {
		return err
	}
	file, err := config.LoadFile(a.dirs.Config)
	if err != nil {
		return &UsageError{Err: err}
	}
	if a.sandboxEnv, err = config.SandboxEnv(a.env, a.flags.envFiles, a.flags.env); err != nil {
		return &UsageError{Err: err}
	}
	secrets := config.SecretsOf(a.sandboxEnv)
	for _, reg := range a.deps.Registry.All() {
		for _, k := range reg.Env {
			if k.Secret {
				secrets = append(secrets, a.env.Get(k.Name))
			}
		}
	}
	a.masker = config.NewMasker(secrets...)
	// Event values are masked before they are encoded; masking the encoded
	// line as well, in the form a secret takes inside JSON, is a second
	// line of defence.
	a.events = output.NewLines(a.streams.Out, a.masker.JSON)
	if a.flags.json && printsEvents(cmd) {
		a.stream = newEventStream(a.events, engine.NewRunID())
	}

	if a.flags.network != "" && a.flags.network != "on" && a.flags.network != "off" {
		return &UsageError{Err: fmt.Errorf("--network must be on or off, not %q", a.flags.network)}
	}
	a.defaultProvider = file.Provider
	if v := a.env.Get("SANDBOX_PROVIDER"); v != "" && a.defaultProvider == "" {
		a.defaultProvider = v
	}
	if a.flags.provider != "" {
		if _, err := a.deps.Registry.Lookup(a.flags.provider); err != nil {
			return &UsageError{Err: err}
		}
	}
	if cmd == cmd.Root() && a.tuiTerminal() {
		if a.deps.TUI == nil {
			return a.handOverTUI()
		}
		a.bridge = a.deps.TUI.NewBridge(a.streams.Err)
	}
	return nil
}

// Engine returns the engine, building it on first use with the policy and
// the audit log it needs.
func (a *App) Engine() (*engine.Engine, error) {
	if a.engine != nil {
		return a.engine, nil
	}
	if err := a.buildPolicy(); err != nil {
		return nil, err
	}
	audit, err := approval.OpenAudit(filepath.Join(a.dirs.State, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	a.audit = audit
	opts := engine.Options{
		Audit:           a.audit,
		AuditRequired:   a.flags.auditRequired,
		MaskWriter:      a.masker.Writer,
		Registry:        a.deps.Registry,
		Getenv:          a.env.Getenv,
		StateDir:        a.dirs.State,
		DefaultProvider: a.defaultProvider,
		Policy:          a.policy,
		Approver:        a.approver(),
		Mask:            a.masker.String,
		Progress:        a.streams.Err,
	}
	opts.Handoff = a.handoff()
	if a.stream != nil {
		opts.RunID = a.stream.runID
		opts.Events = a.stream.engineEvent
	}
	if a.bridge != nil {
		// The TUI asks in its dialog and shows progress in its scrollback.
		opts.Approver = a.bridge
		opts.Events = a.bridge.Event
		opts.Progress = a.bridge.Progress()
	}
	a.engine = engine.New(opts)
	return a.engine, nil
}

// warnDotEnv says, one line each, which variables of the .env file were
// ignored (see config.ClassifyDotEnv). A name is printed escaped, as it
// comes from a file the user may not have written.
func warnDotEnv(w io.Writer, ignored []string) {
	for _, name := range ignored {
		q := strconv.QuoteToASCII(name)
		fmt.Fprintf(w, "sandbox: warning: ignored %s from .env: a .env file supplies only sandbox values and provider credentials and endpoints; isolation switches and host paths come only from the real environment or flags\n", q[1:len(q)-1])
	}
}

// buildPolicy merges the policy file, --allow, --deny and --yes.
func (a *App) buildPolicy() error {
	p := &approval.Policy{}
	if a.flags.policy != "" {
		lp, err := approval.LoadPolicy(a.flags.policy)
		if err != nil {
			return &UsageError{Err: err}
		}
		p = lp
	}
	for _, r := range a.flags.allow {
		if err := p.AddAllow(r, fmt.Sprintf("--allow %q", r)); err != nil {
			return &UsageError{Err: fmt.Errorf("--allow: %w", err)}
		}
	}
	for _, r := range a.flags.deny {
		if err := p.AddDeny(r, fmt.Sprintf("--deny %q", r)); err != nil {
			return &UsageError{Err: fmt.Errorf("--deny: %w", err)}
		}
	}
	if a.flags.yes {
		p.Yes = true
	}
	a.policy = p
	return nil
}

// interactive reports whether a person can answer prompts.
func (a *App) interactive() bool {
	return a.streams.InTTY && a.streams.ErrTTY && !a.flags.json
}

// approver is the line prompt on a terminal, else nil (ask becomes deny).
func (a *App) approver() approval.Approver {
	if !a.interactive() {
		return nil
	}
	return approval.NewPrompt(a.streams.In, a.streams.Err)
}

// openOptions turns the global flags into engine options.
func (a *App) openOptions() (engine.OpenOptions, error) {
	g := a.flags
	o := engine.OpenOptions{
		Provider:     g.provider,
		ID:           g.sandboxID,
		Env:          a.sandboxEnv,
		User:         g.user,
		Keep:         g.keep,
		SetupTimeout: g.setupTimeout,
		SetupOutput:  a.masker.Writer(a.streams.Err),
		Spec: providers.Spec{
			Env:      maps.Clone(a.sandboxEnv),
			TTL:      g.ttl,
			Network:  providers.Network(g.network),
			AutoStop: g.autoStop.spec(),
			User:     g.user,
			Image:    g.image,
		},
	}
	res, err := a.resources()
	if err != nil {
		return o, err
	}
	o.Spec.Resources = res
	if g.sandboxID != "" && len(g.labels) > 0 {
		return o, &UsageError{Err: errors.New("--sandbox-id and --sandbox-label cannot be used together")}
	}
	if len(g.labels) > 0 {
		labels, err := parseLabels(g.labels)
		if err != nil {
			return o, err
		}
		o.Label = labels
	}
	if g.setup != "" {
		s, err := setup.Load(g.setup)
		if err != nil {
			return o, &UsageError{Err: err}
		}
		o.Setup = s
	}
	return o, nil
}

// resources turns --cpus, --memory, --disk and --pids into limits.
func (a *App) resources() (providers.Resources, error) {
	g := a.flags
	if g.cpus < 0 || g.pids < 0 {
		return providers.Resources{}, &UsageError{Err: errors.New("--cpus and --pids must not be negative")}
	}
	res := providers.Resources{CPUs: g.cpus, Pids: g.pids}
	for _, s := range []struct {
		flag, val string
		dst       *int
	}{{"--memory", g.memory, &res.MemoryMB}, {"--disk", g.disk, &res.DiskMB}} {
		if s.val == "" {
			continue
		}
		mb, err := parseSizeMB(s.flag, s.val)
		if err != nil {
			return res, &UsageError{Err: err}
		}
		*s.dst = mb
	}
	return res, nil
}

// parseSizeMB reads the size given to flag in MiB: a plain number, or one
// ending in k, m, g or t (binary units; a trailing "b" or "ib" is allowed).
func parseSizeMB(flag, s string) (int, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	v = strings.TrimSuffix(strings.TrimSuffix(v, "b"), "i")
	mult := 1.0
	switch {
	case strings.HasSuffix(v, "k"):
		mult, v = 1.0/1024, strings.TrimSuffix(v, "k")
	case strings.HasSuffix(v, "m"):
		v = strings.TrimSuffix(v, "m")
	case strings.HasSuffix(v, "g"):
		mult, v = 1024, strings.TrimSuffix(v, "g")
	case strings.HasSuffix(v, "t"):
		mult, v = 1<<20, strings.TrimSuffix(v, "t")
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 || n*mult < 1 || n*mult > 1<<30 {
		return 0, fmt.Errorf("%s %q: want a size such as 512m, 2g or a number of MiB (at least 1 MiB)", flag, s)
	}
	return int(n * mult), nil
}

func parseLabels(in []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range in {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, &UsageError{Err: fmt.Errorf("label %q must look like key=value", l)}
		}
		out[k] = v
	}
	return out, nil
}

// withSession opens the sandbox named by the global flags (or a fresh one),
// runs fn, and closes it: a sandbox this run created is deleted, also when
// fn fails or the run is interrupted.
func (a *App) withSession(cmd *cobra.Command, fn func(ctx context.Context, s *engine.Session) error) error {
	return a.withOptions(cmd, nil, fn)
}

// withOptions is withSession with the open options changed by adjust
// (when not nil) first.
func (a *App) withOptions(cmd *cobra.Command, adjust func(*engine.OpenOptions), fn func(ctx context.Context, s *engine.Session) error) error {
	ctx := cmd.Context()
	o, err := a.openOptions()
	if err != nil {
		return err
	}
	if adjust != nil {
		adjust(&o)
	}
	s, err := a.open(ctx, o)
	if err != nil {
		return err
	}
	ferr := fn(ctx, s)
	if note := s.Note(); note != "" {
		fmt.Fprintf(a.streams.Err, "sandbox: note: %s\n", output.Escape(note))
	}
	if cerr := s.Close(ctx); cerr != nil && ferr == nil {
		ferr = cerr
	}
	return ferr
}

// open opens a session and flushes the masked setup output afterwards.
func (a *App) open(ctx context.Context, o engine.OpenOptions) (*engine.Session, error) {
	eng, err := a.Engine()
	if err != nil {
		return nil, err
	}
	s, err := eng.Open(ctx, o)
	if c, ok := o.SetupOutput.(io.Closer); ok {
		c.Close() // flush what the masker held back
	}
	if err == nil {
		warnIsolation(a.streams.Err, s.Info())
	}
	return s, err
}

// warnIsolation labels a sandbox that runs with weaker isolation than its
// provider normally gives, on every use.
func warnIsolation(w io.Writer, info providers.Info) {
	if info.Isolation != "" {
		id := output.Escape(info.ID)
		fmt.Fprintf(w, "sandbox: warning: %s runs with %s isolation (see `sandbox info %s`)\n", id, output.Escape(strings.ToUpper(info.Isolation)), id)
	}
}

// withCall is withSession for one call on the sandbox, bounded by
// --timeout: fn's error is the call's, a deadline of --timeout turned
// into a timeout error.
func (a *App) withCall(cmd *cobra.Command, fn func(ctx context.Context, s *engine.Session) error) error {
	return a.withSession(cmd, func(ctx context.Context, s *engine.Session) error {
		return a.call(ctx, func(ctx context.Context) error { return fn(ctx, s) })
	})
}

// call runs fn bounded by --timeout; a deadline of --timeout becomes a
// timeout error.
func (a *App) call(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := engine.WithCallTimeout(ctx, a.flags.timeout, fmt.Sprintf("--timeout %s", a.flags.timeout))
	defer cancel()
	return engine.CallError(ctx, fn(ctx))
}
