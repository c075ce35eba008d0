package emulator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
)

// toolboxHandler is a toolbox endpoint of one started sandbox.
type toolboxHandler func(http.ResponseWriter, *http.Request, *sandbox)

// toolbox resolves the sandbox of a toolbox request, refuses a sandbox
// that is not started and counts the request as activity (auto-stop).
func (s *Server) toolbox(h toolboxHandler) http.HandlerFunc {
	return s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		sb.mu.Lock()
		state := sb.dto.State
		if state == wire.StateStarted {
			sb.lastActivity = s.opts.Now()
			sb.inflight++
		}
		sb.mu.Unlock()
		if state != wire.StateStarted {
			writeError(w, r, http.StatusBadRequest, "Sandbox "+sb.id+" is not started (state "+state+")", "")
			return
		}
		defer func() {
			sb.mu.Lock()
			sb.inflight--
			sb.lastActivity = s.opts.Now()
			sb.mu.Unlock()
		}()
		h(w, r, sb)
	})
}

func (s *Server) toolboxRoutes(m *http.ServeMux) {
	const p = "/toolbox/{id}"
	m.HandleFunc("POST "+p+"/process/execute", s.toolbox(s.execute))
	m.HandleFunc("POST "+p+"/process/code-run", s.toolbox(s.codeRun))
	m.HandleFunc("GET "+p+"/process/session", s.toolbox(s.listSessions))
	m.HandleFunc("POST "+p+"/process/session", s.toolbox(s.createSession))
	m.HandleFunc("GET "+p+"/process/session/{sid}", s.toolbox(s.getSession))
	m.HandleFunc("DELETE "+p+"/process/session/{sid}", s.toolbox(s.deleteSession))
	m.HandleFunc("POST "+p+"/process/session/{sid}/exec", s.toolbox(s.sessionExec))
	m.HandleFunc("GET "+p+"/process/session/{sid}/command/{cid}", s.toolbox(s.getCommand))
	m.HandleFunc("GET "+p+"/process/session/{sid}/command/{cid}/logs", s.toolbox(s.commandLogs))
	m.HandleFunc("GET "+p+"/work-dir", s.toolbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, http.StatusOK, map[string]string{"dir": workDir})
	}))
	m.HandleFunc("GET "+p+"/user-home-dir", s.toolbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, http.StatusOK, map[string]string{"dir": workDir})
	}))
	m.HandleFunc("GET "+p+"/version", s.toolbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "emulator"})
	}))
	m.HandleFunc("GET "+p+"/system/metrics", s.toolbox(s.metrics))
	s.fileRoutes(m, p)
}

// metricsScript prints the CPU count, memory total, available and
// cached (KiB) and the disk of the working directory (total, used, free
// KiB) on one line.
const metricsScript = `echo $(nproc) $(awk '/^MemTotal:/{t=$2} /^MemAvailable:/{a=$2} /^Cached:/{c=$2} END{print t+0, a+0, c+0}' /proc/meminfo) $(df -Pk ` + workDir + ` | awk 'NR==2{print $2, $3, $4}')`

// metrics answers GET /system/metrics from the sandbox's /proc and df;
// cpuUsedPct is 0, as Daytona's daemon reports before its first sample.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var out bytes.Buffer
	res, err := s.backend.Exec(r.Context(), sb.backendID, providers.ExecRequest{Shell: metricsScript, Stdout: &out})
	if err == nil && res.ExitCode != 0 {
		err = providers.Errorf(providers.ErrUnavailable, "daytona emulator", "metrics", "the metrics script exited %d", res.ExitCode)
	}
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	var v [7]int64
	for i, f := range strings.Fields(out.String()) {
		if i < len(v) {
			v[i], _ = strconv.ParseInt(f, 10, 64)
		}
	}
	now := s.opts.Now().UTC()
	writeJSON(w, http.StatusOK, map[string]any{
		"cpuCount": v[0], "cpuUsedPct": 0.0,
		"memTotal": v[1] << 10, "memUsed": max(v[1]-v[2], 0) << 10, "memCache": v[3] << 10,
		"diskTotal": v[4] << 10, "diskUsed": v[5] << 10, "diskFree": v[6] << 10,
		"timestamp": now.Format(time.RFC3339Nano), "timestampUnix": now.Unix(),
	})
}

// execute runs POST /process/execute: the command through the shell in
// one request, stdout and stderr together in result; a timeout is 408.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req wire.ExecuteRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Command == "" {
		writeError(w, r, http.StatusBadRequest, "command is required", "")
		return
	}
	s.runCombined(w, r, sb, providers.ExecRequest{Shell: req.Command, Cwd: resolve(req.Cwd), Env: req.Envs}, req.Timeout)
}

// runCombined runs er with stdout and stderr together and answers with
// its exit code and output; timeout (seconds) past is a 408.
func (s *Server) runCombined(w http.ResponseWriter, r *http.Request, sb *sandbox, er providers.ExecRequest, timeout int) {
	var out lockedBuffer
	er.Stdout, er.Stderr = &out, &out
	if timeout > 0 {
		er.Timeout = time.Duration(timeout) * time.Second
	}
	res, err := s.backend.Exec(r.Context(), sb.backendID, er)
	if err != nil {
		if isKind(err, providers.ErrTimeout) {
			writeError(w, r, http.StatusRequestTimeout, "command execution timeout", wire.CodeExecutionTimeout)
			return
		}
		writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ExecuteResponse{ExitCode: res.ExitCode, Result: out.String()})
}

// codeRun runs POST /process/code-run: Python with python3, JavaScript
// with node (the language of the request, else of the sandbox's
// code-toolbox-language label).
func (s *Server) codeRun(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req wire.CodeRunRequest
	if !decode(w, r, &req) {
		return
	}
	lang := req.Language
	if lang == "" {
		sb.mu.Lock()
		lang = sb.dto.Labels[wire.LabelLanguage]
		sb.mu.Unlock()
	}
	var argv []string
	switch lang {
	case "", "python":
		argv = []string{"python3", "-c", req.Code}
	case "javascript":
		argv = []string{"node", "-e", req.Code}
	default:
		writeError(w, r, http.StatusNotImplemented, "code-run in "+lang+" is not emulated (python and javascript are)", "")
		return
	}
	if len(req.Argv) > 0 {
		if argv[0] == "python3" {
			argv = append(argv, req.Argv...)
		} else {
			argv = append(append(argv, "--"), req.Argv...)
		}
	}
	s.runCombined(w, r, sb, providers.ExecRequest{Argv: argv, Env: req.Envs}, req.Timeout)
}

// lockedBuffer is a buffer two streams write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// session is a Daytona session: its commands run one backend Exec each,
// sharing the state providers.SessionCommand keeps under name.
type session struct {
	id     string
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	commands []*command
}

// command is one command of a session and its output.
type command struct {
	id   string
	text string
	log  *cmdLog
}

// cmdLog keeps a command's output: the raw log with Daytona's markers
// before each stream's bytes (each stream is demultiplexed from it when
// asked for).
type cmdLog struct {
	mu   sync.Mutex
	raw  []byte
	exit *int
	// changed is closed and replaced on every change.
	changed chan struct{}
}

func newCmdLog() *cmdLog { return &cmdLog{changed: make(chan struct{})} }

// stream returns a writer that appends to one stream.
func (l *cmdLog) stream(stderr bool) *streamWriter { return &streamWriter{l: l, stderr: stderr} }

// streamWriter writes one stream of a cmdLog.
type streamWriter struct {
	l      *cmdLog
	stderr bool
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	marker := wire.StdoutMarker
	if w.stderr {
		marker = wire.StderrMarker
	}
	l.raw = append(append(l.raw, marker[:]...), p...)
	l.notify()
	return len(p), nil
}

func (l *cmdLog) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// finish records the exit code.
func (l *cmdLog) finish(code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exit = &code
	l.notify()
}

// snapshot returns the raw log from offset, the exit code and the
// channel closed at the next change.
func (l *cmdLog) snapshot(offset int) ([]byte, *int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw[offset:len(l.raw):len(l.raw)], l.exit, l.changed
}

// logs returns the output so far: raw, and each stream apart.
func (l *cmdLog) logs() wire.SessionLogs {
	raw, _, _ := l.snapshot(0)
	var stdout, stderr bytes.Buffer
	d := wire.Demuxer{Stdout: &stdout, Stderr: &stderr}
	_, _ = d.Write(raw)
	_ = d.Flush()
	return wire.SessionLogs{Output: string(raw), Stdout: stdout.String(), Stderr: stderr.String()}
}

func (l *cmdLog) exitCode() *int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exit
}

// busy reports a toolbox request being served or a session command
// still running (sb.mu held): such a sandbox is not idle for auto-stop.
func (sb *sandbox) busy() bool {
	if sb.inflight > 0 {
		return true
	}
	for _, ss := range sb.sessions {
		ss.mu.Lock()
		for _, c := range ss.commands {
			if c.log.exitCode() == nil {
				ss.mu.Unlock()
				return true
			}
		}
		ss.mu.Unlock()
	}
	return false
}

// endSessions ends every session's commands and forgets them.
func (sb *sandbox) endSessions() {
	sb.mu.Lock()
	all := sb.sessions
	sb.sessions = map[string]*session{}
	sb.mu.Unlock()
	for _, ss := range all {
		ss.cancel()
	}
}

// sessionName is the providers.SessionCommand name of a Daytona session
// (whose ids may hold any character).
func sessionName(sandboxID, sid string) string {
	sum := sha256.Sum256([]byte(sandboxID + "\x00" + sid))
	return "daytona-" + hex.EncodeToString(sum[:12])
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req wire.CreateSession
	if !decode(w, r, &req) {
		return
	}
	if req.SessionID == "" {
		writeError(w, r, http.StatusBadRequest, "sessionId is required", "")
		return
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, ok := sb.sessions[req.SessionID]; ok {
		writeError(w, r, http.StatusConflict, "session "+req.SessionID+" already exists", "")
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sb.sessions[req.SessionID] = &session{id: req.SessionID, name: sessionName(sb.id, req.SessionID), ctx: ctx, cancel: cancel}
	w.WriteHeader(http.StatusCreated)
}

// findSession resolves {sid}, answering 404 itself.
func findSession(w http.ResponseWriter, r *http.Request, sb *sandbox) *session {
	sb.mu.Lock()
	ss, ok := sb.sessions[r.PathValue("sid")]
	sb.mu.Unlock()
	if !ok {
		writeError(w, r, http.StatusNotFound, "session "+r.PathValue("sid")+" not found", "")
		return nil
	}
	return ss
}

func (ss *session) view() wire.Session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := wire.Session{SessionID: ss.id, Commands: []wire.Command{}}
	for _, c := range ss.commands {
		out.Commands = append(out.Commands, wire.Command{ID: c.id, Command: c.text, ExitCode: c.log.exitCode()})
	}
	return out
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	sb.mu.Lock()
	all := make([]*session, 0, len(sb.sessions))
	for _, ss := range sb.sessions {
		all = append(all, ss)
	}
	sb.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	out := make([]wire.Session, 0, len(all))
	for _, ss := range all {
		out = append(out, ss.view())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if ss := findSession(w, r, sb); ss != nil {
		writeJSON(w, http.StatusOK, ss.view())
	}
}

// deleteSession ends the session's commands and removes its state.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	ss := findSession(w, r, sb)
	if ss == nil {
		return
	}
	sb.mu.Lock()
	delete(sb.sessions, ss.id)
	sb.mu.Unlock()
	ss.cancel()
	_, _ = s.backend.Exec(r.Context(), sb.backendID, providers.ExecRequest{Argv: []string{"rm", "-rf", providers.SessionDir + "/" + ss.name}})
	w.WriteHeader(http.StatusNoContent)
}

// sessionExec runs a command in a session: at once with its output in
// the reply, or in the background (runAsync) with 202 and its id.
func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	ss := findSession(w, r, sb)
	if ss == nil {
		return
	}
	var req wire.SessionExecuteRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Command == "" {
		writeError(w, r, http.StatusBadRequest, "command is required", "")
		return
	}
	c := &command{id: newUUID(), text: req.Command, log: newCmdLog()}
	ss.mu.Lock()
	first := len(ss.commands) == 0
	ss.commands = append(ss.commands, c)
	ss.mu.Unlock()
	// The first command starts in the working directory; later ones
	// where the previous one left off.
	cwd := ""
	if first {
		cwd = workDir
	}
	// A gated backend takes the session as it is: the gate decides on
	// the command itself, then wraps it (providers.ForProvider).
	er, err := providers.ForProvider(s.backend, providers.ExecRequest{Shell: req.Command, Session: ss.name, Cwd: cwd})
	if err != nil {
		c.log.finish(127)
		writeBackendError(w, r, err)
		return
	}
	er.Stdout, er.Stderr = c.log.stream(false), c.log.stream(true)
	run := func(ctx context.Context) error {
		res, err := s.backend.Exec(ctx, sb.backendID, er)
		code := res.ExitCode
		if err != nil {
			// A command ended with its session, or refused, has no
			// status of its own: report it killed.
			code = 137
			_, _ = c.log.stream(true).Write([]byte(err.Error() + "\n"))
		}
		c.log.finish(code)
		return err
	}
	if req.RunAsync || req.Async {
		go func() { _ = run(ss.ctx) }()
		writeJSON(w, http.StatusAccepted, wire.SessionExecuteResponse{CmdID: c.id})
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(ss.ctx, cancel)
	defer stop()
	defer cancel()
	if err := run(ctx); err != nil && r.Context().Err() == nil && ss.ctx.Err() == nil {
		writeBackendError(w, r, err)
		return
	}
	logs := c.log.logs()
	writeJSON(w, http.StatusOK, wire.SessionExecuteResponse{CmdID: c.id, ExitCode: c.log.exitCode(), Output: logs.Output, Stdout: logs.Stdout, Stderr: logs.Stderr})
}

// findCommand resolves {cid} in a session, answering 404 itself.
func findCommand(w http.ResponseWriter, r *http.Request, sb *sandbox) *command {
	ss := findSession(w, r, sb)
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, c := range ss.commands {
		if c.id == r.PathValue("cid") {
			return c
		}
	}
	writeError(w, r, http.StatusNotFound, "command "+r.PathValue("cid")+" not found", "")
	return nil
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if c := findCommand(w, r, sb); c != nil {
		writeJSON(w, http.StatusOK, wire.Command{ID: c.id, Command: c.text, ExitCode: c.log.exitCode()})
	}
}

// commandLogs answers GET …/logs: the output so far as JSON (clients
// announcing an SDK version) or plain text, or, with follow=true over a
// websocket, the raw log as it grows until the command ends.
func (s *Server) commandLogs(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	c := findCommand(w, r, sb)
	if c == nil {
		return
	}
	if r.URL.Query().Get("follow") == "true" && r.Header.Get("Upgrade") != "" {
		s.followLogs(w, r, c)
		return
	}
	logs := c.log.logs()
	if r.Header.Get(wire.HeaderSDKVersion) == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(logs.Stdout + logs.Stderr))
		return
	}
	writeJSON(w, http.StatusOK, logs)
}

// followLogs streams a command's raw log as binary websocket frames and
// closes normally once the command has ended and everything was sent.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, c *command) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx := conn.CloseRead(r.Context())
	offset := 0
	for {
		data, exit, changed := c.log.snapshot(offset)
		if len(data) > 0 {
			if err := conn.Write(ctx, websocket.MessageBinary, data); err != nil {
				return
			}
			offset += len(data)
			continue
		}
		if exit != nil {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			_ = conn.Close(websocket.StatusGoingAway, "emulator closing")
			return
		}
	}
}

// decode reads a JSON body, answering 400 itself.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(v); err != nil {
		writeError(w, r, http.StatusBadRequest, "invalid body: "+err.Error(), "")
		return false
	}
	return true
}
