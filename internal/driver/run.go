package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// outputLimit bounds the output kept in a step event; the live stream is
// never cut.
const outputLimit = 256 << 10

// StepEvent is the --json record of one finished step.
type StepEvent struct {
	Type   string `json:"type"` // "step"
	Index  int    `json:"index"`
	Line   int    `json:"line"`
	Op     string `json:"op"`
	Target string `json:"target"`
	// Status is ok, failed (ran but failed), denied, or error.
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// Output is what the step printed (stdout and stderr), secrets
	// masked. When it is not valid UTF-8, each invalid byte is U+FFFD here
	// and OutputB64 holds the exact bytes.
	Output    string `json:"output,omitempty"`
	OutputB64 string `json:"output_b64,omitempty"`
	// Truncated is true when Output was cut to its limit.
	Truncated  bool   `json:"truncated,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Options configure a run.
type Options struct {
	// Events receives one StepEvent per step; may be nil.
	Events func(StepEvent)
	// Stdout and Stderr receive live output (and read results); may be nil.
	Stdout, Stderr io.Writer
	// Progress receives "step N/M: ..." lines, escaped (output.Escape);
	// may be nil.
	Progress io.Writer
	// Mask masks secrets in the targets and errors of StepEvents and
	// progress lines; nil masks nothing.
	Mask func(string) string
	// MaskWriter, when set, wraps the writer that keeps a step's output
	// for its StepEvent, once for stdout and once for stderr, so that
	// secrets are masked in the raw bytes before they are encoded, also
	// when a secret is split across two writes. Closing it flushes what it
	// held back. Nil masks nothing.
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
// with source "script". It stops at the first failing step unless that step
// has continue_on_error, and returns a *StepError for the step that stopped
// it. Interrupting ctx stops the run.
func Run(ctx context.Context, s *engine.Session, plan *Plan, o Options) error {
	ctx = approval.WithSource(ctx, approval.SourceScript)
	if o.Mask == nil {
		o.Mask = func(s string) string { return s }
	}
	for i, st := range plan.Steps {
		idx := i + 1
		target := o.Mask(st.Target())
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "step %d/%d: %s %s\n", idx, len(plan.Steps), output.Escape(st.Op), output.Escape(target))
		}
		start := time.Now()
		code, out, truncated, err := runStep(ctx, s, st, o)
		ev := StepEvent{Type: "step", Index: idx, Line: st.Line, Op: st.Op, Target: target, Truncated: truncated, DurationMS: time.Since(start).Milliseconds()}
		ev.Output, ev.OutputB64 = output.TextOrBase64(out)
		if st.Op == "exec" && err == nil {
			ev.ExitCode = &code
		}
		var denied *approval.DeniedError
		switch {
		case errors.As(err, &denied):
			ev.Status, ev.Error = "denied", o.Mask(err.Error())
		case err != nil:
			ev.Status, ev.Error = "error", o.Mask(err.Error())
		case code != 0:
			ev.Status = "failed"
		default:
			ev.Status = "ok"
		}
		if o.Events != nil {
			o.Events(ev)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if (err != nil || code != 0) && !st.ContinueOnError {
			return &StepError{Step: st, Index: idx, ExitCode: code, Err: err}
		}
	}
	return nil
}

// runStep runs one step. Its output goes live to o.Stdout and o.Stderr
// and, masked per stream, to the capture returned for the StepEvent.
// Listings (ls, glob, grep) are escaped on the live stream (output.Escape),
// so names from the sandbox cannot drive a terminal; the capture keeps
// them exact, for JSON.
func runStep(ctx context.Context, s *engine.Session, st Step, o Options) (code int, out []byte, truncated bool, err error) {
	timeout := st.Timeout
	if timeout == 0 {
		timeout = o.Timeout
	}
	capture := &capBuffer{limit: outputLimit}
	capOut, capErr := maskCapture(o, capture), maskCapture(o, capture)
	stdout := writers(o.Stdout, capOut)
	stderr := writers(o.Stderr, capErr)
	if st.Op != "exec" {
		var cancel context.CancelFunc
		ctx, cancel = engine.WithCallTimeout(ctx, timeout, fmt.Sprintf("step timeout %s", timeout))
		defer cancel()
	}
	switch st.Op {
	case "exec":
		var res providers.ExecResult
		res, err = s.Exec(ctx, providers.ExecRequest{Shell: st.Command, Argv: st.Argv, Cwd: st.Cwd, Timeout: timeout, Stdout: stdout, Stderr: stderr})
		code = res.ExitCode
	case "write":
		err = s.Write(ctx, st.Path, strings.NewReader(st.Content), st.Force)
	case "edit":
		var res approval.EditResult
		if res, err = s.Edit(ctx, st.Path, st.Old, st.New, st.All); err == nil {
			io.WriteString(capOut, res.Diff)
		}
	case "read":
		err = s.Read(ctx, st.Path, stdout)
	case "ls":
		var list []providers.FileInfo
		if list, err = s.Ls(ctx, st.Path, max(st.Depth, 1)); err == nil {
			for _, fi := range list {
				listLine(o.Stdout, capOut, output.Escape(fi.Path), fi.Path)
			}
		}
	case "glob":
		var list []providers.FileInfo
		if list, err = s.Glob(ctx, or(st.Path, providers.DefaultWorkdir), st.Pattern); err == nil {
			for _, fi := range list {
				listLine(o.Stdout, capOut, output.Escape(fi.Path), fi.Path)
			}
		}
	case "grep":
		var ms []providers.GrepMatch
		if ms, err = s.Grep(ctx, providers.GrepRequest{Pattern: st.Pattern, Path: or(st.Path, providers.DefaultWorkdir)}); err == nil {
			for _, m := range ms {
				listLine(o.Stdout, capOut,
					fmt.Sprintf("%s:%d:%s", output.Escape(m.Path), m.Line, output.EscapeLine(m.Text)),
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
	capOut.Close()
	capErr.Close()
	out, truncated = capture.bytes()
	return code, out, truncated, engine.CallError(ctx, err)
}

// listLine prints one line of a listing: escaped on the live stream (when
// there is one), exact in the capture.
func listLine(live, capture io.Writer, escaped, exact string) {
	if live != nil {
		io.WriteString(live, escaped+"\n")
	}
	io.WriteString(capture, exact+"\n")
}

// maskCapture wraps capture in o.MaskWriter, or only adds a Close.
func maskCapture(o Options, capture io.Writer) io.WriteCloser {
	if o.MaskWriter == nil {
		return nopCloser{capture}
	}
	return o.MaskWriter(capture)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func writers(live io.Writer, capture io.Writer) io.Writer {
	if live == nil {
		return capture
	}
	return io.MultiWriter(live, capture)
}

// capBuffer keeps the first limit bytes written, safe for the concurrent
// stdout and stderr writers of one command.
type capBuffer struct {
	mu        sync.Mutex
	b         strings.Builder
	limit     int
	truncated bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.truncated {
		return len(p), nil
	}
	room := c.limit - c.b.Len()
	if room < len(p) {
		c.truncated = true
		// Cut before a UTF-8 character that would be cut in two.
		cut := max(room, 0)
		for back := 1; back < utf8.UTFMax && cut > 0 && !utf8.RuneStart(p[cut]); back++ {
			cut--
		}
		if !utf8.RuneStart(p[cut]) {
			cut = max(room, 0) // not UTF-8 here: cut at the limit
		}
		c.b.Write(p[:cut])
		return len(p), nil
	}
	c.b.Write(p)
	return len(p), nil
}

// bytes returns what was kept and whether anything was cut.
func (c *capBuffer) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return []byte(c.b.String()), c.truncated
}
