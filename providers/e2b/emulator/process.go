package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator/httpguard"
)

// process is one command started through process.Start.
type process struct {
	pid    uint32
	cfg    wire.ProcessConfig
	tag    *string
	cancel context.CancelFunc
	done   chan struct{}

	// stdin, when the process takes input, queues chunks for the feeder;
	// closeStdin ends the input after the queued chunks.
	stdin      chan []byte
	closeStdin chan struct{}
	closeOnce  sync.Once

	// term is the terminal of a process started with a PTY (nil
	// otherwise); set before the process is visible.
	term providers.TerminalSession

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	signal string
}

// subscriber is one stream (Start or Connect) following a process.
type subscriber struct {
	ch   chan message
	gone chan struct{}
}

// message is what a subscriber receives: an event, or the end of the
// process with an optional stream error.
type message struct {
	event  *wire.ProcessEvent
	final  bool
	endErr *rpcError
}

func (p *process) subscribe() *subscriber {
	sub := &subscriber{ch: make(chan message, 32), gone: make(chan struct{})}
	p.mu.Lock()
	p.subs[sub] = struct{}{}
	p.mu.Unlock()
	return sub
}

func (p *process) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	delete(p.subs, sub)
	p.mu.Unlock()
	close(sub.gone)
}

// publish hands m to every subscriber, waiting for each to take it (so a
// slow reader slows the command's output rather than growing a buffer);
// a subscriber that went away is skipped.
func (p *process) publish(m message) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- m:
		case <-s.gone:
		}
	}
}

// Streams of a process's output.
const (
	streamStdout = iota
	streamStderr
	streamPTY
)

// outputWriter turns a command's writes into data events of one stream.
type outputWriter struct {
	p      *process
	stream int
}

func (w outputWriter) Write(b []byte) (int, error) {
	data := &wire.DataEvent{}
	switch w.stream {
	case streamStderr:
		data.Stderr = bytes.Clone(b)
	case streamPTY:
		data.PTY = bytes.Clone(b)
	default:
		data.Stdout = bytes.Clone(b)
	}
	w.p.publish(message{event: &wire.ProcessEvent{Data: data}})
	return len(b), nil
}

// feed copies queued stdin chunks into the command until stdin is closed
// or the command ends.
func (p *process) feed(w *io.PipeWriter) {
	write := func(b []byte) {
		if _, err := w.Write(b); err != nil {
			// The command stopped reading; later input is dropped.
			return
		}
	}
	for {
		select {
		case b := <-p.stdin:
			write(b)
		case <-p.closeStdin:
			for {
				select {
				case b := <-p.stdin:
					write(b)
				default:
					w.Close()
					return
				}
			}
		case <-p.done:
			w.CloseWithError(io.ErrClosedPipe)
			return
		}
	}
}

// killAll stops every process of the sandbox.
func (sb *sandbox) killAll() {
	sb.mu.Lock()
	procs := make([]*process, 0, len(sb.procs))
	for _, p := range sb.procs {
		procs = append(procs, p)
	}
	sb.mu.Unlock()
	for _, p := range procs {
		p.cancel()
	}
}

// find selects a running process by pid or tag.
func (sb *sandbox) find(sel wire.ProcessSelector) (*process, *rpcError) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sel.PID != 0 {
		if p, ok := sb.procs[sel.PID]; ok {
			return p, nil
		}
		return nil, newRPCError(wire.CodeNotFound, "process with pid "+strconv.FormatUint(uint64(sel.PID), 10)+" not found")
	}
	if sel.Tag != nil {
		for _, p := range sb.procs {
			if p.tag != nil && *p.tag == *sel.Tag {
				return p, nil
			}
		}
		return nil, newRPCError(wire.CodeNotFound, "process with tag "+strconv.Quote(*sel.Tag)+" not found")
	}
	return nil, newRPCError(wire.CodeInvalidArgument, "no process selected: give a pid or a tag")
}

// handleProcess serves process.Process.
func (s *Server) handleProcess(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	switch r.URL.Path {
	case wire.ProcessStart:
		s.handleStart(w, r, sb)
	case wire.ProcessConnect:
		var req wire.SelectRequest
		if rerr := readStreamRequest(r, &req); rerr != nil {
			writeStreamError(w, rerr)
			return
		}
		p, rerr := sb.find(req.Process)
		if rerr != nil {
			writeStreamError(w, rerr)
			return
		}
		sub := p.subscribe()
		w.Header().Set("Content-Type", wire.ContentTypeStream)
		w.WriteHeader(http.StatusOK)
		if err := s.send(w, &wire.ProcessEvent{Start: &wire.StartEvent{PID: p.pid}}); err != nil {
			p.unsubscribe(sub)
			return
		}
		s.follow(w, r, sb, p, sub)
	case wire.ProcessList:
		serveUnary(w, r, func(struct{}) (any, error) {
			sb.mu.Lock()
			defer sb.mu.Unlock()
			out := wire.ListResponse{Processes: []wire.ProcessInfo{}}
			for _, pid := range slices.Sorted(maps.Keys(sb.procs)) {
				p := sb.procs[pid]
				out.Processes = append(out.Processes, wire.ProcessInfo{Config: p.cfg, PID: p.pid, Tag: p.tag})
			}
			return out, nil
		})
	case wire.ProcessSendInput:
		serveUnary(w, r, func(req wire.SendInputRequest) (any, error) {
			p, rerr := sb.find(req.Process)
			if rerr == nil {
				rerr = p.input(r.Context(), req.Input)
			}
			return struct{}{}, orNil(rerr)
		})
	case wire.ProcessStreamInput:
		s.handleStreamInput(w, r, sb)
	case wire.ProcessUpdate:
		serveUnary(w, r, func(req wire.UpdateRequest) (any, error) {
			p, rerr := sb.find(req.Process)
			if rerr != nil {
				return nil, rerr
			}
			if req.PTY == nil {
				return struct{}{}, nil
			}
			if p.term == nil {
				return nil, newRPCError(wire.CodeFailedPrecondition, "the process has no PTY")
			}
			if err := p.term.Resize(uint16(req.PTY.Size.Cols), uint16(req.PTY.Size.Rows)); err != nil {
				return nil, newRPCError(wire.CodeInternal, "resizing the PTY: "+err.Error())
			}
			return struct{}{}, nil
		})
	case wire.ProcessCloseStdin:
		serveUnary(w, r, func(req wire.SelectRequest) (any, error) {
			p, rerr := sb.find(req.Process)
			if rerr != nil {
				return nil, rerr
			}
			if p.stdin == nil {
				return nil, newRPCError(wire.CodeFailedPrecondition, "the process was started without stdin")
			}
			p.closeOnce.Do(func() { close(p.closeStdin) })
			return struct{}{}, nil
		})
	case wire.ProcessSendSignal:
		serveUnary(w, r, func(req wire.SendSignalRequest) (any, error) {
			p, rerr := sb.find(req.Process)
			if rerr != nil {
				return nil, rerr
			}
			name := "killed"
			switch req.Signal {
			case wire.SignalSIGKILL:
			case wire.SignalSIGTERM:
				name = "terminated"
			default:
				return nil, newRPCError(wire.CodeInvalidArgument, "unsupported signal")
			}
			p.mu.Lock()
			if p.signal == "" {
				p.signal = name
			}
			p.mu.Unlock()
			p.cancel()
			return struct{}{}, nil
		})
	default:
		writeUnaryError(w, newRPCError(wire.CodeUnimplemented, "the e2b emulator does not implement "+r.URL.Path))
	}
}

// orNil turns a nil *rpcError into a nil error (a typed nil pointer in an
// error interface is not nil).
func orNil(e *rpcError) error {
	if e == nil {
		return nil
	}
	return e
}

// input queues stdin bytes.
func (p *process) input(ctx context.Context, in wire.ProcessInput) *rpcError {
	if in.PTY != nil {
		if p.term == nil {
			return newRPCError(wire.CodeFailedPrecondition, "the process has no PTY")
		}
		if _, err := p.term.Write(in.PTY); err != nil {
			return newRPCError(wire.CodeFailedPrecondition, "writing to the PTY: "+err.Error())
		}
		return nil
	}
	if p.term != nil && len(in.Stdin) > 0 {
		return newRPCError(wire.CodeFailedPrecondition, "the process runs on a PTY: send pty input")
	}
	if p.stdin == nil {
		return newRPCError(wire.CodeFailedPrecondition, "the process was started without stdin")
	}
	if len(in.Stdin) == 0 {
		return nil
	}
	select {
	case <-p.closeStdin:
		return newRPCError(wire.CodeFailedPrecondition, "stdin of the process is closed")
	default:
	}
	select {
	case p.stdin <- in.Stdin:
		return nil
	case <-p.done:
		return newRPCError(wire.CodeNotFound, "the process has ended")
	case <-ctx.Done():
		return newRPCError(wire.CodeCanceled, ctx.Err().Error())
	}
}

// handleStreamInput reads a client stream of stdin messages. Stdin may
// pause for as long as the command runs, so the stream is exempt from the
// body stall timeout of `sandbox serve` (the request is authenticated).
func (s *Server) handleStreamInput(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	httpguard.AllowIdleBody(r)
	var p *process
	var rerr *rpcError
	for rerr == nil {
		flags, payload, err := wire.ReadEnvelope(r.Body)
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = newRPCError(wire.CodeInvalidArgument, "reading the input stream: "+err.Error())
			break
		}
		if flags&wire.FlagEndStream != 0 {
			break
		}
		var msg wire.StreamInputRequest
		if err := json.Unmarshal(payload, &msg); err != nil {
			rerr = newRPCError(wire.CodeInvalidArgument, "unmarshal input: "+err.Error())
			break
		}
		switch {
		case msg.Start != nil:
			p, rerr = sb.find(msg.Start.Process)
		case msg.Data != nil:
			if p == nil {
				rerr = newRPCError(wire.CodeFailedPrecondition, "input before the start message")
				break
			}
			rerr = p.input(r.Context(), msg.Data.Input)
		}
	}
	w.Header().Set("Content-Type", wire.ContentTypeStream)
	w.WriteHeader(http.StatusOK)
	writeEnd(w, rerr)
}

// readStreamRequest reads the single request envelope of a server stream.
func readStreamRequest(r *http.Request, v any) *rpcError {
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, wire.ContentTypeStream) {
		return newRPCError(wire.CodeUnimplemented, "the e2b emulator speaks Connect with JSON only; streams need "+wire.ContentTypeStream+", not "+strconv.Quote(ct))
	}
	flags, payload, err := wire.ReadEnvelope(r.Body)
	if err != nil {
		return newRPCError(wire.CodeInvalidArgument, "reading the request envelope: "+err.Error())
	}
	if flags&wire.FlagCompressed != 0 {
		return newRPCError(wire.CodeInternal, "compressed requests are not supported")
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return newRPCError(wire.CodeInvalidArgument, "unmarshal request: "+err.Error())
	}
	return nil
}

// writeStreamError answers a stream with only an end envelope carrying e.
func writeStreamError(w http.ResponseWriter, e *rpcError) {
	w.Header().Set("Content-Type", wire.ContentTypeStream)
	w.WriteHeader(http.StatusOK)
	writeEnd(w, e)
}

// writeEnd writes the end-of-stream envelope.
func writeEnd(w io.Writer, e *rpcError) {
	b, _ := json.Marshal(wire.EndStream{Error: e})
	_ = wire.WriteEnvelope(w, wire.FlagEndStream, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// handleStart starts a command on the backend and streams its events.
func (s *Server) handleStart(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req wire.StartRequest
	if rerr := readStreamRequest(r, &req); rerr != nil {
		writeStreamError(w, rerr)
		return
	}
	tb, hasTerm := s.backend.(providers.Terminal)
	if req.PTY != nil && !hasTerm {
		writeStreamError(w, newRPCError(wire.CodeUnimplemented, "the e2b emulator's backend "+s.backend.Name()+" has no PTYs"))
		return
	}
	if req.Process.Cmd == "" {
		writeStreamError(w, newRPCError(wire.CodeInvalidArgument, "process.cmd is empty"))
		return
	}
	who, rerr := s.identityOf(r, sb)
	if rerr != nil {
		writeStreamError(w, rerr)
		return
	}
	// A missing cwd is reported by the backend when the command starts
	// (checking first would cost every command a file operation).
	cwd := who.home
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		c, err := who.resolve(*req.Process.Cwd)
		if err != nil {
			writeStreamError(w, errorFrom(err))
			return
		}
		cwd = c
	}
	var timeout time.Duration
	if v := r.Header.Get(wire.HeaderConnectTimeout); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			writeStreamError(w, newRPCError(wire.CodeInvalidArgument, "invalid "+wire.HeaderConnectTimeout))
			return
		}
		timeout = time.Duration(ms) * time.Millisecond
	}

	ctx, cancel := context.WithCancel(s.ctx)
	p := &process{cfg: req.Process, tag: req.Tag, cancel: cancel, done: make(chan struct{}), subs: map[*subscriber]struct{}{}}
	withStdin := (req.Stdin == nil || *req.Stdin) && req.PTY == nil
	var stdinR *io.PipeReader
	if withStdin {
		var stdinW *io.PipeWriter
		stdinR, stdinW = io.Pipe()
		p.stdin, p.closeStdin = make(chan []byte, 64), make(chan struct{})
		go p.feed(stdinW)
	}
	ereq := providers.ExecRequest{
		Argv:    append([]string{req.Process.Cmd}, req.Process.Args...),
		Cwd:     cwd,
		Env:     req.Process.Envs,
		User:    who.exec,
		Stdout:  outputWriter{p: p},
		Stderr:  outputWriter{p: p, stream: streamStderr},
		Timeout: timeout,
	}
	if stdinR != nil {
		ereq.Stdin = stdinR
	}
	run := func() (providers.ExecResult, error) { return s.backend.Exec(ctx, sb.backendID, ereq) }
	if req.PTY != nil {
		term, err := tb.ExecTerminal(ctx, sb.backendID, ereq, providers.TerminalRequest{Cols: uint16(req.PTY.Size.Cols), Rows: uint16(req.PTY.Size.Rows), Term: req.Process.Envs["TERM"]})
		if err != nil {
			cancel()
			writeStreamError(w, errorFrom(err))
			return
		}
		p.term = term
		run = func() (providers.ExecResult, error) { return runTerminal(term, outputWriter{p: p, stream: streamPTY}) }
	}
	sb.mu.Lock()
	sb.nextPID++
	p.pid = sb.nextPID
	sb.procs[p.pid] = p
	sb.mu.Unlock()
	sub := p.subscribe()

	go func() {
		defer cancel()
		res, err := run()
		if stdinR != nil {
			stdinR.CloseWithError(io.ErrClosedPipe)
		}
		p.mu.Lock()
		sig := p.signal
		p.mu.Unlock()
		m := message{final: true}
		switch {
		case sig != "" && (err == nil || errors.Is(err, context.Canceled)):
			m.event = &wire.ProcessEvent{End: &wire.EndEvent{ExitCode: -1, Status: "signal: " + sig}}
		case err == nil:
			m.event = &wire.ProcessEvent{End: &wire.EndEvent{ExitCode: int32(res.ExitCode), Exited: true, Status: "exit status " + strconv.Itoa(res.ExitCode)}}
		case errors.Is(err, providers.ErrTimeout):
			m.endErr = newRPCError(wire.CodeDeadlineExceeded, "the command exceeded its "+timeout.String()+" timeout and was killed")
		case s.ctx.Err() != nil:
			m.endErr = newRPCError(wire.CodeUnavailable, "the e2b emulator is shutting down")
		case errors.Is(err, providers.ErrNotFound) || errors.Is(err, providers.ErrInvalid):
			// The sandbox exists, so what is missing is the cwd: envd
			// answers invalid_argument.
			m.endErr = newRPCError(wire.CodeInvalidArgument, err.Error())
		default:
			m.endErr = errorFrom(err)
		}
		sb.mu.Lock()
		delete(sb.procs, p.pid)
		sb.mu.Unlock()
		p.publish(m)
		close(p.done)
	}()

	w.Header().Set("Content-Type", wire.ContentTypeStream)
	w.WriteHeader(http.StatusOK)
	if err := s.send(w, &wire.ProcessEvent{Start: &wire.StartEvent{PID: p.pid}}); err != nil {
		p.unsubscribe(sub)
		return
	}
	s.follow(w, r, sb, p, sub)
}

// runTerminal copies a terminal's output into out until it ends, then
// returns how the command ended and releases the terminal.
func runTerminal(term providers.TerminalSession, out io.Writer) (providers.ExecResult, error) {
	defer term.Close()
	_, _ = io.CopyBuffer(out, struct{ io.Reader }{term}, make([]byte, 32<<10))
	return term.Wait()
}

// follow streams a subscriber's messages until the process ends or the
// client goes away (which does not stop the process, as in envd).
//
// When the sandbox is killed the stream is cut without an end, as when
// envd's VM goes away: the SDKs then ask /health and report the sandbox's
// end rather than a canceled command.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, sb *sandbox, p *process, sub *subscriber) {
	defer p.unsubscribe(sub)
	gone := func() bool {
		select {
		case <-sb.killed:
			return true
		default:
			return false
		}
	}
	tick, stopTick := keepalives(r)
	defer stopTick()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sb.killed:
			panic(http.ErrAbortHandler)
		case <-p.done:
			if gone() {
				panic(http.ErrAbortHandler)
			}
			// The end was published: what this subscriber has not sent
			// yet (output, then the end) waits in its channel, unless it
			// subscribed after the end.
			for {
				select {
				case m := <-sub.ch:
					if m.event != nil && s.send(w, m.event) != nil {
						return
					}
					if m.final {
						writeEnd(w, m.endErr)
						return
					}
				default:
					writeEnd(w, newRPCError(wire.CodeNotFound, "the process has ended"))
					return
				}
			}
		case <-tick:
			if err := s.send(w, &wire.ProcessEvent{Keepalive: &struct{}{}}); err != nil {
				return
			}
		case m := <-sub.ch:
			if m.event != nil {
				if err := s.send(w, m.event); err != nil {
					return
				}
			}
			if m.final {
				if gone() {
					panic(http.ErrAbortHandler)
				}
				writeEnd(w, m.endErr)
				return
			}
		}
	}
}

// keepalives ticks at the interval (seconds) a stream's client asked for
// in wire.HeaderKeepalive; never without one. The caller calls stop.
func keepalives(r *http.Request) (tick <-chan time.Time, stop func()) {
	v, err := strconv.Atoi(r.Header.Get(wire.HeaderKeepalive))
	if err != nil || v <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(time.Duration(v) * time.Second)
	return t.C, t.Stop
}

// send writes one event envelope and flushes it.
func (s *Server) send(w http.ResponseWriter, ev *wire.ProcessEvent) error {
	if err := wire.WriteMessage(w, wire.StreamEvent{Event: *ev}); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}
