package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/setup"
)

// Session is one sandbox in use by this run.
type Session struct {
	engine   *Engine
	provider providers.Provider
	gate     *approval.Gate
	info     providers.Info
	env      map[string]string
	user     string
	created  bool
	keep     bool

	closeOnce sync.Once
	closeErr  error
}

// Info describes the sandbox.
func (s *Session) Info() providers.Info { return s.info }

// ID is the sandbox id.
func (s *Session) ID() string { return s.info.ID }

// EndsWithCaller reports that the provider ends a foreground command
// whose caller goes away (providers.Capabilities.EndsWithCaller).
func (s *Session) EndsWithCaller() bool { return s.provider.Capabilities().EndsWithCaller }

// Gate is the only way to operate on the sandbox.
func (s *Session) Gate() *approval.Gate { return s.gate }

// Created reports whether this run created the sandbox.
func (s *Session) Created() bool { return s.created }

// SetKeep decides whether Close keeps a sandbox this run created (the
// TUI's quit prompt); it must not be called concurrently with Close.
func (s *Session) SetKeep(keep bool) { s.keep = keep }

// Keep reports whether Close keeps a sandbox this run created.
func (s *Session) Keep() bool { return s.keep }

// ReattachCommand is the command line that reopens this sandbox.
func (s *Session) ReattachCommand() string {
	return ReattachCommand(s.info.Provider, s.info.ID)
}

// ReattachCommand is the command line that reopens sandbox id.
func ReattachCommand(provider, id string) string {
	cmd := "sandbox --sandbox-id " + id
	if provider != "" && provider != "local" {
		cmd = "sandbox --sandbox " + provider + " --sandbox-id " + id
	}
	return cmd
}

func (s *Session) create(ctx context.Context, name string, spec providers.Spec) error {
	e := s.engine
	spec.Labels = mergeLabels(spec.Labels, map[string]string{RunLabel: e.runID})
	fmt.Fprintf(e.opts.Progress, "creating %s %s sandbox…\n", article(name), name)
	info, err := s.provider.Create(ctx, spec)
	if err != nil {
		// The provider may have created it before the error (an interrupt
		// during a slow create): find it by the run label and delete it.
		e.sweepRun(ctx, s.provider)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, providers.ErrAuth) {
			return err
		}
		return &CreateError{Provider: name, Err: err}
	}
	s.info = info
	s.created = true
	rec := Record{ID: info.ID, Provider: name, Labels: info.Labels, CreatedAt: info.CreatedAt}
	if spec.TTL > 0 {
		rec.ExpiresAt = info.CreatedAt.Add(spec.TTL)
		if info.ExpiresAt.IsZero() {
			s.info.ExpiresAt = rec.ExpiresAt
		}
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = e.opts.Now()
	}
	if err := e.store.Put(rec); err != nil {
		s.closeWith(ctx, err)
		return err
	}
	e.emit(Event{Type: "lifecycle", Action: "created", Sandbox: &s.info})
	if ctx.Err() != nil {
		s.closeWith(ctx, ctx.Err())
		return ctx.Err()
	}
	return nil
}

// sweepRun deletes sandboxes carrying this run's label.
func (e *Engine) sweepRun(ctx context.Context, p providers.Provider) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	found, err := p.List(cctx, providers.Filter{Labels: map[string]string{RunLabel: e.runID}})
	if err != nil {
		return
	}
	for _, info := range found {
		if p.Delete(cctx, info.ID) == nil {
			e.store.Remove(info.ID)
			e.emit(Event{Type: "lifecycle", Action: "deleted", Sandbox: &info})
		}
	}
}

func (s *Session) runSetup(ctx context.Context, o OpenOptions) error {
	e := s.engine
	script := o.Setup
	// Naming a script on the command line approves it.
	s.gate.ApproveSource(approval.SourceSetup, fmt.Sprintf("--sandbox-setup %q", script.Path))
	e.emit(Event{Type: "setup", Action: "started"})
	out := o.SetupOutput
	closeEvents := func() error { return nil }
	if e.opts.Events != nil {
		// Masked in the raw bytes, before an event is encoded: a secret
		// split across two writes, or one holding characters JSON escapes,
		// is caught too.
		current := &events.CurrentCall{}
		ctx = approval.WithCallObserver(ctx, current.Set)
		w := s.setupEvents(current)
		closeEvents = w.Close
		out = multiWriter(out, w)
	}
	network := o.Spec.Network
	if network == providers.NetworkDefault && s.provider.Capabilities().Network {
		network = providers.NetworkOn
	}
	sctx := approval.WithSource(ctx, approval.SourceSetup)
	res, err := setup.Run(sctx, s.gate, s.info.ID, script, setup.Options{
		Env: s.env, Timeout: o.SetupTimeout, Output: out, Network: network,
	})
	closeEvents() // the output held back comes before the outcome
	if err != nil {
		code := res.ExitCode
		msg := err.Error()
		if e.opts.Mask != nil {
			msg = e.opts.Mask(msg)
		}
		e.emit(Event{Type: "setup", Action: "failed", ExitCode: &code, Error: msg})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &SetupError{Err: err}
	}
	if res.Skipped {
		fmt.Fprintf(e.opts.Progress, "setup %s already ran in %s; skipped\n", output.Escape(script.Path), output.Escape(s.info.ID))
		e.emit(Event{Type: "setup", Action: "skipped"})
	} else {
		e.emit(Event{Type: "setup", Action: "succeeded"})
	}
	return nil
}

// SetupError is a failed setup script (exit 125).
type SetupError struct{ Err error }

// Error is the setup failure with the output's tail.
func (e *SetupError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *SetupError) Unwrap() error { return e.Err }

// Close ends the session: a sandbox this run created is deleted unless kept,
// in which case the reattach command is printed to Progress. It is safe to
// call more than once and works after ctx was cancelled.
func (s *Session) Close(ctx context.Context) error {
	s.closeWith(ctx, nil)
	return s.closeErr
}

func (s *Session) closeWith(ctx context.Context, cause error) {
	s.closeOnce.Do(func() {
		e := s.engine
		if !s.created {
			return
		}
		if s.keep && cause == nil {
			cmd := s.ReattachCommand()
			fmt.Fprintf(e.opts.Progress, "kept sandbox %s; reattach with: %s\n", output.Escape(s.info.ID), output.Escape(cmd))
			e.emit(Event{Type: "lifecycle", Action: "kept", Sandbox: &s.info, Reattach: cmd})
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		err := s.provider.Delete(cctx, s.info.ID)
		if err != nil && !errors.Is(err, providers.ErrNotFound) {
			s.closeErr = fmt.Errorf("delete sandbox %s: %w (delete it with `sandbox delete %s`)", s.info.ID, err, s.info.ID)
			return
		}
		e.store.Remove(s.info.ID)
		e.emit(Event{Type: "lifecycle", Action: "deleted", Sandbox: &s.info})
	})
}

// Delete destroys a sandbox by id (provider resolved as ResolveProvider)
// and forgets it.
func (e *Engine) Delete(ctx context.Context, provider, id string) error {
	name, err := e.ResolveProvider(provider, id)
	if err != nil {
		return err
	}
	p, err := e.provider(name)
	if err != nil {
		return err
	}
	if err := p.Delete(ctx, id); err != nil {
		if errors.Is(err, providers.ErrNotFound) {
			e.store.Remove(id)
			return &NotFoundError{ID: id, Provider: name, Err: err}
		}
		return err
	}
	return e.store.Remove(id)
}

// Get describes a sandbox by id.
func (e *Engine) Get(ctx context.Context, provider, id string) (providers.Info, error) {
	name, err := e.ResolveProvider(provider, id)
	if err != nil {
		return providers.Info{}, err
	}
	p, err := e.provider(name)
	if err != nil {
		return providers.Info{}, err
	}
	info, err := p.Get(ctx, id)
	if errors.Is(err, providers.ErrNotFound) {
		return info, &NotFoundError{ID: id, Provider: name, Err: err}
	}
	if err != nil {
		return info, err
	}
	return e.annotate(info), nil
}

// List lists the sandboxes of one provider that match filter.
func (e *Engine) List(ctx context.Context, provider string, filter providers.Filter) ([]providers.Info, error) {
	name, err := e.ResolveProvider(provider, "")
	if err != nil {
		return nil, err
	}
	p, err := e.provider(name)
	if err != nil {
		return nil, err
	}
	infos, err := p.List(ctx, filter)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i] = e.annotate(infos[i])
	}
	return infos, nil
}

// annotate fills the deadline the registry knows about.
func (e *Engine) annotate(info providers.Info) providers.Info {
	if rec, ok, _ := e.store.Get(info.ID); ok && info.ExpiresAt.IsZero() {
		info.ExpiresAt = rec.ExpiresAt
	}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	return info
}

// DeleteExpired deletes every recorded sandbox whose --ttl has passed and
// returns the ids deleted. Sandboxes already gone are forgotten.
func (e *Engine) DeleteExpired(ctx context.Context) ([]string, error) {
	recs, err := e.store.All()
	if err != nil {
		return nil, err
	}
	now := e.opts.Now()
	var deleted []string
	var errs []error
	for _, r := range recs {
		if !expired(r, now) {
			continue
		}
		err := e.Delete(ctx, r.Provider, r.ID)
		var nf *NotFoundError
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, r.ID)
	}
	return deleted, errors.Join(errs...)
}

// deleteExpired deletes the recorded sandboxes of provider whose --ttl has
// passed and returns when each had expired, by id. Failures are left for
// the next run (or `sandbox delete --expired`) to report.
func (e *Engine) deleteExpired(ctx context.Context, provider string, recs []Record) map[string]time.Time {
	now := e.opts.Now()
	gone := map[string]time.Time{}
	for _, r := range recs {
		if r.Provider != provider || !expired(r, now) {
			continue
		}
		err := e.Delete(ctx, r.Provider, r.ID)
		var nf *NotFoundError
		if err == nil || errors.As(err, &nf) {
			gone[r.ID] = r.ExpiresAt
			e.emit(Event{Type: "lifecycle", Action: "deleted", Sandbox: &providers.Info{ID: r.ID, Provider: r.Provider}})
		}
	}
	return gone
}

// setupEvents returns the writer that turns setup output into events of
// the call current is at: masked by Options.MaskWriter, then cut into
// chunks that do not split a UTF-8 character. Close flushes both.
func (s *Session) setupEvents(current *events.CurrentCall) io.WriteCloser {
	e := s.engine
	return events.OutputWriter(events.OutputOptions{
		Stream: "stdout", CallID: current.ID, Now: e.opts.Now, MaskWriter: e.opts.MaskWriter,
		Emit: func(ev events.Event) {
			e.emit(Event{Type: "setup", Action: "output", CallID: ev.CallID, Output: ev.Data, OutputB64: ev.DataB64})
		},
	})
}

func multiWriter(a io.Writer, b io.Writer) io.Writer {
	if a == nil {
		return b
	}
	return io.MultiWriter(a, b)
}

// expired reports whether a record's TTL has passed at now.
func expired(r Record, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now)
}

// Note returns, once, what the provider has to tell about the session's
// sandbox beyond the results of its operations (providers.Noter): that
// its machine had died and was started again, say. "" when nothing.
func (s *Session) Note() string {
	if n, ok := s.provider.(providers.Noter); ok && s.info.ID != "" {
		return n.TakeNote(s.info.ID)
	}
	return ""
}

// article is the indefinite article before word: "an e2b sandbox".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
