// Package tui is the interactive cockpit for one sandbox: a Bubble Tea
// program with a status line, a scrollback of operations and their live
// output, an input line for commands, and the approval dialog that answers
// the gate's "ask" decisions.
//
// The package talks to the engine only. One root model owns all state and
// routes messages; components (scrollback, dialog) are plain structs whose
// key handlers return actions. Update does no I/O: every engine call runs
// in a tea.Cmd, and what other goroutines produce (approval requests,
// output, progress, engine events) arrives through a Bridge as messages.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	// Before Bubble Tea's initialiser: no question to the terminal at start.
	_ "github.com/agentbox/sandbox/internal/tui/quiet"

	"github.com/agentbox/sandbox/internal/engine"
)

// Options configure Run.
type Options struct {
	// Open opens the session. It runs inside the TUI, so a setup script's
	// output streams into the scrollback while a spinner turns.
	Open func(ctx context.Context) (*engine.Session, error)
	// Bridge is the approver the engine was built with, and the sink of its
	// events and progress.
	Bridge *Bridge
	// Provider names the provider before the session is open.
	Provider string
	// Setup names the setup script, if any (shown while it runs).
	Setup string
	// Keep is --keep: a created sandbox is kept without asking.
	Keep bool
	// Timeout is the per-call timeout (--timeout); zero means none.
	Timeout time.Duration
	// In and Out are the terminal.
	In  io.Reader
	Out io.Writer
	// Color is false for NO_COLOR or a terminal without colour.
	Color bool
	// Editor is $VISUAL or $EDITOR; empty means the built-in multi-line
	// input.
	Editor string
	// Mask hides secrets in what is shown.
	Mask func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HistoryFile keeps the input history from one run to the next;
	// empty means none.
	HistoryFile string
}

// Result says how the TUI left the sandbox.
type Result struct {
	// ID and Provider name the sandbox (empty when it never opened).
	ID, Provider string
	// Created is true when this run created the sandbox.
	Created bool
	// Kept is true when a created sandbox was kept; Reattach then is the
	// command that reopens it.
	Kept     bool
	Reattach string
}

// Run runs the TUI until the user leaves or ctx ends, and always closes the
// session it opened (a created sandbox is deleted unless kept). The error is
// the one that kept the session from opening (a failed setup, say), or the
// program's own.
func Run(ctx context.Context, o Options) (Result, error) {
	m := newModel(ctx, o)
	m.hist.load(o.HistoryFile)
	// Signals are the root context's business (SIGINT/SIGTERM cancel ctx,
	// which ends the program): Bubble Tea's own handler would race with it
	// and can block its shutdown.
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out),
		tea.WithAltScreen(), tea.WithoutSignalHandler(), tea.WithReportFocus(), tea.WithMouseCellMotion())
	_, perr := p.Run()
	o.Bridge.Detach()
	if err := m.hist.save(o.HistoryFile); err != nil {
		fmt.Fprintf(o.Out, "sandbox: warning: the input history was not saved: %s\n", err)
	}
	m.cancelOps()
	if errors.Is(perr, tea.ErrProgramKilled) {
		perr = nil // ctx ended: the interrupt is reported by the caller
	}
	// Wait for an open still in flight, then make sure the session is
	// closed even when the program ended without the quit flow.
	<-m.opener.done
	s := m.opener.session
	res := Result{Provider: o.Provider}
	if s == nil {
		if perr == nil {
			perr = m.opener.err
		}
		return res, perr
	}
	info := s.Info()
	res.ID, res.Provider, res.Created = info.ID, info.Provider, s.Created()
	if err := s.Close(context.WithoutCancel(ctx)); err != nil && perr == nil {
		perr = err
	}
	if res.Created && s.Keep() {
		res.Kept, res.Reattach = true, s.ReattachCommand()
	}
	return res, perr
}

// opener runs the session's Open once and keeps its outcome for Run.
type opener struct {
	done    chan struct{}
	session *engine.Session
	err     error
}
