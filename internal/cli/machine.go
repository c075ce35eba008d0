package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// autoStopFlag is --auto-stop: how long a sandbox may go without an
// operation before it stops, and whether it was given at all.
type autoStopFlag struct {
	d   time.Duration
	set bool
}

// String shows the value, or the providers' usual default when unset.
func (f *autoStopFlag) String() string {
	if !f.set {
		return "15m"
	}
	return f.d.String()
}

// Set parses a duration; 0 means never, a negative one is refused.
func (f *autoStopFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30m or 2h, or 0 for never: %w", err)
	}
	if d < 0 {
		return errors.New("must not be negative (0 means never)")
	}
	f.d, f.set = d, true
	return nil
}

// Type names the value in help.
func (f *autoStopFlag) Type() string { return "duration" }

// spec turns the flag into providers.Spec.AutoStop: zero when not given
// (the provider's default), negative for 0 (never).
func (f *autoStopFlag) spec() time.Duration {
	switch {
	case !f.set:
		return 0
	case f.d == 0:
		return -1
	}
	return f.d
}

// sandboxArgs takes the sandbox id of a verb from its first argument, or
// from --sandbox-id when only the other n arguments are given.
func (a *App) sandboxArgs(verb, usage string, args []string, n int) (string, []string, error) {
	flag := a.flags.sandboxID
	switch {
	case len(args) == n+1:
		if flag != "" && flag != args[0] {
			return "", nil, &UsageError{Err: fmt.Errorf("%s: two sandbox ids given: %s and --sandbox-id %s", verb, args[0], flag)}
		}
		return args[0], args[1:], nil
	case len(args) == n && flag != "":
		return flag, args, nil
	}
	return "", nil, &UsageError{Err: fmt.Errorf("usage: sandbox %s %s (the id may also come from --sandbox-id; got %d arguments)", verb, usage, len(args))}
}

// withMachine opens the existing sandbox id of a provider with machines
// and runs fn on it. It never creates a sandbox nor runs a setup script.
func (a *App) withMachine(cmd *cobra.Command, id string, fn func(ctx context.Context, s *engine.Session) error) error {
	eng, err := a.Engine()
	if err != nil {
		return err
	}
	if _, err := eng.Machines(a.flags.provider, id); err != nil {
		return err
	}
	return a.withOptions(cmd, func(o *engine.OpenOptions) { o.ID, o.Label, o.Setup = id, nil, nil }, func(ctx context.Context, s *engine.Session) error {
		return a.call(ctx, func(ctx context.Context) error { return fn(ctx, s) })
	})
}

// newLifecycleCmd builds stop or start.
func newLifecycleCmd(app *App, verb, short, long string, op func(*engine.Engine, context.Context, string, string) error) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " [ID]",
		Short: short,
		Long:  long,
		Args:  rangeArgs(0, 1, verb+" takes one sandbox id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, _, err := app.sandboxArgs(verb, "ID", args, 0)
			if err != nil {
				return err
			}
			eng, err := app.Engine()
			if err != nil {
				return err
			}
			if _, err := eng.Machines(app.flags.provider, id); err != nil {
				return err
			}
			return app.call(cmd.Context(), func(ctx context.Context) error {
				if err := op(eng, ctx, app.flags.provider, id); err != nil {
					return err
				}
				if !app.flags.json {
					fmt.Fprintln(app.streams.Out, output.Escape(id))
					return nil
				}
				info, err := eng.Get(ctx, app.flags.provider, id)
				if err != nil {
					return err
				}
				return output.JSON(app.streams.Out, info)
			})
		},
	}
}

func newStopCmd(app *App) *cobra.Command {
	return newLifecycleCmd(app, "stop", "Stop a sandbox: its processes end, its files stay",
		`Stop a sandbox's machine: every process in it gets SIGTERM, then SIGKILL, and
/tmp (a tmpfs) is emptied, as a reboot would; every other file stays. The next
operation on the sandbox (or `+"`sandbox start`"+`) starts it again. Prints the id.`,
		(*engine.Engine).Stop)
}

func newStartCmd(app *App) *cobra.Command {
	return newLifecycleCmd(app, "start", "Start a stopped sandbox (any operation on it also does)",
		`Start a stopped sandbox's machine. A running sandbox is left alone. Any
operation on a stopped sandbox starts it first, so this is only needed to have
it ready. Prints the id.`,
		(*engine.Engine).Start)
}

func newPsCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "ps [ID]",
		Short: "List the processes running in a sandbox",
		Long: `List the processes of a running sandbox: pid, user id, state (the kernel's
letter: R running, S sleeping, Z zombie…; "exited" with the status for a
background command that ended), start time and command line. A stopped
sandbox has none. --json prints the array. Gated as a list of /proc.`,
		Args: rangeArgs(0, 1, "ps takes one sandbox id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, _, err := app.sandboxArgs("ps", "ID", args, 0)
			if err != nil {
				return err
			}
			return app.withMachine(cmd, id, func(ctx context.Context, s *engine.Session) error {
				procs, err := s.Processes(ctx)
				if err != nil {
					return err
				}
				return app.printProcesses(procs)
			})
		},
	}
}

// printProcesses prints ps: JSON or a table, secrets masked.
func (a *App) printProcesses(procs []providers.Process) error {
	masked := make([]providers.Process, len(procs))
	for i, p := range procs {
		p.Name = a.masker.String(p.Name)
		if p.Argv != nil {
			argv := make([]string, len(p.Argv))
			for j, w := range p.Argv {
				argv[j] = a.masker.String(w)
			}
			p.Argv = argv
		}
		masked[i] = p
	}
	if a.flags.json {
		return output.JSON(a.streams.Out, masked)
	}
	rows := make([][]string, 0, len(masked))
	for _, p := range masked {
		state := p.State
		if p.ExitCode != nil {
			state = fmt.Sprintf("exited (%d)", *p.ExitCode)
		}
		command := p.Name
		if len(p.Argv) > 0 {
			command = approval.QuoteArgv(p.Argv)
		}
		rows = append(rows, []string{strconv.Itoa(p.PID), strconv.Itoa(p.UID), state, age(p.Started), command})
	}
	// output.Table escapes every cell.
	return output.Table(a.streams.Out, []string{"PID", "UID", "STATE", "STARTED", "COMMAND"}, rows)
}

// parseSignal reads a signal: a name (TERM, SIGTERM, term) or a number.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, &UsageError{Err: fmt.Errorf("--signal %s: a signal number is between 1 and 64", s)}
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, &UsageError{Err: fmt.Errorf("--signal %q: unknown signal (use a name such as TERM, KILL, INT, HUP, or a number)", s)}
}

// parsePID reads a process id argument.
func parsePID(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, &UsageError{Err: fmt.Errorf("%q is not a process id (a positive number; see `sandbox ps`)", s)}
	}
	return n, nil
}

func newKillCmd(app *App) *cobra.Command {
	var signal string
	cmd := &cobra.Command{
		Use:   "kill [ID] PID",
		Short: "Send a signal to a process in a sandbox (default TERM)",
		Long: `Send a signal to a process of a running sandbox (see ` + "`sandbox ps`" + `).
It is approved as the command ` + "`kill -s SIG PID`" + `, so --allow 'exec:kill *'
allows it. To delete a sandbox, use ` + "`sandbox delete`" + ` (kill is no longer
its alias).`,
		Example: `  sandbox kill sb-1a2b 42
  sandbox --sandbox-id sb-1a2b kill --signal KILL 42`,
		Args: rangeArgs(1, 2, "kill needs a sandbox id and a pid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, rest, err := app.sandboxArgs("kill", "ID PID", args, 1)
			if err != nil {
				return err
			}
			pid, err := parsePID(rest[0])
			if err != nil {
				return err
			}
			sig, err := parseSignal(signal)
			if err != nil {
				return err
			}
			return app.withMachine(cmd, id, func(ctx context.Context, s *engine.Session) error {
				return s.Signal(ctx, pid, sig)
			})
		},
	}
	cmd.Flags().StringVar(&signal, "signal", "TERM", "signal `S`: a name (TERM, KILL, INT, HUP, SIGTERM…) or a number")
	return cmd
}

func newLogsCmd(app *App) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs [ID] PID",
		Short: "Print the output of a background command (exec --background)",
		Long: `Print what a command started with ` + "`sandbox exec --background`" + ` wrote (stdout
and stderr, in order) to stdout. With --follow, keep printing until it ends and
exit with its exit status; without, exit 0. --json prints one object with the
output and the exit status (null while it runs). Gated as a read of /proc/PID.`,
		Args: rangeArgs(1, 2, "logs needs a sandbox id and a pid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, rest, err := app.sandboxArgs("logs", "ID PID", args, 1)
			if err != nil {
				return err
			}
			pid, err := parsePID(rest[0])
			if err != nil {
				return err
			}
			return app.withMachine(cmd, id, func(ctx context.Context, s *engine.Session) error {
				var b strings.Builder
				w := app.masker.Writer(app.streams.Out)
				if app.flags.json {
					w = app.masker.Writer(&b)
				}
				code, err := s.Logs(ctx, pid, follow, w)
				w.Close()
				if err != nil {
					return err
				}
				if app.flags.json {
					doc := map[string]any{"sandbox": s.ID(), "pid": pid, "exit_code": code}
					if out := b.String(); utf8.ValidString(out) {
						doc["output"] = out
					} else {
						doc["output"] = base64.StdEncoding.EncodeToString([]byte(out))
						doc["encoding"] = "base64"
					}
					if err := output.JSON(app.streams.Out, doc); err != nil {
						return err
					}
				}
				if follow && code != nil && *code != 0 {
					return &ExitStatus{Code: *code}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the command ends, then exit with its status")
	return cmd
}
