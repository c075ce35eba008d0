package cli

import (
	"context"
	"fmt"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/interactive"
	"github.com/agentbox/sandbox/internal/output"
)

// tuiDefaultTTL is the lifetime of a sandbox the TUI creates when --ttl is
// not given: should the TUI die without cleaning up (kill -9), the sandbox
// still expires (`sandbox delete --expired`). --ttl 0 means no deadline.
const tuiDefaultTTL = 8 * time.Hour

// tuiTerminal reports whether bare `sandbox` can open the TUI: a terminal
// on stdin and stdout (the TUI draws on stderr, also a terminal), no --json.
func (a *App) tuiTerminal() bool {
	s := a.streams
	return s.InTTY && s.OutTTY && s.ErrTTY && !a.flags.json
}

// runTUI opens the TUI on the sandbox the global flags name (or a fresh
// one). The session opens inside the TUI, so setup runs with live output;
// the TUI closes it on the way out (a created sandbox is deleted unless
// kept), and a line on stderr then says which. Closing the terminal
// (SIGHUP) cleans up as SIGINT and SIGTERM do.
func (a *App) runTUI(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP)
	defer stop()
	o, err := a.openOptions()
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("ttl") {
		o.Spec.TTL = tuiDefaultTTL
	}
	o.SetupOutput = a.masker.Writer(a.bridge.SetupOutput())
	eng, err := a.Engine()
	if err != nil {
		return err
	}
	// Before the TUI takes the terminal.
	provider, err := a.handOver(eng, o.Provider, o.ID)
	if err != nil {
		return err
	}
	editor := a.env.Get("VISUAL")
	if editor == "" {
		editor = a.env.Get("EDITOR")
	}
	noColor := a.env.Get("NO_COLOR") != "" || a.env.Get("TERM") == "dumb"
	res, err := a.deps.TUI.Run(ctx, interactive.Options{
		Open:     func(ctx context.Context) (*engine.Session, error) { return a.open(ctx, o) },
		Bridge:   a.bridge,
		Provider: provider,
		Setup:    a.flags.setup,
		Keep:     a.flags.keep,
		Timeout:  a.flags.timeout,
		In:       a.streams.In,
		Out:      a.streams.Err,
		Color:    !noColor,
		Editor:   editor,
		Mask:     a.masker.String,
		// The state directory keeps the input history between runs.
		HistoryFile: filepath.Join(a.dirs.State, "tui-history"),
	})
	// The kept sandbox's reattach command is printed as the session
	// closes; a deleted one is said here.
	switch {
	case res.ID == "" || err != nil:
	case res.Created && !res.Kept:
		fmt.Fprintf(a.streams.Err, "deleted sandbox %s\n", output.Escape(res.ID))
	case !res.Created:
		fmt.Fprintf(a.streams.Err, "left sandbox %s running (this run did not create it); reattach with: %s\n",
			output.Escape(res.ID), output.Escape(engine.ReattachCommand(res.Provider, res.ID)))
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}
