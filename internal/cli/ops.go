package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

const shellChars = " \t\n;|&<>$`()*?'\"\\"

// execRequest builds an exec request: -c STRING, or one argument that looks
// like a shell command line, runs through the shell; otherwise argv.
func execRequest(shell string, args []string) (providers.ExecRequest, error) {
	switch {
	case shell != "" && len(args) > 0:
		return providers.ExecRequest{}, &UsageError{Err: errors.New("give either -c STRING or a command after --, not both")}
	case shell != "":
		return providers.ExecRequest{Shell: shell}, nil
	case len(args) == 0:
		return providers.ExecRequest{}, &UsageError{Err: errors.New("exec needs a command: sandbox exec -- CMD [ARGS...]")}
	case len(args) == 1 && strings.ContainsAny(args[0], shellChars):
		return providers.ExecRequest{Shell: args[0]}, nil
	}
	return providers.ExecRequest{Argv: args}, nil
}

func newExecCmd(app *App) *cobra.Command {
	var cwd, shell string
	var background bool
	cmd := &cobra.Command{
		Use:   "exec [flags] -- COMMAND [ARG...]",
		Short: "Run a command; its exit status passes through",
		Long: `Run a command in the sandbox; its exit status passes through.

With --background the command starts detached and keeps running after exec
returns: exec prints its pid (--json: {"pid": N, "sandbox": ID}) and exits 0.
Its output is kept for ` + "`sandbox logs ID PID`" + `; ` + "`sandbox ps`" + ` lists it and
` + "`sandbox kill`" + ` signals it. It needs a sandbox that outlives the call
(--sandbox-id, --sandbox-label or --keep) on a provider with machines (local).`,
		Example: `  sandbox exec -- python3 -c 'print(1)'
  sandbox exec 'ls -l | wc -l'
  sandbox --sandbox-id sb-1a2b exec --cwd /workspace/src -- make test
  sandbox --sandbox-id sb-1a2b exec --background -- python3 -m http.server 8000`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := execRequest(shell, args)
			if err != nil {
				return err
			}
			req.Cwd = cwd
			late := app.flags.sandboxID != "" && !app.flags.json && !background
			if !late {
				app.armInterrupts(0)
			}
			if background {
				req.Background = true
				return app.execBackground(cmd, req)
			}
			req.Timeout = app.flags.timeout
			req.Network = providers.Network(app.flags.network)
			if !app.streams.InTTY {
				req.Stdin = app.streams.In
			}
			var stdout, stderr io.WriteCloser
			current := &events.CurrentCall{}
			if app.stream != nil {
				stdout = app.output("stdout", current)
				stderr = app.output("stderr", current)
			} else {
				stdout = app.masker.Writer(app.streams.Out)
				stderr = app.masker.Writer(app.streams.Err)
			}
			req.Stdout, req.Stderr = stdout, stderr
			if !app.flags.json && app.masker.Empty() {
				// Nothing to mask: a pipe is handed to the command
				// itself, with no copy through this process.
				if f, ok := directPipe(app.streams.Out); ok {
					req.Stdout = f
				}
				if f, ok := directPipe(app.streams.Err); ok {
					req.Stderr = f
				}
			}
			return app.withSession(cmd, func(ctx context.Context, s *engine.Session) error {
				if late {
					app.armInterrupts(execInterrupts(s))
				}
				// call.completed follows the last of the output.
				ctx, release := approval.HoldCompletions(ctx)
				res, err := s.Exec(approval.WithCallObserver(ctx, current.Set), req)
				stdout.Close()
				stderr.Close()
				release()
				if err != nil {
					return err
				}
				if res.ExitCode != 0 {
					return &ExitStatus{Code: res.ExitCode}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory inside the sandbox (default /workspace)")
	cmd.Flags().StringVarP(&shell, "command", "c", "", "run `STRING` with /bin/sh -c")
	cmd.Flags().BoolVar(&background, "background", false, "start the command detached, print its pid and return (see ps, logs, kill)")
	return armsInterrupts(cmd)
}

// execArmDelay is how long a foreground exec on an existing sandbox runs
// before SIGINT and SIGTERM are armed, when its provider ends a command
// whose caller goes away (execInterrupts).
const execArmDelay = 20 * time.Millisecond

// execInterrupts says when a foreground exec on the existing sandbox of
// s arms SIGINT and SIGTERM. Arming costs a tenth of a cold exec of a
// short command (see interruptsCancel), so where the provider ends a
// command whose caller dies (a local machine does), it waits
// execArmDelay, past which most such commands are over: a signal before
// then ends the CLI as the system's default does, and the provider ends
// the command and its process group, as the relay would; only the exit
// status (128+signal) and the audit log (no call.completed) differ. A
// fresh sandbox (which must not be left behind), --json (whose stream
// must end) and other providers arm at once.
func execInterrupts(s *engine.Session) time.Duration {
	if s.EndsWithCaller() {
		return execArmDelay
	}
	return 0
}

// execBackground starts req detached in a sandbox that outlives this run
// and prints its pid.
func (app *App) execBackground(cmd *cobra.Command, req providers.ExecRequest) error {
	g := app.flags
	if g.sandboxID == "" && len(g.labels) == 0 && !g.keep {
		return &UsageError{Err: errors.New("exec --background needs a sandbox that outlives this call: use --keep or --sandbox-id (a fresh sandbox would be deleted at once, and the command with it)")}
	}
	// Refused before a sandbox is created for nothing.
	eng, err := app.Engine()
	if err != nil {
		return err
	}
	if _, err := eng.Machines(g.provider, g.sandboxID); err != nil {
		return err
	}
	return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
		res, err := s.Exec(ctx, req)
		if err != nil {
			return err
		}
		if app.flags.json {
			return output.JSON(app.streams.Out, map[string]any{"pid": res.PID, "sandbox": s.ID()})
		}
		fmt.Fprintln(app.streams.Out, res.PID)
		return nil
	})
}

// directPipe returns w as a file when it is a pipe, which a sandboxed
// command may write to directly. Terminals and files are not handed over:
// a terminal's ioctls and a file's offset and length must stay out of the
// sandbox's reach.
func directPipe(w io.Writer) (*os.File, bool) {
	f, ok := w.(*os.File)
	if !ok {
		return nil, false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return nil, false
	}
	return f, true
}

func newReadCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "read PATH",
		Short: "Print a file from the sandbox",
		Long: `Print a file from the sandbox, streamed. With --json the content comes as
call.output events of the read (see "Events" in the README), chunk by chunk,
in base64 (data_b64) where it is not UTF-8.`,
		Args: exactArgs(1, "read needs one path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			current := &events.CurrentCall{}
			var w io.WriteCloser
			if app.stream != nil {
				w = app.output("stdout", current)
			} else {
				w = app.masker.Writer(app.streams.Out)
			}
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				// call.completed follows the content.
				ctx, release := approval.HoldCompletions(ctx)
				err := s.Read(approval.WithCallObserver(ctx, current.Set), args[0], w)
				w.Close()
				release()
				return err
			})
		},
	}
}

func newWriteCmd(app *App) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "write PATH [CONTENT]",
		Short: "Write a file (content from the argument or stdin); refuses to overwrite without --force",
		Args:  rangeArgs(1, 2, "write needs a path and optional content"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader
			if len(args) == 2 && args[1] != "-" {
				r = strings.NewReader(args[1])
			} else {
				if app.streams.InTTY {
					return &UsageError{Err: errors.New("write: give the content as an argument or pipe it on stdin")}
				}
				r = app.streams.In
			}
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				return s.Write(ctx, args[0], r, force)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing file")
	return cmd
}

func newEditCmd(app *App) *cobra.Command {
	var old, new string
	var all bool
	cmd := &cobra.Command{
		Use:   "edit PATH (OLD NEW | --old TEXT --new TEXT)",
		Short: "Replace text in a file (the old text must appear exactly once, or use --all)",
		Long: `Replace OLD with NEW in a file: the old text must appear exactly once, or
every occurrence is replaced with --all. The texts come as two arguments after
the path, or as --old and --new; the TUI's /edit takes the same.`,
		Example: `  sandbox edit /workspace/app.py 'debug = True' 'debug = False'
  sandbox edit /workspace/app.py --old 'debug = True' --new 'debug = False' --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			flags := cmd.Flags().Changed("old") || cmd.Flags().Changed("new")
			switch {
			case len(args) == 1 && flags, len(args) == 3 && !flags:
				return nil
			case len(args) == 3:
				return &UsageError{Err: errors.New("edit takes OLD NEW as arguments or as --old and --new, not both")}
			}
			return &UsageError{Err: errors.New("edit needs a path, then OLD NEW or --old TEXT --new TEXT")}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 3 {
				old, new = args[1], args[2]
			}
			if old == "" {
				return &UsageError{Err: errors.New("edit needs the text to replace (OLD or --old TEXT, non-empty)")}
			}
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				res, err := s.Edit(ctx, args[0], old, new, all)
				if err != nil {
					return err
				}
				diff := app.masker.String(res.Diff)
				if app.flags.json {
					return output.JSON(app.streams.Out, map[string]any{"path": app.masker.String(args[0]), "replacements": res.Replacements, "diff": diff})
				}
				fmt.Fprint(app.streams.Out, output.EscapeText(diff))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&old, "old", "", "text to replace")
	cmd.Flags().StringVar(&new, "new", "", "replacement text")
	cmd.Flags().BoolVar(&all, "all", false, "replace every occurrence")
	return cmd
}

func newLsCmd(app *App) *cobra.Command {
	var depth int
	var recursive bool
	cmd := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory (default /workspace)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := providers.DefaultWorkdir
			if len(args) == 1 {
				p = args[0]
			}
			if recursive {
				depth = 64
			}
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				list, err := s.Ls(ctx, p, depth)
				if err != nil {
					return err
				}
				return app.printFiles(list, true)
			})
		},
	}
	cmd.Flags().IntVarP(&depth, "depth", "d", 1, "levels to descend")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "descend all levels")
	return cmd
}

// printFiles prints a listing: JSON, one path a line, or (long) a table.
// Names come from the sandbox: secrets are masked in them, and in text
// they are escaped (output.Escape), so a file named after an escape
// sequence shows as one instead of driving the terminal.
func (app *App) printFiles(list []providers.FileInfo, long bool) error {
	masked := make([]providers.FileInfo, len(list))
	for i, fi := range list {
		fi.Path, fi.Target = app.masker.String(fi.Path), app.masker.String(fi.Target)
		masked[i] = fi
	}
	list = masked
	if app.flags.json {
		files := make([]events.File, len(list))
		for i, fi := range list {
			files[i] = events.FromFileInfo(fi)
		}
		return output.JSON(app.streams.Out, files)
	}
	if !long {
		for _, fi := range list {
			fmt.Fprintln(app.streams.Out, output.Escape(fi.Path))
		}
		return nil
	}
	rows := make([][]string, 0, len(list))
	for _, fi := range list {
		// output.Table escapes every cell.
		name := fi.Path
		if fi.Target != "" {
			name += " -> " + fi.Target
		}
		rows = append(rows, []string{fi.Mode.String(), fmt.Sprint(fi.Size), fi.ModTime.Local().Format(time.DateTime), name})
	}
	return output.Table(app.streams.Out, []string{"MODE", "SIZE", "MODIFIED", "PATH"}, rows)
}

func newGlobCmd(app *App) *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:     "glob PATTERN",
		Short:   "Find paths matching a glob (** crosses directories)",
		Example: `  sandbox glob '**/*.go' --root /workspace`,
		Args:    exactArgs(1, "glob needs one pattern"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				list, err := s.Glob(ctx, root, args[0])
				if err != nil {
					return err
				}
				return app.printFiles(list, false)
			})
		},
	}
	cmd.Flags().StringVar(&root, "root", providers.DefaultWorkdir, "directory to search under")
	return cmd
}

func newGrepCmd(app *App) *cobra.Command {
	var req providers.GrepRequest
	cmd := &cobra.Command{
		Use:   "grep PATTERN [PATH]",
		Short: "Search file contents with a regular expression (exit 1 when nothing matches)",
		Args:  rangeArgs(1, 2, "grep needs a pattern and an optional path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Pattern = args[0]
			req.Path = providers.DefaultWorkdir
			if len(args) == 2 {
				req.Path = args[1]
			}
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				matches, err := s.Grep(ctx, req)
				if err != nil {
					return err
				}
				if err := app.printMatches(matches); err != nil {
					return err
				}
				if len(matches) == 0 {
					return &ExitStatus{Code: 1}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&req.Glob, "glob", "", "only files whose name matches `GLOB`")
	cmd.Flags().BoolVarP(&req.IgnoreCase, "ignore-case", "i", false, "case-insensitive")
	cmd.Flags().IntVar(&req.MaxMatches, "max", 0, "stop after `N` matches (default 1000)")
	return cmd
}

// printMatches prints grep's matches: JSON, or path:line:text lines.
// Secrets are masked in the raw path and text, before encoding; in text,
// the path and the line are escaped (output.Escape; the line keeps its
// tabs), so a line found in the sandbox cannot drive the terminal.
func (app *App) printMatches(matches []providers.GrepMatch) error {
	masked := make([]providers.GrepMatch, len(matches))
	for i, m := range matches {
		m.Path, m.Text = app.masker.String(m.Path), app.masker.String(m.Text)
		masked[i] = m
	}
	if app.flags.json {
		return output.JSON(app.streams.Out, masked)
	}
	for _, m := range masked {
		fmt.Fprintf(app.streams.Out, "%s:%d:%s\n", output.Escape(m.Path), m.Line, output.EscapeLine(m.Text))
	}
	return nil
}

func newUploadCmd(app *App) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "upload LOCAL REMOTE",
		Short: "Copy a host file or directory into the sandbox (streamed)",
		Example: `  sandbox --sandbox-id sb-1a2b upload ./src /workspace/src
  sandbox upload ./data.csv /workspace/`,
		Args: exactArgs(2, "upload needs a local path and a sandbox path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				p := app.progress("upload")
				err := s.Upload(ctx, args[0], args[1], engine.TransferOptions{Force: force, Progress: p.update})
				p.done(err)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite existing files in the sandbox")
	return cmd
}

func newDownloadCmd(app *App) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "download REMOTE LOCAL",
		Short: "Copy a sandbox file or directory to the host (streamed)",
		Args:  exactArgs(2, "download needs a sandbox path and a local path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.withCall(cmd, func(ctx context.Context, s *engine.Session) error {
				p := app.progress("download")
				err := s.Download(ctx, args[0], args[1], engine.TransferOptions{Force: force, Progress: p.update})
				p.done(err)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing local file or directory")
	return cmd
}

func exactArgs(n int, msg string) cobra.PositionalArgs {
	return rangeArgs(n, n, msg)
}

func rangeArgs(lo, hi int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return &UsageError{Err: fmt.Errorf("%s (got %d arguments)", msg, len(args))}
		}
		return nil
	}
}
