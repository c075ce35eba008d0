// Package interactive is what the CLI knows of the interactive mode, the
// TUI of bare `sandbox` (package tui): the options it opens with, what it
// reports, and the bridge the engine of its run talks to.
//
// The TUI itself is built into the program sandbox-cloud only
// (providers.CloudProgram), which the program sandbox hands bare `sandbox`
// on a terminal to: Bubble Tea, Lip Gloss and their dependencies were a
// twelfth of every cold `sandbox exec` (their package initialisers, and a
// tenth more binary to map and to tear down), while the interactive mode
// starts once per session. This package links none of them.
package interactive

import (
	"context"
	"io"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
)

// Mode is the interactive mode of a program that has it built in
// (tui.Mode).
type Mode interface {
	// NewBridge returns the bridge the engine of the run is built with,
	// before the TUI runs; what arrives while no TUI runs goes to
	// fallback.
	NewBridge(fallback io.Writer) Bridge
	// Run runs the TUI until the user leaves or ctx ends (see tui.Run).
	Run(ctx context.Context, o Options) (Result, error)
}

// Bridge is the TUI's side of the engine: the approver that asks in its
// dialog, and the sink of the engine's events and progress, shown in its
// scrollback.
type Bridge interface {
	approval.Approver
	// Event takes one engine event.
	Event(ev engine.Event)
	// Progress takes the engine's progress lines.
	Progress() io.Writer
	// SetupOutput takes a setup script's output.
	SetupOutput() io.Writer
}

// Options configure Mode.Run.
type Options struct {
	// Open opens the session. It runs inside the TUI, so a setup script's
	// output streams into the scrollback while a spinner turns.
	Open func(ctx context.Context) (*engine.Session, error)
	// Bridge is the approver the engine was built with, and the sink of its
	// events and progress: one the same Mode's NewBridge returned.
	Bridge Bridge
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
