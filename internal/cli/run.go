package cli

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/driver"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/events"
)

func newRunCmd(app *App) *cobra.Command {
	var keepGoing bool
	cmd := &cobra.Command{
		Use:   "run PLAN",
		Short: "Run a plan of operations (YAML file, or JSON Lines on stdin with `-`) through the gate",
		Long: `Run executes a plan's steps in order, each approved as source "script": with no
terminal, a step the policy does not allow is denied (exit 3) and the message
names the --allow rule that would permit it. The run stops at the first
failing step unless the step has continue_on_error: true.

  steps:
    - exec: "go test ./..."
    - write: {path: /workspace/notes.txt, content: "hello\n"}
    - edit: {path: /workspace/notes.txt, old: "hello", new: "bye"}
    - read: /workspace/notes.txt
    - upload: {from: ./src, to: /workspace/src}
    - download: {from: /workspace/out, to: ./out}

With --json the run is a stream of JSON Lines events (see "Events" in the
README): run.started, the sandbox's lifecycle, each step's calls
(call.requested, call.decided, call.output while it runs, call.completed
with the step and its line), and run.completed or run.failed last.`,
		Example: `  sandbox run plan.yaml --policy policy.yaml --json
  printf '{"exec":"echo hi"}\n' | sandbox run - --yes`,
		Args: exactArgs(1, "run needs a plan file (or - for JSON Lines on stdin)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Before the plan is read: one on stdin would be gone for
			// the program the run is handed to.
			eng, err := app.Engine()
			if err != nil {
				return err
			}
			if _, err := app.handOver(eng, app.flags.provider, app.flags.sandboxID); err != nil {
				return err
			}
			plan, err := loadPlan(app, args[0])
			if err != nil {
				return err
			}
			if keepGoing {
				for i := range plan.Steps {
					plan.Steps[i].ContinueOnError = true
				}
			}
			o := driver.Options{Timeout: app.flags.timeout, Mask: app.masker.String, MaskWriter: app.masker.Writer}
			if app.stream != nil {
				o.Events = func(ev events.Event) { app.stream.write(ev) }
			} else {
				o.Stdout = app.masker.Writer(app.streams.Out)
				o.Stderr = app.masker.Writer(app.streams.Err)
				o.Progress = app.streams.Err
			}
			return app.withSession(cmd, func(ctx context.Context, s *engine.Session) error {
				err := driver.Run(ctx, s, plan, o)
				for _, w := range []any{o.Stdout, o.Stderr} {
					if c, ok := w.(interface{ Close() error }); ok {
						c.Close()
					}
				}
				var se *driver.StepError
				if errors.As(err, &se) && se.Err == nil {
					app.printError(err)
					return &ExitStatus{Code: se.ExitCode}
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&keepGoing, "keep-going", false, "run every step even after failures (as if each had continue_on_error)")
	return cmd
}

func loadPlan(app *App, name string) (*driver.Plan, error) {
	var (
		plan *driver.Plan
		err  error
	)
	if name == "-" {
		plan, err = driver.ParseJSONL("stdin", app.streams.In)
	} else {
		data, rerr := os.ReadFile(name)
		if rerr != nil {
			return nil, &UsageError{Err: rerr}
		}
		plan, err = driver.ParsePlan(name, data)
	}
	var pe *driver.PlanError
	if errors.As(err, &pe) {
		return nil, &UsageError{Err: err}
	}
	return plan, err
}
