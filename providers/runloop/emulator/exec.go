package emulator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/runloop/wire"

	"github.com/agentbox/sandbox/providers/emulator"
)

// execution is one command of a devbox. Its output is kept whole.
type execution struct {
	id        string
	shellName string
	command   string
	started   time.Time
	cancel    context.CancelFunc

	// mu guards everything below.
	mu      sync.Mutex
	status  string
	ended   time.Time
	exit    *int
	out     [2][]byte
	changed chan struct{}
}

// output is a writer appending to one stream of an execution.
type output struct {
	e      *execution
	stderr bool
}

func (o output) Write(b []byte) (int, error) {
	o.e.mu.Lock()
	defer o.e.mu.Unlock()
	i := 0
	if o.stderr {
		i = 1
	}
	o.e.out[i] = append(o.e.out[i], b...)
	o.e.wake()
	return len(b), nil
}

// wake tells the waiters something changed. The caller holds e.mu.
func (e *execution) wake() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// keepExecutions is how long a completed execution (and its output) is
// kept for clients to read.
const keepExecutions = 30 * time.Minute

// forgetExecutions drops the executions that completed before t.
func (d *devbox) forgetExecutions(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, e := range d.execs {
		e.mu.Lock()
		old := e.status == wire.ExecCompleted && e.ended.Before(t)
		e.mu.Unlock()
		if old {
			delete(d.execs, id)
		}
	}
	for cmd, id := range d.byCmd {
		if d.execs[id] == nil {
			delete(d.byCmd, cmd)
		}
	}
}

// busy reports whether a command of d runs. The caller holds d.mu.
func (d *devbox) busy() bool {
	for _, e := range d.execs {
		e.mu.Lock()
		done := e.status == wire.ExecCompleted
		e.mu.Unlock()
		if !done {
			return true
		}
	}
	return false
}

// start runs command in d and returns its execution. A repeated
// commandID returns the execution it started.
func (s *Server) start(d *devbox, command, shellName, commandID string) (*execution, error) {
	d.mu.Lock()
	if eid, ok := d.byCmd[commandID]; ok && commandID != "" {
		e := d.execs[eid]
		d.mu.Unlock()
		return e, nil
	}
	d.nextID++
	ctx, cancel := context.WithCancel(s.ctx)
	e := &execution{id: fmt.Sprintf("exn_%s%d", emulator.RandomHex(6), d.nextID), shellName: shellName, command: command, started: s.now(),
		cancel: cancel, status: wire.ExecRunning, changed: make(chan struct{})}
	d.execs[e.id] = e
	if commandID != "" {
		d.byCmd[commandID] = e.id
	}
	backendID, home, shell := d.backendID, d.home, d.shell
	if shellName != "" {
		// A named shell starts in the home; later commands start where
		// the previous one left it.
		if d.shells[shellName] {
			home = ""
		}
		d.shells[shellName] = true
	}
	d.mu.Unlock()

	req := providers.ExecRequest{Shell: command, Cwd: home, Stdout: output{e: e}, Stderr: output{e: e, stderr: true}}
	if shellName != "" {
		req.Session = "runloop-" + shellName
		var err error
		if req, err = providers.SessionCommand(req); err != nil {
			cancel()
			return nil, err
		}
	}
	req = withShell(req, shell)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		res, err := s.backend.Exec(ctx, backendID, req)
		code := res.ExitCode
		if err != nil {
			code = 137
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(output{e: e, stderr: true}, "emulator: %v\n", err)
				code = 1
			}
		}
		e.mu.Lock()
		e.status, e.exit, e.ended = wire.ExecCompleted, &code, s.now()
		e.wake()
		e.mu.Unlock()
	}()
	return e, nil
}

// withShell turns a shell request (or the /bin/sh -c argv SessionCommand
// makes) into one run by shell, the devbox's bash when it has one:
// Runloop runs commands with bash, and commands written for it use bash's
// syntax ({1..10}, [[ ]]). The argv stays plain `bash -c SCRIPT`, which
// the approval gate reads as the script it runs.
func withShell(req providers.ExecRequest, shell string) providers.ExecRequest {
	if shell == "" || shell == "/bin/sh" {
		return req
	}
	args := []string{"-c", req.Shell}
	if req.Shell == "" {
		if len(req.Argv) < 2 || req.Argv[0] != "/bin/sh" {
			return req
		}
		args = req.Argv[1:]
	}
	req.Shell, req.Argv = "", append([]string{shell}, args...)
	return req
}

// view describes e with the last lastN lines of each stream.
func (e *execution) view(devboxID string, lastN int) wire.Execution {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := wire.Execution{DevboxID: devboxID, ExecutionID: e.id, Status: e.status, ShellName: e.shellName}
	if e.status == wire.ExecCompleted {
		code := *e.exit
		v.ExitStatus = &code
		v.Stdout, v.StdoutTruncated = lastLines(e.out[0], lastN)
		v.Stderr, v.StderrTruncated = lastLines(e.out[1], lastN)
	}
	return v
}

// lastLines returns the last n lines of b and whether it cut some.
func lastLines(b []byte, n int) (string, bool) {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return string(b[i+1:]), true
			}
		}
	}
	return string(b), false
}

// hold waits until e completes, up to d, and reports whether it did.
func (s *Server) hold(ctx context.Context, e *execution, d time.Duration) bool {
	return s.waitUntil(ctx, d, func() (bool, <-chan struct{}) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.status == wire.ExecCompleted, e.changed
	})
}

// lastN reads the last_n query parameter (default 100 lines).
func lastN(r *http.Request) int {
	if n, err := strconv.Atoi(r.URL.Query().Get("last_n")); err == nil && n > 0 {
		return n
	}
	return 100
}

// execute starts a command, deduped on command_id, and answers once it
// completed or optimistic_timeout (≤25s) passed.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.Execute
	if !readJSON(w, r, &body) {
		return
	}
	if body.Command == "" || body.CommandID == "" {
		writeError(w, http.StatusBadRequest, "command and command_id are required")
		return
	}
	wait := s.opts.ExecutionHold
	if t := body.OptimisticTimeout; t != nil && *t >= 0 && time.Duration(*t)*time.Second < wait {
		wait = time.Duration(*t) * time.Second
	}
	e, err := s.start(d, body.Command, body.ShellName, body.CommandID)
	if err != nil {
		writeKindError(w, err)
		return
	}
	s.hold(r.Context(), e, wait)
	writeJSON(w, http.StatusOK, e.view(d.id, lastN(r)))
}

// executeAsync starts a command and answers at once.
func (s *Server) executeAsync(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.ExecuteAsync
	if !readJSON(w, r, &body) {
		return
	}
	if body.Command == "" {
		writeError(w, http.StatusBadRequest, "command is required")
		return
	}
	if body.AttachStdin {
		writeError(w, http.StatusNotImplemented, "attach_stdin is not supported by the emulator")
		return
	}
	e, err := s.start(d, body.Command, body.ShellName, "")
	if err != nil {
		writeKindError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e.view(d.id, lastN(r)))
}

// executeSync runs a command and answers with its whole output.
func (s *Server) executeSync(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.ExecuteSync
	if !readJSON(w, r, &body) {
		return
	}
	e, err := s.start(d, body.Command, body.ShellName, "")
	if err != nil {
		writeKindError(w, err)
		return
	}
	for !s.hold(r.Context(), e, time.Hour) {
		if r.Context().Err() != nil || s.ctx.Err() != nil {
			return
		}
	}
	e.mu.Lock()
	v := wire.ExecutionDetail{DevboxID: d.id, ExitStatus: *e.exit, Stdout: string(e.out[0]), Stderr: string(e.out[1]), ShellName: e.shellName}
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

// withExecution resolves {id} and {eid} for h.
func (s *Server) withExecution(h func(http.ResponseWriter, *http.Request, *devbox, *execution)) http.HandlerFunc {
	return s.withDevbox(func(w http.ResponseWriter, r *http.Request, d *devbox) {
		d.mu.Lock()
		e := d.execs[r.PathValue("eid")]
		d.mu.Unlock()
		if e == nil {
			writeError(w, http.StatusNotFound, "execution "+r.PathValue("eid")+" not found")
			return
		}
		h(w, r, d, e)
	})
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request, d *devbox, e *execution) {
	writeJSON(w, http.StatusOK, e.view(d.id, lastN(r)))
}

// waitExecution is the execution long poll.
func (s *Server) waitExecution(w http.ResponseWriter, r *http.Request, d *devbox, e *execution) {
	var body wire.WaitForStatus
	if !readJSON(w, r, &body) {
		return
	}
	wanted := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, st := range body.Statuses {
			if st == e.status || st == wire.ExecRunning && e.status == wire.ExecCompleted {
				return true
			}
		}
		return len(body.Statuses) == 0 && e.status == wire.ExecCompleted
	}
	hold := s.opts.ExecutionHold
	if t := body.TimeoutSeconds; t > 0 && time.Duration(t)*time.Second < hold {
		hold = time.Duration(t) * time.Second
	}
	if !wanted() && !s.hold(r.Context(), e, hold) {
		if r.Context().Err() != nil {
			return
		}
		writeTimeout(w, "execution "+e.id+" did not complete in time")
		return
	}
	writeJSON(w, http.StatusOK, e.view(d.id, lastN(r)))
}

// kill ends an execution (the backend kills its whole process tree).
func (s *Server) kill(w http.ResponseWriter, r *http.Request, d *devbox, e *execution) {
	var body wire.Kill
	if !readJSON(w, r, &body) {
		return
	}
	e.cancel()
	s.hold(r.Context(), e, 10*time.Second)
	writeJSON(w, http.StatusOK, e.view(d.id, lastN(r)))
}

// maxChunk bounds the output of one SSE event.
const maxChunk = 32 << 10

// stream serves an SSE stream of one output from the byte offset asked,
// then follows it until the execution completes. Each event is a
// wire.Chunk whose offset is where it ends.
func (s *Server) stream(stderr bool) func(http.ResponseWriter, *http.Request, *devbox, *execution) {
	i := 0
	if stderr {
		i = 1
	}
	return func(w http.ResponseWriter, r *http.Request, _ *devbox, e *execution) {
		var offset int
		if v := r.URL.Query().Get("offset"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, "offset must be a byte offset")
				return
			}
			offset = n
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for {
			e.mu.Lock()
			data, done, changed := e.out[i], e.status == wire.ExecCompleted, e.changed
			e.mu.Unlock()
			// An offset past the output so far waits for it.
			if offset < len(data) {
				chunk := data[offset:min(len(data), offset+maxChunk)]
				if !done {
					// A character cut between two writes waits for
					// its last bytes.
					chunk = wholeRunes(chunk)
				}
				if len(chunk) > 0 {
					offset += len(chunk)
					b, _ := json.Marshal(wire.Chunk{Output: string(chunk), Offset: int64(offset)})
					if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
						return
					}
					_ = rc.Flush()
					continue
				}
			}
			if done {
				return
			}
			select {
			case <-changed:
			case <-r.Context().Done():
				return
			case <-s.ctx.Done():
				return
			}
		}
	}
}

// wholeRunes drops an incomplete UTF-8 sequence at the end of b, so that a
// character split between two writes goes out whole in the next event.
func wholeRunes(b []byte) []byte {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < utf8.RuneSelf {
			return b
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return b[:len(b)-k]
			}
			return b
		}
	}
	return b
}

// logEntry is one entry of GET /v1/devboxes/{id}/logs.
type logEntry struct {
	Level       string `json:"level"`
	Source      string `json:"source"`
	TimestampMs int64  `json:"timestamp_ms"`
	Cmd         string `json:"cmd,omitempty"`
	CmdID       string `json:"cmd_id,omitempty"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	Message     string `json:"message,omitempty"`
	ShellName   string `json:"shell_name,omitempty"`
}

// logs lists the devbox's commands as Runloop's log entries ("exec"
// source): one when each started and one when it ended, filtered by
// execution_id and shell_name, oldest first.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, d *devbox) {
	q := r.URL.Query()
	d.mu.Lock()
	execs := make([]*execution, 0, len(d.execs))
	for _, e := range d.execs {
		if (q.Get("execution_id") == "" || q.Get("execution_id") == e.id) && (q.Get("shell_name") == "" || q.Get("shell_name") == e.shellName) {
			execs = append(execs, e)
		}
	}
	d.mu.Unlock()
	out := []logEntry{}
	for _, e := range execs {
		e.mu.Lock()
		out = append(out, logEntry{Level: "info", Source: "exec", TimestampMs: e.started.UnixMilli(), Cmd: e.command, CmdID: e.id, ShellName: e.shellName})
		if e.exit != nil {
			code := *e.exit
			out = append(out, logEntry{Level: "info", Source: "exec", TimestampMs: e.ended.UnixMilli(), CmdID: e.id, ExitCode: &code, ShellName: e.shellName})
		}
		e.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b logEntry) int { return cmp.Compare(a.TimestampMs, b.TimestampMs) })
	writeJSON(w, http.StatusOK, map[string]any{"logs": out})
}
