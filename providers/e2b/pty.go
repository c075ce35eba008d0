package e2b

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

var _ providers.Terminal = (*Provider)(nil)

// ExecTerminal runs a command on an envd PTY (providers.Terminal): a
// process.Start stream with a pty whose output events are the terminal's
// output; input goes with SendInput, resizes with Update.
func (p *Provider) ExecTerminal(ctx context.Context, id string, req providers.ExecRequest, term providers.TerminalRequest) (providers.TerminalSession, error) {
	if req.Background {
		return nil, fmt.Errorf("e2b: exec: a command on a terminal cannot run in the background: %w", providers.ErrInvalid)
	}
	cfg, err := processConfig(req)
	if err != nil {
		return nil, err
	}
	term = term.WithDefaults()
	cfg.Envs = term.Env(cfg.Envs)
	pty := &wire.PTY{}
	pty.Size.Cols, pty.Size.Rows = uint32(term.Cols), uint32(term.Rows)
	op := "exec on a terminal in " + id
	sctx, cancel := context.WithCancel(ctx)
	body, err := p.stream(sctx, id, op, wire.ProcessStart, wire.StartRequest{Process: cfg, PTY: pty}, 0, req.User)
	if err != nil {
		cancel()
		return nil, p.execErr(ctx, req, err, op)
	}
	var ev wire.StreamEvent
	for ev.Event.Start == nil {
		done, err := nextMessage(body, op, &ev)
		if err == nil && done {
			err = providers.Errorf(providers.ErrUnavailable, Name, op, "the stream ended before the process started")
		}
		if err != nil {
			body.Close()
			cancel()
			return nil, p.execErr(ctx, req, err, op)
		}
	}
	out, w := io.Pipe()
	s := &terminal{p: p, id: id, op: op, pid: ev.Event.Start.PID, ctx: sctx, cancel: cancel, out: out, done: make(chan struct{}), start: time.Now()}
	go s.follow(body, w, req)
	return s, nil
}

// terminal is a process on an envd PTY (providers.TerminalSession).
type terminal struct {
	p      *Provider
	id, op string
	pid    uint32
	ctx    context.Context
	cancel context.CancelFunc
	out    *io.PipeReader
	start  time.Time

	// done is closed once res and err are set.
	done chan struct{}
	res  providers.ExecResult
	err  error

	closeOnce sync.Once
}

// follow copies the stream's PTY output into w until the end event.
func (s *terminal) follow(body io.ReadCloser, w *io.PipeWriter, req providers.ExecRequest) {
	defer close(s.done)
	defer body.Close()
	for {
		var ev wire.StreamEvent
		done, err := nextMessage(body, s.op, &ev)
		if err == nil && done {
			err = providers.Errorf(providers.ErrUnavailable, Name, s.op, "the stream ended without the command's exit status")
		}
		if err != nil {
			s.err = s.p.execErr(s.ctx, req, err, s.op)
			w.Close()
			return
		}
		switch e := ev.Event; {
		case e.Data != nil && len(e.Data.PTY) > 0:
			if _, err := w.Write(e.Data.PTY); err != nil {
				// Nobody reads any more (Close): keep following
				// for the end.
				continue
			}
		case e.End != nil:
			s.res = providers.ExecResult{ExitCode: exitCode(e.End), Duration: time.Since(s.start)}
			w.Close()
			return
		}
	}
}

// Read returns the terminal's output, io.EOF after the end.
func (s *terminal) Read(b []byte) (int, error) { return s.out.Read(b) }

// Write sends input to the terminal.
func (s *terminal) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	err := s.p.unary(s.ctx, s.id, "input to "+s.op, wire.ProcessSendInput,
		wire.SendInputRequest{Process: wire.ProcessSelector{PID: s.pid}, Input: wire.ProcessInput{PTY: b}}, nil, false)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// Resize changes the terminal's size.
func (s *terminal) Resize(cols, rows uint16) error {
	pty := &wire.PTY{}
	pty.Size.Cols, pty.Size.Rows = uint32(cols), uint32(rows)
	return s.p.unary(s.ctx, s.id, "resize of "+s.op, wire.ProcessUpdate,
		wire.UpdateRequest{Process: wire.ProcessSelector{PID: s.pid}, PTY: pty}, nil, true)
}

// Wait waits for the command's end.
func (s *terminal) Wait() (providers.ExecResult, error) {
	<-s.done
	return s.res, s.err
}

// Close kills the command if it still runs and ends the stream.
func (s *terminal) Close() error {
	s.closeOnce.Do(func() {
		select {
		case <-s.done:
		default:
			s.p.killQuietly(s.id, s.pid)
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
			}
		}
		s.cancel()
		<-s.done
		s.out.CloseWithError(io.EOF)
	})
	return nil
}
