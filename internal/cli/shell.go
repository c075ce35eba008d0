package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
)

// defaultShell is what `sandbox shell` runs without a command: bash where
// the sandbox has it, else sh, both as login shells.
const defaultShell = "command -v bash >/dev/null 2>&1 && exec bash -l || exec sh -l"

func newShellCmd(app *App) *cobra.Command {
	var cwd string
	cmd := &cobra.Command{
		Use:   "shell [flags] [-- COMMAND [ARG...]]",
		Short: "Open an interactive terminal in the sandbox; its exit status passes through",
		Long: `Open an interactive terminal in the sandbox, like docker exec -it: a shell
(bash where the sandbox has it, else sh), or COMMAND, runs on a pseudo-terminal
of this terminal's size and TERM. This terminal is in raw mode meanwhile:
every key, Ctrl-C included, goes to the sandbox; a resize of this terminal
resizes the sandbox's. The shell's exit status passes through.

The session is approved once, as an exec of the shell (or of COMMAND): what
is typed into it afterwards is not decided command by command, so allow it
only where you would allow any command (the audit log records the session
and its exit status).

It needs a terminal on stdin and stdout, and a provider with terminals
(local, e2b); on others it fails with exit code 2 (unsupported).`,
		Example: `  sandbox --sandbox-id sb-1a2b shell
  sandbox --sandbox-id sb-1a2b shell -- python3
  sandbox --sandbox e2b --sandbox-id abc123 shell --cwd /home/user`,
		RunE: func(cmd *cobra.Command, args []string) error {
			in, inOK := app.streams.In.(*os.File)
			out, outOK := app.streams.Out.(*os.File)
			if !inOK || !outOK || !app.streams.InTTY || !app.streams.OutTTY {
				return &UsageError{Err: errors.New("shell needs a terminal on stdin and stdout (for scripts, use exec)")}
			}
			req := providers.ExecRequest{Shell: defaultShell, Cwd: cwd, User: app.flags.user}
			if len(args) > 0 {
				req = providers.ExecRequest{Argv: args, Cwd: cwd, User: app.flags.user}
			}
			return app.withSession(cmd, func(ctx context.Context, s *engine.Session) error {
				g := s.Gate()
				if !g.Features().Terminal {
					return providers.Errorf(providers.ErrUnsupported, s.Info().Provider, "shell",
						"provider %s has no terminals (PTYs), which shell needs: use exec, or a provider with them (local, e2b)", g.Name())
				}
				return runShell(ctx, g, s.ID(), req, in, out, app.masker.Writer(out))
			})
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory inside the sandbox (default /workspace)")
	return cmd
}

// runShell runs req on a terminal of sandbox id through t, with the
// host's terminal (in, out) in raw mode relaying keys, output and
// resizes, and returns its exit status as an *ExitStatus when not zero.
func runShell(ctx context.Context, t providers.Terminal, id string, req providers.ExecRequest, in, out *os.File, w io.WriteCloser) error {
	cols, rows, err := term.GetSize(int(out.Fd()))
	if err != nil {
		return fmt.Errorf("shell: reading the terminal's size: %w", err)
	}
	sess, err := t.ExecTerminal(ctx, id, req, providers.TerminalRequest{Cols: uint16(cols), Rows: uint16(rows), Term: os.Getenv("TERM")})
	if err != nil {
		return err
	}
	defer sess.Close()
	state, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return fmt.Errorf("shell: raw mode: %w", err)
	}
	defer func() { _ = term.Restore(int(in.Fd()), state) }()

	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		for {
			select {
			case <-ended:
				return
			case <-winch:
				if c, r, err := term.GetSize(int(out.Fd())); err == nil {
					_ = sess.Resize(uint16(c), uint16(r))
				}
			}
		}
	}()
	// Keys go to the sandbox until the session ends; the copy then stays
	// blocked on the next key, which the process's exit ends.
	go func() { _, _ = io.Copy(sess, in) }()
	_, _ = io.Copy(w, sess)
	w.Close()
	res, err := sess.Wait()
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &ExitStatus{Code: res.ExitCode}
	}
	return nil
}
