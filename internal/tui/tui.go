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

	tea "github.com/charmbracelet/bubbletea"

	// Before Bubble Tea's initialiser: no question to the terminal at start.
	_ "github.com/agentbox/sandbox/internal/tui/quiet"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/interactive"
)

// Options configure Run.
type Options = interactive.Options

// Result says how the TUI left the sandbox.
type Result = interactive.Result

// Mode is the interactive mode as the CLI opens it (Deps.TUI of package
// cli): the program sandbox-cloud's, not the program sandbox's (see
// package interactive).
type Mode struct{}

// NewBridge returns a new Bridge.
func (Mode) NewBridge(fallback io.Writer) interactive.Bridge { return NewBridge(fallback) }

// Run is Run.
func (Mode) Run(ctx context.Context, o Options) (Result, error) { return Run(ctx, o) }

// Run runs the TUI until the user leaves or ctx ends, and always closes the
// session it opened (a created sandbox is deleted unless kept). The error is
// the one that kept the session from opening (a failed setup, say), or the
// program's own.
func Run(ctx context.Context, o Options) (Result, error) {
	if _, ok := o.Bridge.(*Bridge); o.Bridge != nil && !ok {
		// Its approvals and events would never reach this TUI.
		return Result{Provider: o.Provider}, fmt.Errorf("tui: a bridge of type %T, not one NewBridge made", o.Bridge)
	}
	m := newModel(ctx, o)
	m.hist.load(o.HistoryFile)
	// Signals are the root context's business (SIGINT/SIGTERM cancel ctx,
	// which ends the program): Bubble Tea's own handler would race with it
	// and can block its shutdown.
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out),
		tea.WithAltScreen(), tea.WithoutSignalHandler(), tea.WithReportFocus(), tea.WithMouseCellMotion())
	_, perr := p.Run()
	m.bridge.Detach()
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
