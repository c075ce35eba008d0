package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// stdinChunk is the most stdin bytes sent in one message.
const stdinChunk = 64 << 10

// Exec runs a command through envd's process.Start stream, as req.User
// when set (else the configured user). Argv runs the program directly;
// Shell runs /bin/sh -c. Output is written as each event
// arrives. Timeout is sent as the Connect deadline, which envd also applies
// to the process. Cancelling ctx kills the process.
func (p *Provider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	start := time.Now()
	cfg, err := processConfig(req)
	if err != nil {
		return providers.ExecResult{}, err
	}
	useStdin := req.Stdin != nil
	sreq := wire.StartRequest{Process: cfg, Stdin: &useStdin}
	op := "exec in " + id

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timeoutMs int64
	if req.Timeout > 0 {
		timeoutMs = max(req.Timeout.Milliseconds(), 1)
		// envd ends the stream at the deadline; this is a safety net for
		// a server that does not.
		var stop context.CancelFunc
		sctx, stop = context.WithTimeout(sctx, req.Timeout+15*time.Second)
		defer stop()
	}
	body, err := p.stream(sctx, id, op, wire.ProcessStart, sreq, timeoutMs, req.User)
	if err != nil {
		return providers.ExecResult{}, p.execErr(ctx, req, err, op)
	}
	defer body.Close()

	stdout, stderr := orDiscard(req.Stdout), orDiscard(req.Stderr)
	var pid uint32
	var feed sync.WaitGroup
	feedCtx, stopFeed := context.WithCancel(sctx)
	defer func() { stopFeed(); feed.Wait() }()
	for {
		var ev wire.StreamEvent
		done, err := nextMessage(body, op, &ev)
		if err != nil || done {
			if err == nil {
				err = providers.Errorf(providers.ErrUnavailable, Name, op, "the stream ended without the command's exit status")
			}
			if pid != 0 && !errors.Is(err, providers.ErrTimeout) && !errors.Is(err, providers.ErrDenied) {
				p.killQuietly(id, pid)
				if ctx.Err() == nil {
					err = fmt.Errorf("%w (output may be incomplete; the command was killed)", err)
				}
			}
			return providers.ExecResult{Duration: time.Since(start)}, p.execErr(ctx, req, err, op)
		}
		e := ev.Event
		switch {
		case e.Start != nil:
			pid = e.Start.PID
			if useStdin && pid != 0 {
				feed.Add(1)
				go func() {
					defer feed.Done()
					p.feedStdin(feedCtx, id, pid, req.Stdin)
				}()
			}
		case e.Data != nil:
			if len(e.Data.Stdout) > 0 {
				if _, err := stdout.Write(e.Data.Stdout); err != nil {
					p.killQuietly(id, pid)
					return providers.ExecResult{}, fmt.Errorf("e2b: %s: writing output: %w", op, err)
				}
			}
			if len(e.Data.Stderr) > 0 {
				if _, err := stderr.Write(e.Data.Stderr); err != nil {
					p.killQuietly(id, pid)
					return providers.ExecResult{}, fmt.Errorf("e2b: %s: writing output: %w", op, err)
				}
			}
		case e.End != nil:
			return providers.ExecResult{ExitCode: exitCode(e.End), Duration: time.Since(start)}, nil
		}
	}
}

// execErr turns a failed stream into the contract's errors: the caller's
// cancellation wins, a deadline is ErrTimeout, a user envd does not know
// (which it answers as unauthenticated) is ErrInvalid.
func (p *Provider) execErr(ctx context.Context, req providers.ExecRequest, err error, op string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if req.User != "" && errors.Is(err, providers.ErrAuth) && strings.Contains(err.Error(), "invalid username") {
		return providers.Errorf(providers.ErrInvalid, Name, op, "user %q: %v", req.User, err)
	}
	if req.Timeout > 0 && (errors.Is(err, providers.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)) {
		return &providers.Error{Kind: providers.ErrTimeout, Provider: Name, Op: op, Msg: fmt.Sprintf("command did not finish within %v and was killed", req.Timeout), Err: err}
	}
	return err
}

// processConfig builds envd's process from a request.
func processConfig(req providers.ExecRequest) (wire.ProcessConfig, error) {
	var cfg wire.ProcessConfig
	switch {
	case len(req.Argv) > 0 && req.Shell != "":
		return cfg, fmt.Errorf("e2b: exec: both Argv and Shell set: %w", providers.ErrInvalid)
	case len(req.Argv) > 0:
		cfg.Cmd, cfg.Args = req.Argv[0], req.Argv[1:]
	case req.Shell != "":
		cfg.Cmd, cfg.Args = "/bin/sh", []string{"-c", req.Shell}
	default:
		return cfg, fmt.Errorf("e2b: exec: no command: %w", providers.ErrInvalid)
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = providers.DefaultWorkdir
	}
	cfg.Cwd = &cwd
	cfg.Envs = req.Env
	return cfg, nil
}

// exitCode maps envd's end event to 0..255 or 128+signal.
func exitCode(e *wire.EndEvent) int {
	if e.Exited || e.ExitCode > 0 {
		return int(e.ExitCode)
	}
	if sig, ok := strings.CutPrefix(e.Status, "signal: "); ok {
		if n, ok := signalNumbers[sig]; ok {
			return 128 + n
		}
		return 128 + 9
	}
	if e.ExitCode < 0 {
		return 128 + 9
	}
	return int(e.ExitCode)
}

// signalNumbers are the Linux numbers of the signal names Go prints.
var signalNumbers = map[string]int{
	"hangup": 1, "interrupt": 2, "quit": 3, "illegal instruction": 4, "trace/breakpoint trap": 5,
	"aborted": 6, "bus error": 7, "floating point exception": 8, "killed": 9, "user defined signal 1": 10,
	"segmentation fault": 11, "user defined signal 2": 12, "broken pipe": 13, "alarm clock": 14, "terminated": 15,
}

// feedStdin streams r to the process with StreamInput, then closes its
// stdin. Errors after the process ended are expected and dropped.
func (p *Provider) feedStdin(ctx context.Context, id string, pid uint32, r io.Reader) {
	op := "stdin of " + id
	req, err := p.envdRequest(ctx, id, op, wire.ProcessStreamInput)
	if err != nil {
		return
	}
	pr, pw := io.Pipe()
	go func() {
		var start wire.StreamInputRequest
		start.Start = &struct {
			Process wire.ProcessSelector `json:"process"`
		}{Process: wire.ProcessSelector{PID: pid}}
		if err := wire.WriteMessage(pw, start); err != nil {
			pw.CloseWithError(err)
			return
		}
		buf := make([]byte, stdinChunk)
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				var msg wire.StreamInputRequest
				msg.Data = &struct {
					Input wire.ProcessInput `json:"input"`
				}{Input: wire.ProcessInput{Stdin: bytes.Clone(buf[:n])}}
				if err := wire.WriteMessage(pw, msg); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			if rerr != nil {
				if rerr == io.EOF {
					pw.Close()
				} else {
					pw.CloseWithError(rerr)
				}
				return
			}
		}
	}()
	req.stream = pr
	req.header.Set("Content-Type", wire.ContentTypeStream)
	req.header.Set("Connect-Protocol-Version", "1")
	resp, err := p.do(ctx, req)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = p.unary(ctx, id, "close stdin of "+id, wire.ProcessCloseStdin, wire.SelectRequest{Process: wire.ProcessSelector{PID: pid}}, nil, true)
}

// killQuietly sends SIGKILL to a process this client started and gave up on.
func (p *Provider) killQuietly(id string, pid uint32) {
	if pid == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Signal(ctx, id, pid, wire.SignalSIGKILL)
}

// Signal sends a signal to a process of the sandbox.
func (p *Provider) Signal(ctx context.Context, id string, pid uint32, sig wire.Signal) error {
	return p.unary(ctx, id, fmt.Sprintf("signal process %d in %s", pid, id), wire.ProcessSendSignal,
		wire.SendSignalRequest{Process: wire.ProcessSelector{PID: pid}, Signal: sig}, nil, true)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
