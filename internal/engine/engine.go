// Package engine is the core of the tool: it resolves providers by name,
// owns the lifecycle of sandboxes (create → setup → use → cleanup, reuse by id
// or label, TTL bookkeeping), and wraps every provider in the approval gate.
//
// Nothing exported from this package hands out an ungated provider: commands
// and the TUI reach sandbox contents only through Session.Gate.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/setup"
)

// RunLabel is the label every created sandbox carries with the id of the run
// that created it, so a create interrupted half-way can still be found and
// deleted.
const RunLabel = "sandbox-run"

// cleanupTimeout bounds deleting a sandbox after the run's context is gone.
const cleanupTimeout = 60 * time.Second

// Options configure an Engine.
type Options struct {
	Registry *providers.Registry
	// Getenv resolves provider credentials (real environment over .env).
	Getenv func(string) (string, bool)
	// StateDir is $XDG_STATE_HOME/sandbox.
	StateDir string
	// DefaultProvider is used when no provider is named.
	DefaultProvider string
	// Policy, Approver, Audit, AuditRequired and Mask configure the gate
	// of every session (see approval.GateOptions).
	Policy        *approval.Policy
	Approver      approval.Approver
	Audit         *approval.AuditLog
	AuditRequired bool
	Mask          func(string) string
	// MaskWriter wraps a writer so that secrets are masked in the bytes
	// written to it, also when one is split across writes; Close flushes.
	// It masks setup output before it becomes an Event. Nil masks nothing.
	MaskWriter func(io.Writer) io.WriteCloser
	// Events receives lifecycle, setup and gate events (for --json and the
	// TUI); may be nil. It is called from the goroutine doing the work.
	Events func(Event)
	// Progress receives human-readable progress lines (stderr); may be nil.
	Progress io.Writer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RunID is the id of this run (NewRunID); empty means a new one.
	RunID string
	// Handoff replaces this process with the named program of the same
	// release, run as this one was, for a provider built into that
	// program only (providers.Registration.Program); it returns only
	// when it could not. Nil: such a provider cannot be used here.
	Handoff func(program string) error
}

// NewRunID returns a new run id: 12 random hex digits. It names a run in
// the audit log and events, where it must not repeat but need not be
// unguessable: the runtime's generator (seeded by the system at start)
// serves, where crypto/rand's first use in a process (its DRBG's set-up)
// was a hundredth of a cold `sandbox exec`.
func NewRunID() string {
	return fmt.Sprintf("%012x", rand.Uint64()&(1<<48-1))
}

// Engine creates and finds sandboxes. It is safe for concurrent use.
type Engine struct {
	opts  Options
	store *Store
	runID string
	// callIDs numbers the calls of every gate of the run as one sequence.
	callIDs func() string

	mu        sync.Mutex
	providers map[string]providers.Provider
}

// New returns an engine.
func New(opts Options) *Engine {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Policy == nil {
		opts.Policy = &approval.Policy{}
	}
	if opts.RunID == "" {
		opts.RunID = NewRunID()
	}
	return &Engine{
		opts:      opts,
		store:     NewStore(opts.StateDir),
		runID:     opts.RunID,
		callIDs:   approval.CallIDs(),
		providers: map[string]providers.Provider{},
	}
}

// RunID is the id of this run: in run.started, and the label
// (RunLabel) of the sandboxes it creates.
func (e *Engine) RunID() string { return e.runID }

// Store exposes the registry of created sandboxes.
func (e *Engine) Store() *Store { return e.store }

// Config is the configuration handed to provider constructors.
func (e *Engine) Config() providers.Config {
	return providers.Config{Getenv: e.opts.Getenv, StateDir: e.opts.StateDir}
}

// provider builds (once) the named provider.
func (e *Engine) provider(name string) (providers.Provider, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.providers[name]; ok {
		return p, nil
	}
	reg, err := e.opts.Registry.Lookup(name)
	if err != nil {
		return nil, err
	}
	if reg.Program != "" {
		return nil, e.handOver(reg)
	}
	p, err := reg.New(e.Config())
	if err != nil {
		if !strings.HasPrefix(err.Error(), name+":") {
			err = fmt.Errorf("%s: %w", name, err)
		}
		if errors.Is(err, providers.ErrUnavailable) {
			// Not here at all (local sandboxes outside Linux).
			err = &UnavailableError{Provider: name, Err: err}
		}
		return nil, err
	}
	e.providers[name] = p
	return p, nil
}

// HandOver hands the run to the program that has the named provider built
// in when this one has it not (see Options.Handoff), before the run has
// done anything: the TUI and serve call it before they start. It returns
// nil when the provider is here, and an error when it is elsewhere and the
// run could not be handed over.
func (e *Engine) HandOver(name string) error {
	reg, err := e.opts.Registry.Lookup(name)
	if err != nil || reg.Program == "" {
		return nil // an unknown name fails where the provider is built
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.handOver(reg)
}

// handOver replaces the process with reg's program, or says why it cannot.
// Only a run that has used no other provider yet is handed over: the
// program runs it again from the start. e.mu is held.
func (e *Engine) handOver(reg providers.Registration) *UnavailableError {
	what := "the " + reg.Name + " provider"
	var msg string
	if len(e.providers) > 0 {
		msg = fmt.Sprintf("%s is built into the program %s, not this one, and this run has used another provider already: run the same command with %s", what, reg.Program, reg.Program)
	} else {
		msg = HandOverTo(what, reg.Program, e.opts.Handoff)
	}
	return &UnavailableError{Provider: reg.Name, Err: providers.Errorf(providers.ErrUnavailable, reg.Name, "start", "%s", msg)}
}

// HandOverTo replaces the process with program, which has what built in
// (a provider, the interactive mode), through handoff (Options.Handoff);
// it returns only when that could not be done, with what to do instead.
// Nil handoff: it cannot.
func HandOverTo(what, program string, handoff func(program string) error) string {
	msg := what + " is built into the program " + program + ", not this one"
	if handoff == nil {
		return msg + ": run the same command with " + program
	}
	err := handoff(program)
	if err == nil {
		err = errors.New("it did not start")
	}
	return fmt.Sprintf("%s, which could not be started (%v): install %s beside this program or on PATH (go install github.com/agentbox/sandbox/cmd/%s)", msg, err, program, program)
}

// Gated returns the named provider behind the approval gate, for serving it
// to other programs (`sandbox serve`): every operation is decided by the
// policy and recorded in the audit log, as in a session. Engine.Close
// releases the provider.
func (e *Engine) Gated(name string) (*approval.Gate, error) {
	p, err := e.provider(name)
	if err != nil {
		return nil, err
	}
	return e.gate(p), nil
}

// gate wraps p in the approval gate this engine's options describe.
func (e *Engine) gate(p providers.Provider) *approval.Gate {
	return approval.NewGate(p, approval.GateOptions{
		Policy:   e.opts.Policy,
		Approver: e.opts.Approver,
		Audit:    e.opts.Audit,
		Mask:     e.opts.Mask,
		// A refused operation's error says so; see approval.AuditError.
		AuditRequired: e.opts.AuditRequired,
		CallIDs:       e.callIDs,
		OnEvent: func(ev approval.Event) {
			e.emit(Event{Type: string(ev.Type), Gate: &ev})
		},
	})
}

// Close releases provider connections.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, p := range e.providers {
		if c, ok := p.(providers.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// ResolveProvider picks the provider for a request: the explicit name, else
// the one recorded for id in the registry, else the default.
func (e *Engine) ResolveProvider(name, id string) (string, error) {
	if name != "" {
		return name, nil
	}
	var rec Record
	if id != "" {
		var err error
		if rec, _, err = e.store.Get(id); err != nil {
			return "", err
		}
	}
	return e.providerOf(rec), nil
}

// recordOf is the record of id among recs, or zero.
func recordOf(recs []Record, id string) Record {
	if id == "" {
		return Record{}
	}
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	return Record{}
}

// providerOf is the provider of a sandbox whose record is rec (zero when
// there is none): the recorded one, else the default.
func (e *Engine) providerOf(rec Record) string {
	if rec.Provider != "" {
		return rec.Provider
	}
	if e.opts.DefaultProvider != "" {
		return e.opts.DefaultProvider
	}
	return "local"
}

// OpenOptions say which sandbox a session works on.
type OpenOptions struct {
	// Provider is the provider name; empty resolves as ResolveProvider.
	Provider string
	// ID reuses this sandbox; it is never deleted by Close.
	ID string
	// Label finds a sandbox carrying all these labels, else creates one
	// with them (find-or-create). A found sandbox is kept on Close.
	Label map[string]string
	// Spec is used when a sandbox is created (Labels are merged).
	Spec providers.Spec
	// Setup, when set, runs after create, and on reuse when its hash changed.
	Setup        *setup.Script
	SetupTimeout time.Duration
	// SetupOutput receives the setup script's live output.
	SetupOutput io.Writer
	// Env is passed to every command of the session (and setup).
	Env map[string]string
	// User runs the session's commands that name no user as this user
	// of the sandbox (providers.ExecRequest.User).
	User string
	// Keep keeps a sandbox this session created when it closes.
	Keep bool
}

// CheckCapabilities refuses options the provider cannot honour, before
// anything is created. The error names the flag.
func CheckCapabilities(provider string, caps providers.Capabilities, o OpenOptions) error {
	var bad []string
	if o.Spec.Network != providers.NetworkDefault && !caps.Network {
		bad = append(bad, "--network")
	}
	if len(o.Label) > 0 && !caps.Labels {
		bad = append(bad, "--sandbox-label")
	}
	if o.Spec.Resources != (providers.Resources{}) && !caps.Resources {
		bad = append(bad, "--cpus/--memory/--pids")
	}
	if o.Spec.Image != "" && !caps.Image {
		bad = append(bad, "--image")
	}
	if len(bad) > 0 {
		return fmt.Errorf("provider %s does not support %s: %w", provider, strings.Join(bad, ", "), providers.ErrUnsupported)
	}
	return nil
}

// Open creates or reuses a sandbox and returns a session whose every
// operation passes through the approval gate. On any error after a sandbox
// was created, that sandbox is deleted before Open returns.
func (e *Engine) Open(ctx context.Context, o OpenOptions) (*Session, error) {
	// The registry is read once, for the provider of o.ID and for the
	// sandboxes past their --ttl.
	recs, recErr := e.store.All()
	name := o.Provider
	if name == "" {
		if o.ID != "" && recErr != nil {
			return nil, recErr
		}
		name = e.providerOf(recordOf(recs, o.ID))
	}
	reg, err := e.opts.Registry.Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := CheckCapabilities(name, reg.Capabilities, o); err != nil {
		return nil, err
	}
	p, err := e.provider(name)
	if err != nil {
		return nil, err
	}
	s := &Session{engine: e, provider: p, env: o.Env, user: o.User, keep: o.Keep}
	// A sandbox past its --ttl is deleted by the first run that sees
	// it, whatever that run is for.
	gone := e.deleteExpired(ctx, name, recs)
	switch {
	case o.ID != "":
		if at, ok := gone[o.ID]; ok {
			return nil, &ExpiredError{ID: o.ID, At: at}
		}
		info, err := p.Get(ctx, o.ID)
		if err != nil {
			if errors.Is(err, providers.ErrNotFound) {
				return nil, &NotFoundError{ID: o.ID, Provider: name, Err: err}
			}
			return nil, err
		}
		s.info = info
		e.emit(Event{Type: "lifecycle", Action: "reused", Sandbox: &s.info})
	case len(o.Label) > 0:
		found, err := p.List(ctx, providers.Filter{Labels: o.Label})
		if err != nil {
			return nil, err
		}
		sort.Slice(found, func(i, j int) bool { return found[i].CreatedAt.Before(found[j].CreatedAt) })
		for _, info := range found {
			// A stopped machine counts: the first operation starts it.
			if info.State == providers.StateRunning || info.State == providers.StatePaused || info.State == providers.StateStopped {
				s.info = info
				break
			}
		}
		if s.info.ID != "" {
			e.emit(Event{Type: "lifecycle", Action: "reused", Sandbox: &s.info})
			break
		}
		spec := o.Spec
		spec.Labels = mergeLabels(spec.Labels, o.Label)
		if err := s.create(ctx, name, spec); err != nil {
			return nil, err
		}
		// A sandbox found later by label is the point of labelling it.
		s.keep = true
	default:
		spec := o.Spec
		// Deleted at the end of this run, unless kept after all (the
		// TUI asks at its end).
		spec.Transient = !o.Keep
		if err := s.create(ctx, name, spec); err != nil {
			return nil, err
		}
	}
	s.gate = e.gate(p)
	if o.Setup != nil {
		if err := s.runSetup(ctx, o); err != nil {
			s.closeWith(ctx, err)
			return nil, err
		}
	}
	return s, nil
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// ExpiredError is a --sandbox-id whose --ttl had passed: it was deleted.
type ExpiredError struct {
	ID string
	At time.Time
}

// Error says what happened and what to do.
func (e *ExpiredError) Error() string {
	return fmt.Sprintf("sandbox %s expired at %s (its --ttl) and was deleted; create a new one", e.ID, e.At.Local().Format(time.DateTime))
}

// Unwrap makes an expired sandbox a sandbox that is not found.
func (e *ExpiredError) Unwrap() error { return providers.ErrNotFound }

// NotFoundError is a --sandbox-id that does not exist.
type NotFoundError struct {
	ID, Provider string
	Err          error
}

// Error says how to find the right id.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("sandbox %s not found on provider %s (see `sandbox list`, or name the provider with --sandbox)", e.ID, e.Provider)
}

// Unwrap returns the provider's error.
func (e *NotFoundError) Unwrap() error { return e.Err }

// UnavailableError is a provider that cannot run in this program: one
// built into another program it could not hand the run to, or one this
// system cannot run. The CLI exits 125 for it, as for a sandbox that could
// not be made.
type UnavailableError struct {
	Provider string
	Err      error
}

// Error keeps the cause's message, which names the provider.
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// CreateError is a sandbox that could not be created (exit 125).
type CreateError struct {
	Provider string
	Err      error
}

// Error keeps the provider's message.
func (e *CreateError) Error() string {
	return fmt.Sprintf("could not create %s %s sandbox: %v", article(e.Provider), e.Provider, e.Err)
}

// Unwrap returns the cause.
func (e *CreateError) Unwrap() error { return e.Err }

func (e *Engine) emit(ev Event) {
	if e.opts.Events == nil {
		return
	}
	ev.Time = e.opts.Now()
	e.opts.Events(ev)
}
