package driver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// Options configure a run.
type Options struct {
	// Events, when set, receives the call.output events of the steps'
	// output, which then goes nowhere else; the gate reports the rest of
	// each call (call.requested, call.decided, call.completed) through the
	// engine.
	Events func(events.Event)
	// Stdout and Stderr receive live output (and read results) when
	// Events is nil; may be nil.
	Stdout, Stderr io.Writer
	// Progress receives "step N/M: ..." lines, escaped (output.Escape);
	// may be nil.
	Progress io.Writer
	// Mask masks secrets in progress lines; nil masks nothing.
	Mask func(string) string
	// MaskWriter, when set, wraps each stream of output that becomes
	// events, so that secrets are masked in the raw bytes before they are
	// encoded, also when a secret is split across two writes. Closing it
	// flushes what it held back. Nil masks nothing.
	MaskWriter func(io.Writer) io.WriteCloser
	// Timeout bounds each step without its own timeout.
	Timeout time.Duration
}

// StepError is the failure that stopped a plan.
type StepError struct {
	Step  Step
	Index int
	// ExitCode is the failing exec's status (0 when the step did not run a
	// command).
	ExitCode int
	Err      error
}

// Error names the step and its location.
func (e *StepError) Error() string {
	loc := fmt.Sprintf("step %d (line %d, %s %q)", e.Index, e.Step.Line, e.Step.Op, e.Step.Target())
	if e.Err != nil {
		return loc + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s exited with status %d", loc, e.ExitCode)
}

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// Run executes the plan's steps in order through the session's gate, tagged
// with source "script" and each with its step number and line. It stops at
// the first failing step unless that step has continue_on_error, and
// returns a *StepError for the step that stopped it. Interrupting ctx
// stops the run.
func Run(ctx context.Context, s *engine.Session, plan *Plan, o Options) error {
	ctx = approval.WithSource(ctx, approval.SourceScript)
	if o.Mask == nil {
		o.Mask = func(s string) string { return s }
	}
	for i, st := range plan.Steps {
		idx := i + 1
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "step %d/%d: %s %s\n", idx, len(plan.Steps), output.Escape(st.Op), output.Escape(o.Mask(st.Target())))
		}
		current := &events.CurrentCall{}
		sctx := approval.WithCallObserver(approval.WithStep(ctx, idx, st.Line), current.Set)
		// The step's output is written (and flushed) before its calls
		// are reported completed.
		sctx, release := approval.HoldCompletions(sctx)
		code, err := runStep(sctx, s, st, o, stepOutput(o, current))
		release()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if (err != nil || code != 0) && !st.ContinueOnError {
			return &StepError{Step: st, Index: idx, ExitCode: code, Err: err}
		}
	}
	return nil
}

// stepStreams is where a step's output goes: the live streams, or events.
type stepStreams struct {
	stdout, stderr io.Writer
	// exact is set when the output becomes events: listings are then
	// kept exact rather than escaped for a terminal.
	exact bool
	close func()
}

// stepOutput returns the streams of one step's output: o.Stdout and
// o.Stderr, or, with o.Events, writers of call.output events for the call
// current is at.
func stepOutput(o Options, current *events.CurrentCall) stepStreams {
	if o.Events == nil {
		return stepStreams{stdout: o.Stdout, stderr: o.Stderr, close: func() {}}
	}
	w := func(stream string) io.WriteCloser {
		return events.OutputWriter(events.OutputOptions{Stream: stream, CallID: current.ID, Emit: o.Events, MaskWriter: o.MaskWriter})
	}
	stdout, stderr := w("stdout"), w("stderr")
	return stepStreams{stdout: stdout, stderr: stderr, exact: true, close: func() {
		stdout.Close()
		stderr.Close()
	}}
}

// runStep runs one step, its output to out. Listings (ls, glob, grep) are
// escaped on a live stream (output.Escape), so names from the sandbox
// cannot drive a terminal; events keep them exact.
func runStep(ctx context.Context, s *engine.Session, st Step, o Options, out stepStreams) (code int, err error) {
	defer out.close()
	timeout := st.Timeout
	if timeout == 0 {
		timeout = o.Timeout
	}
	if st.Op != "exec" {
		var cancel context.CancelFunc
		ctx, cancel = engine.WithCallTimeout(ctx, timeout, fmt.Sprintf("step timeout %s", timeout))
		defer cancel()
	}
	line := func(escaped, exact string) {
		if out.stdout == nil {
			return
		}
		if out.exact {
			escaped = exact
		}
		io.WriteString(out.stdout, escaped+"\n")
	}
	switch st.Op {
	case "exec":
		var res providers.ExecResult
		res, err = s.Exec(ctx, providers.ExecRequest{Shell: st.Command, Argv: st.Argv, Cwd: st.Cwd, Timeout: timeout, Stdout: orDiscard(out.stdout), Stderr: orDiscard(out.stderr)})
		code = res.ExitCode
	case "write":
		err = s.Write(ctx, st.Path, strings.NewReader(st.Content), st.Force)
	case "edit":
		_, err = s.Edit(ctx, st.Path, st.Old, st.New, st.All)
	case "read":
		err = s.Read(ctx, st.Path, orDiscard(out.stdout))
	case "ls":
		var list []providers.FileInfo
		if list, err = s.Ls(ctx, st.Path, max(st.Depth, 1)); err == nil {
			for _, fi := range list {
				line(output.Escape(fi.Path), fi.Path)
			}
		}
	case "glob":
		var list []providers.FileInfo
		if list, err = s.Glob(ctx, or(st.Path, providers.DefaultWorkdir), st.Pattern); err == nil {
			for _, fi := range list {
				line(output.Escape(fi.Path), fi.Path)
			}
		}
	case "grep":
		var ms []providers.GrepMatch
		if ms, err = s.Grep(ctx, providers.GrepRequest{Pattern: st.Pattern, Path: or(st.Path, providers.DefaultWorkdir)}); err == nil {
			for _, m := range ms {
				line(fmt.Sprintf("%s:%d:%s", output.Escape(m.Path), m.Line, output.EscapeLine(m.Text)),
					fmt.Sprintf("%s:%d:%s", m.Path, m.Line, m.Text))
			}
		}
	case "upload":
		err = s.Upload(ctx, st.From, st.To, engine.TransferOptions{Force: st.Force})
	case "download":
		err = s.Download(ctx, st.From, st.To, engine.TransferOptions{Force: st.Force})
	default:
		err = fmt.Errorf("unknown operation %q", st.Op)
	}
	return code, engine.CallError(ctx, err)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
