package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Machines reports whether the sandboxes of a provider (resolved as
// ResolveProvider) are machines (providers.Machine): they can be stopped
// and started, and keep background commands. It touches no sandbox. A
// provider without machines gives an error matching
// providers.ErrUnsupported that names it, and false.
func (e *Engine) Machines(provider, id string) (bool, error) {
	name, err := e.ResolveProvider(provider, id)
	if err != nil {
		return false, err
	}
	p, err := e.provider(name)
	if err != nil {
		return false, err
	}
	if _, ok := p.(providers.Machine); !ok {
		return false, providers.Errorf(providers.ErrUnsupported, name, "machine",
			"provider %s has no machines: its sandboxes cannot be stopped or started and keep no background commands", name)
	}
	return true, nil
}

// Start starts a stopped sandbox by id (provider resolved as
// ResolveProvider); a running one is left alone. Like Delete it is a
// lifecycle operation: it reaches the provider through the gate, which
// lets it pass without a decision.
func (e *Engine) Start(ctx context.Context, provider, id string) error {
	return e.lifecycle(ctx, provider, id, "started", func(g machineGate) error { return g.Start(ctx, id) })
}

// Stop stops a sandbox by id: its processes end and /tmp is emptied, its
// files stay. Stopping a stopped sandbox does nothing. See Start.
func (e *Engine) Stop(ctx context.Context, provider, id string) error {
	return e.lifecycle(ctx, provider, id, "stopped", func(g machineGate) error { return g.Stop(ctx, id) })
}

// machineGate is the part of the gate Start and Stop use.
type machineGate interface {
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string) error
}

func (e *Engine) lifecycle(ctx context.Context, provider, id, action string, op func(machineGate) error) error {
	name, err := e.ResolveProvider(provider, id)
	if err != nil {
		return err
	}
	p, err := e.provider(name)
	if err != nil {
		return err
	}
	if err := op(e.gate(p)); err != nil {
		if errors.Is(err, providers.ErrNotFound) {
			return &NotFoundError{ID: id, Provider: name, Err: err}
		}
		return err
	}
	e.emit(Event{Type: "lifecycle", Action: action, Sandbox: &providers.Info{ID: id, Provider: name}})
	return nil
}

// Processes lists the processes of the sandbox (gated as a list).
func (s *Session) Processes(ctx context.Context) ([]providers.Process, error) {
	return s.gate.Processes(ctx, s.info.ID)
}

// Signal sends sig to the process pid of the sandbox (gated as the exec
// of `kill -s SIG PID`). A pid that is not a process of the sandbox
// gives an error matching providers.ErrNotFound.
func (s *Session) Signal(ctx context.Context, pid int, sig syscall.Signal) error {
	return s.inSandbox(s.gate.Signal(ctx, s.info.ID, pid, sig))
}

// Logs copies the output of the background command pid into w (gated as
// a read), following it until it ends when follow is set. It returns the
// command's exit status once it has ended, nil while it runs.
func (s *Session) Logs(ctx context.Context, pid int, follow bool, w io.Writer) (*int, error) {
	code, err := s.gate.Logs(ctx, s.info.ID, pid, follow, w)
	return code, s.inSandbox(err)
}

// inSandbox names the sandbox in a not-found error, which names a pid.
func (s *Session) inSandbox(err error) error {
	if errors.Is(err, providers.ErrNotFound) {
		return fmt.Errorf("sandbox %s: %w", s.info.ID, err)
	}
	return err
}

// DefaultCollectGrace is how old a leftover must be before Collect
// removes it: a younger one may belong to a create still at work.
const DefaultCollectGrace = 10 * time.Minute

// Collect removes what interrupted creates and deletes of a provider
// (resolved as ResolveProvider) left on this host, older than grace, and
// names it (providers.Collector). A provider that keeps nothing here gives
// an error matching providers.ErrUnsupported.
func (e *Engine) Collect(ctx context.Context, provider string, grace time.Duration) ([]string, error) {
	name, err := e.ResolveProvider(provider, "")
	if err != nil {
		return nil, err
	}
	p, err := e.provider(name)
	if err != nil {
		return nil, err
	}
	c, ok := p.(providers.Collector)
	if !ok {
		return nil, providers.Errorf(providers.ErrUnsupported, name, "gc", "provider %s keeps nothing on this host to collect", name)
	}
	return c.Collect(ctx, grace)
}
