package emulator

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentbox/sandbox/providers"
)

// router serves the TaskCommandRouter service.
type router struct {
	pb.UnimplementedTaskCommandRouterServer
	s *Server
}

// stream is a command's output, readable from any offset a client still
// may ask for while it grows. A reader that has been sent the bytes up to
// an offset lets the stream drop what lies more than streamKeep before
// it; a writer more than streamCap ahead of that blocks, as on a pipe, so
// output nobody reads does not fill the emulator's memory.
type stream struct {
	mu sync.Mutex
	// base is the offset of data[0].
	base   uint64
	data   []byte
	closed bool
	// unbounded streams (the file helper's, read only after the command
	// ends) never block their writer.
	unbounded bool
	// changed is closed and replaced whenever data grows or shrinks or
	// the stream closes.
	changed chan struct{}
	// stop ends a blocked writer (the emulator closing).
	stop <-chan struct{}
}

// Bounds of a stream's buffer.
const (
	streamCap  = 16 << 20
	streamKeep = 4 << 20
)

func newStream(stop <-chan struct{}) *stream {
	return &stream{changed: make(chan struct{}), stop: stop}
}

// notify wakes the waiters; o.mu is held.
func (o *stream) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *stream) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !o.unbounded && !o.closed && len(o.data) > streamCap {
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ch:
		case <-o.stop:
			return 0, io.ErrClosedPipe
		}
		o.mu.Lock()
	}
	if o.closed {
		return 0, io.ErrClosedPipe
	}
	o.data = append(o.data, p...)
	o.notify()
	return len(p), nil
}

func (o *stream) close() {
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		o.notify()
	}
	o.mu.Unlock()
}

// sent records that a reader got everything before off.
func (o *stream) sent(off uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if off < streamKeep {
		return
	}
	if drop := off - streamKeep; drop > o.base {
		n := min(drop-o.base, uint64(len(o.data)))
		o.data = append([]byte(nil), o.data[n:]...)
		o.base += n
		o.notify()
	}
}

// from returns what follows off, whether the stream is closed, and a
// channel closed when that changes. An offset already dropped is an
// error.
func (o *stream) from(off uint64) ([]byte, bool, <-chan struct{}, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if off < o.base {
		return nil, false, nil, status.Errorf(codes.OutOfRange, "output before offset %d is no longer kept", o.base)
	}
	rel := min(off-o.base, uint64(len(o.data)))
	return o.data[rel:], o.closed, o.changed, nil
}

// execution is one command started by TaskExecStart.
type execution struct {
	stdout, stderr *stream

	stdinMu     sync.Mutex
	stdin       *io.PipeWriter
	stdinOff    uint64
	stdinClosed bool

	done chan struct{}
	// Set before done is closed.
	code, signal *int32
	err          error
}

// writeStdin appends data at offset off (bytes already received are
// skipped, so a retried write repeats nothing) and closes stdin on eof.
func (e *execution) writeStdin(off uint64, data []byte, eof bool) error {
	e.stdinMu.Lock()
	defer e.stdinMu.Unlock()
	if e.stdinClosed {
		if len(data) == 0 {
			return nil
		}
		return status.Error(codes.FailedPrecondition, "stdin is closed")
	}
	if off > e.stdinOff {
		return status.Errorf(codes.OutOfRange, "stdin offset %d is past the %d bytes received", off, e.stdinOff)
	}
	if skip := e.stdinOff - off; skip < uint64(len(data)) {
		data = data[skip:]
		if _, err := e.stdin.Write(data); err != nil {
			// The command no longer reads its input.
			e.stdinClosed = true
			return status.Error(codes.FailedPrecondition, "the command has exited")
		}
		e.stdinOff += uint64(len(data))
	}
	if eof {
		e.stdinClosed = true
		return e.stdin.Close()
	}
	return nil
}

// newExecution returns an execution and the reading end of its stdin.
func (s *Server) newExecution() (*execution, *io.PipeReader) {
	pr, pw := io.Pipe()
	stop := s.ctx.Done()
	return &execution{stdout: newStream(stop), stderr: newStream(stop), stdin: pw, done: make(chan struct{})}, pr
}

// abort ends the execution's streams, so that a writer blocked on output
// nobody reads lets its command be killed (the sandbox is ending).
func (e *execution) abort() {
	e.stdout.close()
	e.stderr.close()
}

// run runs req on the backend (or the file helper) and records how it
// ended.
func (e *execution) run(s *Server, backendID string, req providers.ExecRequest, stdin *io.PipeReader) {
	defer close(e.done)
	defer e.stdout.close()
	defer e.stderr.close()
	defer stdin.Close()
	var (
		code int
		err  error
	)
	if req.Argv[0] == fsToolsPath {
		code, err = s.fsTools(s.ctx, backendID, req.Argv[1:], stdin, e.stdout, e.stderr)
	} else {
		var res providers.ExecResult
		res, err = s.backend.Exec(s.ctx, backendID, req)
		code = res.ExitCode
	}
	switch {
	case errors.Is(err, providers.ErrTimeout):
		sig := int32(9)
		e.signal = &sig
	case err != nil:
		e.err = statusOf(err)
	default:
		c := int32(code)
		e.code = &c
	}
}

// startMain starts a sandbox's entrypoint; the sandbox ends with it. A
// sandbox without one gets an execution whose streams end with the
// sandbox.
func (s *Server) startMain(sb *sandbox, argv []string) *execution {
	e, pr := s.newExecution()
	if len(argv) == 0 {
		s.background(func() {
			select {
			case <-sb.done:
			case <-s.ctx.Done():
			}
			e.stdout.close()
			e.stderr.close()
			_ = pr.Close()
		})
		return e
	}
	req := providers.ExecRequest{Argv: argv, Cwd: sb.workdir, Stdin: pr, Stdout: e.stdout, Stderr: e.stderr}
	s.background(func() {
		e.run(s, sb.backendID, req, pr)
		if s.ctx.Err() != nil {
			// The emulator closed: the backend's sandbox is left alone.
			return
		}
		st, code := pb.GenericResult_GENERIC_STATUS_SUCCESS, int32(0)
		switch {
		case e.code != nil:
			code = *e.code
		case e.signal != nil:
			code = 128 + *e.signal
		default:
			code = 1
		}
		if code != 0 {
			st = pb.GenericResult_GENERIC_STATUS_FAILURE
		}
		s.finish(context.Background(), sb, pb.GenericResult_builder{Status: st, Exitcode: code}.Build())
	})
	return e
}

// execution finds a command of a task.
func (s *Server) execution(taskID, execID string) (*execution, error) {
	s.mu.Lock()
	sb, ok := s.tasks[taskID]
	s.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %s not found", taskID)
	}
	sb.execMu.Lock()
	defer sb.execMu.Unlock()
	e, ok := sb.execs[execID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "exec %s not found", execID)
	}
	return e, nil
}

func (r *router) TaskExecStart(ctx context.Context, req *pb.TaskExecStartRequest) (*pb.TaskExecStartResponse, error) {
	s := r.s
	s.mu.Lock()
	sb, ok := s.tasks[req.GetTaskId()]
	var ended bool
	if ok {
		ended = sb.result != nil
	}
	s.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %s not found", req.GetTaskId())
	}
	if ended {
		return nil, status.Errorf(codes.NotFound, "task %s has ended", req.GetTaskId())
	}
	argv := req.GetCommandArgs()
	if len(argv) == 0 {
		return nil, status.Error(codes.InvalidArgument, "command_args is empty")
	}
	if req.HasPtyInfo() {
		return nil, status.Error(codes.Unimplemented, "the emulator does not serve PTYs")
	}
	e, pr := s.newExecution()
	if argv[0] == fsToolsPath {
		// The SDKs read the helper's output once it has exited.
		e.stdout.unbounded, e.stderr.unbounded = true, true
	}
	sb.execMu.Lock()
	if _, dup := sb.execs[req.GetExecId()]; dup {
		sb.execMu.Unlock()
		// A retried start: the command runs once.
		return &pb.TaskExecStartResponse{}, nil
	}
	sb.execs[req.GetExecId()] = e
	sb.execMu.Unlock()

	env := envOf(req.GetSecretSources())
	for k, v := range req.GetEnv() {
		env[k] = v
	}
	ereq := providers.ExecRequest{
		Argv:   argv,
		Env:    env,
		Stdin:  pr,
		Stdout: e.stdout,
		Stderr: e.stderr,
	}
	ereq.Cwd = sb.workdir
	if req.HasWorkdir() {
		ereq.Cwd = req.GetWorkdir()
	}
	if req.HasTimeoutSecs() && req.GetTimeoutSecs() > 0 {
		ereq.Timeout = time.Duration(req.GetTimeoutSecs()) * time.Second
	}
	if req.GetStdoutConfig() == pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_DEVNULL {
		ereq.Stdout = io.Discard
	}
	if req.GetStderrConfig() == pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_DEVNULL {
		ereq.Stderr = io.Discard
	}
	s.background(func() { e.run(s, sb.backendID, ereq, pr) })
	return &pb.TaskExecStartResponse{}, nil
}

func (r *router) TaskExecStdioRead(req *pb.TaskExecStdioReadRequest, out grpc.ServerStreamingServer[pb.TaskExecStdioReadResponse]) error {
	e, err := r.s.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return err
	}
	st := e.stdout
	if req.GetFileDescriptor() == pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR {
		st = e.stderr
	}
	return r.s.follow(out.Context(), st, req.GetOffset(), func(data []byte, _ uint64) error {
		return out.Send(pb.TaskExecStdioReadResponse_builder{Data: data}.Build())
	})
}

// follow sends what st holds from off in chunks, then what it gets,
// until it is closed and sent.
func (s *Server) follow(ctx context.Context, st *stream, off uint64, send func(data []byte, off uint64) error) error {
	const chunk = 64 << 10
	for {
		data, closed, changed, err := st.from(off)
		if err != nil {
			return err
		}
		if len(data) > 0 {
			n := min(len(data), chunk)
			if err := send(data[:n], off); err != nil {
				return err
			}
			off += uint64(n)
			st.sent(off)
			continue
		}
		if closed {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.ctx.Done():
			return status.Error(codes.Unavailable, errClosed.Error())
		}
	}
}

// task finds the sandbox of a task.
func (s *Server) task(taskID string) (*sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.tasks[taskID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %s not found", taskID)
	}
	return sb, nil
}

func (r *router) SandboxStdioReadV2(req *pb.SandboxStdioReadV2Request, out grpc.ServerStreamingServer[pb.SandboxStdioReadV2Response]) error {
	sb, err := r.s.task(req.GetTaskId())
	if err != nil {
		return err
	}
	st := sb.main.stdout
	if req.GetFileDescriptor() == pb.SandboxStdioFileDescriptor_SANDBOX_STDIO_FILE_DESCRIPTOR_STDERR {
		st = sb.main.stderr
	}
	return r.s.follow(out.Context(), st, req.GetOffset(), func(data []byte, off uint64) error {
		return out.Send(pb.SandboxStdioReadV2Response_builder{Data: data, StartingOffset: off}.Build())
	})
}

func (r *router) SandboxStdinWriteV2(ctx context.Context, req *pb.SandboxStdinWriteV2Request) (*pb.SandboxStdinWriteV2Response, error) {
	sb, err := r.s.task(req.GetTaskId())
	if err != nil {
		return nil, err
	}
	if err := sb.main.writeStdin(req.GetOffset(), req.GetData(), req.GetEof()); err != nil {
		return nil, err
	}
	return &pb.SandboxStdinWriteV2Response{}, nil
}

func (r *router) TaskExecStdinWrite(ctx context.Context, req *pb.TaskExecStdinWriteRequest) (*pb.TaskExecStdinWriteResponse, error) {
	e, err := r.s.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	if err := e.writeStdin(req.GetOffset(), req.GetData(), req.GetEof()); err != nil {
		return nil, err
	}
	return &pb.TaskExecStdinWriteResponse{}, nil
}

func (r *router) TaskExecStdinWriteStream(in grpc.ClientStreamingServer[pb.TaskExecStdinWriteStreamRequest, pb.TaskExecStdinWriteStreamResponse]) error {
	first, err := in.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first message must be start")
	}
	e, err := r.s.execution(start.GetTaskId(), start.GetExecId())
	if err != nil {
		return err
	}
	off := start.GetOffset()
	for {
		msg, err := in.Recv()
		if err == io.EOF {
			return in.SendAndClose(&pb.TaskExecStdinWriteStreamResponse{})
		}
		if err != nil {
			return err
		}
		if msg.HasEnd() {
			if err := e.writeStdin(off, nil, true); err != nil {
				return err
			}
			return in.SendAndClose(&pb.TaskExecStdinWriteStreamResponse{})
		}
		data := msg.GetData()
		if err := e.writeStdin(off, data, false); err != nil {
			return err
		}
		off += uint64(len(data))
	}
}

func (r *router) TaskExecStdinStatus(ctx context.Context, req *pb.TaskExecStdinStatusRequest) (*pb.TaskExecStdinStatusResponse, error) {
	e, err := r.s.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	e.stdinMu.Lock()
	defer e.stdinMu.Unlock()
	return pb.TaskExecStdinStatusResponse_builder{NumBytesWritten: e.stdinOff, Closed: e.stdinClosed}.Build(), nil
}

func (r *router) TaskExecWait(ctx context.Context, req *pb.TaskExecWaitRequest) (*pb.TaskExecWaitResponse, error) {
	e, err := r.s.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-r.s.ctx.Done():
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	if e.err != nil {
		return nil, e.err
	}
	return pb.TaskExecWaitResponse_builder{Code: e.code, Signal: e.signal}.Build(), nil
}

func (r *router) TaskExecPoll(ctx context.Context, req *pb.TaskExecPollRequest) (*pb.TaskExecPollResponse, error) {
	e, err := r.s.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.done:
		if e.err != nil {
			return nil, e.err
		}
		return pb.TaskExecPollResponse_builder{Code: e.code, Signal: e.signal}.Build(), nil
	default:
		return &pb.TaskExecPollResponse{}, nil
	}
}

// SandboxWaitUntilReady answers once the sandbox's readiness probe has
// passed, DEADLINE_EXCEEDED when that takes longer than the request's
// timeout, and FAILED_PRECONDITION when the sandbox ends first.
func (r *router) SandboxWaitUntilReady(ctx context.Context, req *pb.SandboxWaitUntilReadyTcrRequest) (*pb.SandboxWaitUntilReadyTcrResponse, error) {
	sb, err := r.s.task(req.GetTaskId())
	if err != nil {
		return nil, err
	}
	var expired <-chan time.Time
	if t := req.GetTimeout(); t > 0 {
		timer := time.NewTimer(time.Duration(float64(t) * float64(time.Second)))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-sb.ready:
		return pb.SandboxWaitUntilReadyTcrResponse_builder{ReadyAt: stamp(sb.readyAt)}.Build(), nil
	case <-sb.done:
		select {
		case <-sb.ready:
			return pb.SandboxWaitUntilReadyTcrResponse_builder{ReadyAt: stamp(sb.readyAt)}.Build(), nil
		default:
		}
		return nil, status.Error(codes.FailedPrecondition, "the sandbox ended before its readiness probe passed")
	case <-expired:
		return nil, status.Error(codes.DeadlineExceeded, "the readiness probe has not passed yet")
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-r.s.ctx.Done():
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
}

// isNotFound reports a backend's ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, providers.ErrNotFound) }
