// Package setup runs setup scripts in a fresh or reused sandbox: it hashes
// the script, skips it when a stamp with the same hash is already inside the
// sandbox, streams its output live, honours a timeout, and keeps the tail of
// the output for the error shown when it fails.
//
// The package does not know about providers or the approval gate: it runs
// commands through the small Runner interface, which the engine satisfies
// with the gated sandbox so setup is audited like any other operation.
package setup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// DefaultTimeout bounds a setup script when no timeout is given.
const DefaultTimeout = 15 * time.Minute

// TailLines is how many lines of output a failure shows.
const TailLines = 20

// stampDir is where stamps live inside the sandbox, relative to $HOME so it
// works whatever the provider's home and user are.
const stampDir = "$HOME/.cache/sandbox/setup"

// Runner runs one command in the sandbox.
type Runner interface {
	Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error)
}

// Script is a setup script read from the host.
type Script struct {
	// Path is where it was read from, for messages.
	Path    string
	Content []byte
	// Hash is the hex sha256 of Content.
	Hash string
}

// Load reads a script file.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read setup script: %w", err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("setup script %s is empty", path)
	}
	sum := sha256.Sum256(data)
	return &Script{Path: path, Content: data, Hash: hex.EncodeToString(sum[:])}, nil
}

// Argv is the command that runs the script read from stdin: the interpreter
// named by its #! line, else /bin/sh.
func (s *Script) Argv() []string {
	first, _, _ := bytes.Cut(s.Content, []byte("\n"))
	if rest, ok := bytes.CutPrefix(first, []byte("#!")); ok {
		fields := strings.Fields(string(rest))
		if len(fields) > 0 {
			// "#!/usr/bin/env bash" keeps env; the script comes on stdin.
			return append(fields, "/dev/stdin")
		}
	}
	return []string{"/bin/sh", "-s"}
}

// StampCommand is the shell command that succeeds when the stamp exists.
func (s *Script) StampCommand() string {
	return fmt.Sprintf(`test -f "%s/%s"`, stampDir, s.Hash)
}

// WriteStampCommand is the shell command that records a successful run.
func (s *Script) WriteStampCommand() string {
	return fmt.Sprintf(`mkdir -p "%s" && : > "%s/%s"`, stampDir, stampDir, s.Hash)
}

// Options tune one run.
type Options struct {
	// Env is the sandbox environment (--env values) for the script.
	Env map[string]string
	// Timeout bounds the script; zero means DefaultTimeout.
	Timeout time.Duration
	// Output receives the script's stdout and stderr live; may be nil.
	Output io.Writer
	// Network for the script (setup defaults to on).
	Network providers.Network
	// Force runs the script even when its stamp is present.
	Force bool
}

// Result says what happened.
type Result struct {
	// Skipped is true when the stamp showed the same script already ran.
	Skipped  bool
	ExitCode int
	Duration time.Duration
}

// Error is a failed setup: the script's status and the tail of its output.
type Error struct {
	Script   string
	ExitCode int
	Tail     []string
	Err      error
}

// Error describes the failure with the output's last lines.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Err != nil && errors.Is(e.Err, providers.ErrTimeout):
		fmt.Fprintf(&b, "setup script %s timed out", e.Script)
	case e.Err != nil:
		fmt.Fprintf(&b, "setup script %s could not run: %v", e.Script, e.Err)
	default:
		fmt.Fprintf(&b, "setup script %s failed with exit status %d", e.Script, e.ExitCode)
	}
	if len(e.Tail) > 0 {
		fmt.Fprintf(&b, "; last %d lines of its output:\n", len(e.Tail))
		for _, l := range e.Tail {
			b.WriteString("  | " + l + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Run runs the script in sandbox id unless its stamp is already there.
func Run(ctx context.Context, r Runner, id string, s *Script, opts Options) (Result, error) {
	if !opts.Force {
		res, err := r.Exec(ctx, id, providers.ExecRequest{Shell: s.StampCommand(), Env: opts.Env})
		if err != nil {
			return Result{}, &Error{Script: s.Path, Err: fmt.Errorf("check setup stamp: %w", err)}
		}
		if res.ExitCode == 0 {
			return Result{Skipped: true}, nil
		}
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tail := &tailBuffer{max: TailLines}
	var out io.Writer = tail
	if opts.Output != nil {
		out = io.MultiWriter(opts.Output, tail)
	}
	sync := &lockedWriter{w: out}
	res, err := r.Exec(ctx, id, providers.ExecRequest{
		Argv:    s.Argv(),
		Stdin:   bytes.NewReader(s.Content),
		Env:     opts.Env,
		Stdout:  sync,
		Stderr:  sync,
		Timeout: timeout,
		Network: opts.Network,
	})
	if err != nil {
		return Result{}, &Error{Script: s.Path, Err: err, Tail: tail.Lines()}
	}
	if res.ExitCode != 0 {
		return Result{ExitCode: res.ExitCode}, &Error{Script: s.Path, ExitCode: res.ExitCode, Tail: tail.Lines()}
	}
	if _, err := r.Exec(ctx, id, providers.ExecRequest{Shell: s.WriteStampCommand(), Env: opts.Env}); err != nil {
		return Result{}, &Error{Script: s.Path, Err: fmt.Errorf("write setup stamp: %w", err)}
	}
	return Result{Duration: res.Duration}, nil
}

// lockedWriter serialises stdout and stderr writes that arrive concurrently.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tailBuffer keeps the last max lines written to it in bounded memory.
type tailBuffer struct {
	max     int
	lines   []string
	partial []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.partial = append(t.partial, p...)
			if len(t.partial) > 4096 {
				t.partial = t.partial[len(t.partial)-4096:]
			}
			break
		}
		t.push(string(append(t.partial, p[:i]...)))
		t.partial = t.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (t *tailBuffer) push(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// Lines returns the kept lines, including an unterminated last line.
func (t *tailBuffer) Lines() []string {
	out := append([]string(nil), t.lines...)
	if len(t.partial) > 0 {
		out = append(out, string(t.partial))
	}
	if len(out) > t.max {
		out = out[len(out)-t.max:]
	}
	return out
}
