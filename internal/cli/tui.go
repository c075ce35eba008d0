package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/tui"
)

// tuiTerminal reports whether bare `sandbox` can open the TUI: a terminal
// on stdin and stdout (the TUI draws on stderr, also a terminal), no --json.
func (a *App) tuiTerminal() bool {
	s := a.streams
	return s.InTTY && s.OutTTY && s.ErrTTY && !a.flags.json
}

// runTUI opens the TUI on the sandbox the global flags name (or a fresh
// one). The session opens inside the TUI, so setup runs with live output;
// the TUI closes it on the way out (a created sandbox is deleted unless
// kept, and then the reattach command is printed).
func (a *App) runTUI(cmd *cobra.Command) error {
	ctx := cmd.Context()
	o, err := a.openOptions()
	if err != nil {
		return err
	}
	o.SetupOutput = a.masker.Writer(a.bridge.SetupOutput())
	provider, err := a.engine.ResolveProvider(o.Provider, o.ID)
	if err != nil {
		return err
	}
	editor := a.env.Get("VISUAL")
	if editor == "" {
		editor = a.env.Get("EDITOR")
	}
	noColor := a.env.Get("NO_COLOR") != "" || a.env.Get("TERM") == "dumb"
	_, err = tui.Run(ctx, tui.Options{
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
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}
