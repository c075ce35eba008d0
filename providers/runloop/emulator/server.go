// Package emulator serves Runloop's REST API (/v1/devboxes…) on top of any
// provider, so that code written for Runloop — the official SDKs, or this
// project's runloop client — runs against local sandboxes. It is what
// `sandbox serve --api runloop` runs and the harness of the runloop
// client's tests; the official TypeScript SDK's conformance flow runs
// against it unchanged.
//
// One port speaks HTTP/1.1 and cleartext HTTP/2 with prior knowledge
// (h2c), which the TypeScript SDK uses for http:// base URLs, when the
// http.Server serving it accepts h2c (httpguard.Protocols, as `sandbox
// serve` and the test kit's servers do): the emulator is a plain handler,
// so the program links no HTTP/2 server of its own.
//
// Devboxes are the backend's sandboxes. Their statuses map onto the
// backend's states: create goes provisioning → initializing (the
// launch_commands run) → running,
// suspend and resume stop and start the backend sandbox when it is a
// providers.Machine (they only change the status otherwise), and shutdown
// deletes it; a shut-down devbox stays listed, as on Runloop.
// keep_alive_time_seconds shuts a devbox down at its deadline and an
// after_idle policy suspends or shuts it down when no call used it for that
// long. The long polls (a devbox's and an execution's wait_for_status) are
// held by the server for at most 30 and 25 seconds (Options.DevboxHold,
// Options.ExecutionHold) and answer 408 with X-Should-Retry: true when the
// hold runs out. Executions keep their whole output: the execution views
// give the last last_n lines (100 by default) and say whether they cut
// some, and the SSE streams replay it from any byte offset, then follow it
// until the command ends. Each chunk's offset is the byte offset where it
// ends, so a client that reconnects with the last offset it saw loses and
// repeats nothing. execute dedupes on command_id, and a create carrying an
// X-Request-Id the emulator saw already returns that devbox. Devboxes run
// as Runloop's "user" (on backends that have users; the local provider
// adds it) unless user_parameters names another, root being the backend's
// own user. File paths starting with "~" and relative ones start at the
// devbox user's home; a
// named shell (shell_name) keeps its working directory and exported
// variables from one command to the next. Commands run with bash when the
// sandbox has it (as on Runloop), else /bin/sh; the devbox logs list the
// commands that ran.
//
// What it does not implement: blueprints, snapshots, repositories,
// scenarios, benchmarks, secrets, network policies, tunnels, SSH keys,
// mounts, gateways, MCP, usage, stdin (attach_stdin and
// send_std_in), entrypoints, architectures and
// resource sizes (echoed, not enforced); any blueprint or snapshot named
// at create is accepted and the backend's default image used. The
// emulator's devboxes live in its memory: a restarted emulator does not
// know the backend sandboxes an earlier one made.
package emulator

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// Labels the emulator puts on backend sandboxes.
const (
	labelMarker = "runloop-emulator"
	labelID     = "runloop-emulator-id"
)

// Options configure a Server.
type Options struct {
	// APIKey is the key clients must send as a bearer token; empty
	// accepts any non-empty key.
	APIKey string
	// Log receives one line per request; nil logs nothing.
	Log io.Writer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// DevboxHold and ExecutionHold bound the long polls (defaults 30s
	// and 25s, Runloop's).
	DevboxHold, ExecutionHold time.Duration
	// Wrap, when set, wraps the API's handler (a fault layer, in tests).
	Wrap func(http.Handler) http.Handler
	// ReapInterval is how often deadlines and idle policies are checked
	// (default 1s).
	ReapInterval time.Duration
}

// Server is the emulator. It is an http.Handler and safe for concurrent use.
type Server struct {
	backend providers.Provider
	opts    Options
	now     func() time.Time
	handler http.Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	devboxes map[string]*devbox
	// order lists devbox ids oldest first.
	order []string
	// requests maps a create's X-Request-Id to the devbox it made.
	requests map[string]string
}

// New returns an emulator running every devbox on backend. Close stops its
// background work and the commands it started.
func New(backend providers.Provider, opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DevboxHold <= 0 {
		opts.DevboxHold = wire.DevboxWaitHold * time.Second
	}
	if opts.ExecutionHold <= 0 {
		opts.ExecutionHold = wire.ExecutionWaitHold * time.Second
	}
	if opts.ReapInterval <= 0 {
		opts.ReapInterval = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{backend: backend, opts: opts, now: opts.Now, ctx: ctx, cancel: cancel,
		devboxes: map[string]*devbox{}, requests: map[string]string{}}
	var h http.Handler = s.routes()
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	s.handler = emulator.LogRequests(opts.Log, opts.Now, h)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		emulator.Every(s.ctx, opts.ReapInterval, s.reap)
	}()
	return s
}

// NewEmulator has the shape providers.Registration's Emulator field wants.
// Without a key it makes up a random one, so a served emulator never
// accepts anonymous requests.
func NewEmulator(backend providers.Provider, opts providers.EmulatorOptions) (providers.Emulator, error) {
	if backend == nil {
		return nil, fmt.Errorf("runloop emulator: no backend provider: %w", providers.ErrInvalid)
	}
	key := opts.APIKey
	if key == "" {
		key = "ak_" + emulator.RandomHex(20)
	}
	return New(backend, Options{APIKey: key, Log: opts.Log}), nil
}

// Env returns the variables that point Runloop clients at baseURL.
func (s *Server) Env(baseURL string) map[string]string {
	key := s.opts.APIKey
	if key == "" {
		key = "ak_any"
	}
	return map[string]string{"RUNLOOP_BASE_URL": baseURL, "RUNLOOP_API_KEY": key}
}

// Close ends the commands the emulator started and its background work.
// The backend's sandboxes stay. Close may be called more than once.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// ServeHTTP serves the API, over whatever protocol the request came.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes builds the API's mux behind the key check.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/devboxes", s.create(false))
	mux.HandleFunc("POST /v1/devboxes/create_and_await_running", s.create(true))
	mux.HandleFunc("GET /v1/devboxes", s.list)
	mux.HandleFunc("GET /v1/devboxes/{id}", s.withDevbox(s.get))
	mux.HandleFunc("POST /v1/devboxes/{id}", s.withDevbox(s.update))
	mux.HandleFunc("POST /v1/devboxes/{id}/wait_for_status", s.withDevbox(s.waitForStatus))
	mux.HandleFunc("POST /v1/devboxes/{id}/shutdown", s.withDevbox(s.shutdown))
	mux.HandleFunc("POST /v1/devboxes/{id}/suspend", s.withDevbox(s.suspend))
	mux.HandleFunc("POST /v1/devboxes/{id}/resume", s.withDevbox(s.resume))
	mux.HandleFunc("POST /v1/devboxes/{id}/keep_alive", s.withDevbox(s.keepAlive))
	mux.HandleFunc("GET /v1/devboxes/{id}/logs", s.withDevbox(s.logs))
	mux.HandleFunc("POST /v1/devboxes/{id}/execute", s.running(s.execute))
	mux.HandleFunc("POST /v1/devboxes/{id}/execute_async", s.running(s.executeAsync))
	mux.HandleFunc("POST /v1/devboxes/{id}/execute_sync", s.running(s.executeSync))
	mux.HandleFunc("GET /v1/devboxes/{id}/executions/{eid}", s.withExecution(s.getExecution))
	mux.HandleFunc("POST /v1/devboxes/{id}/executions/{eid}/wait_for_status", s.withExecution(s.waitExecution))
	mux.HandleFunc("POST /v1/devboxes/{id}/executions/{eid}/kill", s.withExecution(s.kill))
	mux.HandleFunc("GET /v1/devboxes/{id}/executions/{eid}/stream_stdout_updates", s.withExecution(s.stream(false)))
	mux.HandleFunc("GET /v1/devboxes/{id}/executions/{eid}/stream_stderr_updates", s.withExecution(s.stream(true)))
	mux.HandleFunc("POST /v1/devboxes/{id}/read_file_contents", s.running(s.readFileContents))
	mux.HandleFunc("POST /v1/devboxes/{id}/write_file_contents", s.running(s.writeFileContents))
	mux.HandleFunc("POST /v1/devboxes/{id}/upload_file", s.running(s.uploadFile))
	mux.HandleFunc("POST /v1/devboxes/{id}/download_file", s.running(s.downloadFile))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint in the emulator: "+r.Method+" "+r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			writeError(w, http.StatusUnauthorized, "invalid or missing API key")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// authorized checks the bearer token in constant time.
func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return false
	}
	if s.opts.APIKey == "" {
		return true
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.opts.APIKey))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// devbox is the emulator's record of one devbox.
type devbox struct {
	id        string
	backendID string
	env       map[string]string

	// mu guards everything below.
	mu       sync.Mutex
	view     wire.Devbox
	changed  chan struct{}
	lastUsed time.Time
	// home is the devbox user's home, where commands start and "~"
	// and relative paths lead.
	home string
	// shell is the bash commands run with, when the sandbox has one.
	shell  string
	execs  map[string]*execution
	byCmd  map[string]string
	nextID int
	// shells are the named shells that ran a command.
	shells map[string]bool
	// bootErr is why the backend sandbox could not be made.
	bootErr error
}

// setStatus moves d to status, recording the transition and waking the
// long polls. The caller holds d.mu.
func (d *devbox) setStatus(status string, now time.Time) {
	if d.view.Status == status {
		return
	}
	d.view.Status = status
	d.view.StateTransitions = append(d.view.StateTransitions, wire.StateTransition{Status: status, TransitionTimeMs: now.UnixMilli()})
	if status == wire.StatusShutdown || status == wire.StatusFailure {
		ms := now.UnixMilli()
		d.view.EndTimeMs = &ms
	}
	close(d.changed)
	d.changed = make(chan struct{})
}

// snapshot returns a copy of d's view.
func (d *devbox) snapshot() wire.Devbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.view
	v.Metadata = maps.Clone(v.Metadata)
	v.StateTransitions = append([]wire.StateTransition(nil), v.StateTransitions...)
	return v
}

// create serves both create endpoints. create_and_await_running answers
// once the devbox runs; POST /v1/devboxes answers at once with the devbox
// provisioning.
func (s *Server) create(await bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body wire.CreateDevbox
		if !readJSON(w, r, &body) {
			return
		}
		reqID := r.Header.Get(wire.HeaderRequestID)
		s.mu.Lock()
		if prev, ok := s.requests[reqID]; ok && reqID != "" {
			d := s.devboxes[prev]
			s.mu.Unlock()
			s.replyDevbox(w, r, d, await)
			return
		}
		now := s.now()
		d := &devbox{
			id: "dbx_" + emulator.RandomHex(12), env: body.EnvironmentVariables, changed: make(chan struct{}),
			lastUsed: now, execs: map[string]*execution{}, byCmd: map[string]string{}, shells: map[string]bool{},
		}
		d.view = wire.Devbox{
			ID: d.id, Name: body.Name, Status: wire.StatusProvisioning, CreateTimeMs: now.UnixMilli(),
			Metadata: maps.Clone(body.Metadata), Capabilities: []string{}, BlueprintID: body.BlueprintID,
			SnapshotID: body.SnapshotID, InitiatorType: "api",
			StateTransitions: []wire.StateTransition{{Status: wire.StatusProvisioning, TransitionTimeMs: now.UnixMilli()}},
		}
		if d.view.Metadata == nil {
			d.view.Metadata = map[string]string{}
		}
		if body.LaunchParameters != nil {
			d.view.LaunchParameters = *body.LaunchParameters
		}
		s.devboxes[d.id] = d
		s.order = append(s.order, d.id)
		if reqID != "" {
			s.requests[reqID] = d.id
		}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.boot(d)
		}()
		s.replyDevbox(w, r, d, await)
	}
}

// replyDevbox answers a create: at once, or once d runs (or failed), up to
// the long poll's hold. A create the backend refused (a policy, a quota)
// is answered with its reason.
func (s *Server) replyDevbox(w http.ResponseWriter, r *http.Request, d *devbox, await bool) {
	if await {
		s.holdDevbox(r.Context(), d, []string{wire.StatusRunning, wire.StatusFailure, wire.StatusShutdown})
		d.mu.Lock()
		err := d.bootErr
		d.mu.Unlock()
		if err != nil {
			writeKindError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, d.snapshot())
}

// boot creates the backend sandbox of d, learns its home and runs the
// launch commands; a backend that refuses, or a launch command that fails,
// marks d failed.
func (s *Server) boot(d *devbox) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	d.mu.Lock()
	d.setStatus(wire.StatusInitializing, s.now())
	lp := d.view.LaunchParameters
	d.mu.Unlock()
	// Runloop's devboxes run as "user" unless user_parameters names
	// another; root is the backend's own user.
	spec := providers.Spec{Env: d.env, Labels: map[string]string{labelMarker: "1", labelID: d.id}, User: wire.DefaultUser}
	if u := lp.UserParameters; u != nil && u.Username != "" {
		spec.User = u.Username
	}
	if spec.User == "root" {
		spec.User = ""
	}
	info, err := s.backend.Create(ctx, spec)
	if err != nil && spec.User == wire.DefaultUser && (errors.Is(err, providers.ErrUnsupported) || errors.Is(err, providers.ErrInvalid)) {
		// A backend without users runs the devbox as its own.
		spec.User = ""
		info, err = s.backend.Create(ctx, spec)
	}
	home, shell := "", ""
	if err == nil {
		// The user's home, and the bash commands run with if the
		// sandbox has one.
		var out strings.Builder
		res, herr := s.backend.Exec(ctx, info.ID, providers.ExecRequest{Shell: `cd && pwd; command -v bash || true`, Stdout: &out})
		if herr == nil && res.ExitCode == 0 {
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			home = lines[0]
			if len(lines) > 1 && strings.HasPrefix(lines[1], "/") {
				shell = lines[1]
			}
		}
		d.mu.Lock()
		d.backendID, d.home, d.shell = info.ID, home, shell
		d.mu.Unlock()
		for _, c := range lp.LaunchCommands {
			var msg strings.Builder
			res, lerr := s.backend.Exec(ctx, info.ID, withShell(providers.ExecRequest{Shell: c, Cwd: home, Stderr: &msg}, shell))
			if lerr == nil && res.ExitCode != 0 {
				lerr = providers.Errorf(providers.ErrInvalid, "", "", "launch command %q exited %d: %s", c, res.ExitCode, strings.TrimSpace(msg.String()))
			}
			if lerr != nil {
				err = lerr
				break
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.view.Status == wire.StatusShutdown {
		// Shut down while booting.
		if info.ID != "" {
			go func() { _ = s.backend.Delete(context.WithoutCancel(ctx), info.ID) }()
		}
		return
	}
	if err != nil {
		d.bootErr = err
		d.view.FailureReason = "execution_failed"
		d.setStatus(wire.StatusFailure, s.now())
		return
	}
	d.setStatus(wire.StatusRunning, s.now())
}

// holdDevbox waits until d's status is one of statuses, up to the hold or
// ctx's end, and reports whether it is.
func (s *Server) holdDevbox(ctx context.Context, d *devbox, statuses []string) bool {
	return s.waitUntil(ctx, s.opts.DevboxHold, func() (bool, <-chan struct{}) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return slices.Contains(statuses, d.view.Status), d.changed
	})
}

// waitUntil waits until ready reports true, asking again each time the
// channel it returned is closed, for at most hold, and reports whether it
// did. The end of ctx or of the emulator ends the wait.
func (s *Server) waitUntil(ctx context.Context, hold time.Duration, ready func() (bool, <-chan struct{})) bool {
	t := time.NewTimer(hold)
	defer t.Stop()
	for {
		ok, changed := ready()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		case <-s.ctx.Done():
			return false
		}
	}
}

// lookup finds a devbox.
func (s *Server) lookup(id string) *devbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.devboxes[id]
}

// withDevbox resolves {id} for h; an unknown one is 404.
func (s *Server) withDevbox(h func(http.ResponseWriter, *http.Request, *devbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d := s.lookup(r.PathValue("id"))
		if d == nil {
			writeError(w, http.StatusNotFound, "devbox "+r.PathValue("id")+" not found")
			return
		}
		d.mu.Lock()
		d.lastUsed = s.now()
		d.mu.Unlock()
		h(w, r, d)
	}
}

// running resolves {id} for h and refuses a devbox that is not running.
func (s *Server) running(h func(http.ResponseWriter, *http.Request, *devbox)) http.HandlerFunc {
	return s.withDevbox(func(w http.ResponseWriter, r *http.Request, d *devbox) {
		d.mu.Lock()
		status := d.view.Status
		d.mu.Unlock()
		if status != wire.StatusRunning {
			writeError(w, http.StatusBadRequest, "devbox "+d.id+" is "+status+", not running")
			return
		}
		h(w, r, d)
	})
}

func (s *Server) get(w http.ResponseWriter, _ *http.Request, d *devbox) {
	writeJSON(w, http.StatusOK, d.snapshot())
}

// update sets the name and metadata: an omitted field is unchanged.
func (s *Server) update(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body struct {
		Name     *string           `json:"name"`
		Metadata map[string]string `json:"metadata"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	d.mu.Lock()
	if body.Name != nil {
		d.view.Name = *body.Name
	}
	if body.Metadata != nil {
		d.view.Metadata = maps.Clone(body.Metadata)
	}
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, d.snapshot())
}

// list pages through the devboxes, newest first.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5000 {
			writeError(w, http.StatusBadRequest, "limit must be between 1 and 5000")
			return
		}
		limit = n
	}
	after, status := q.Get("starting_after"), q.Get("status")
	s.mu.Lock()
	var all []*devbox
	for i := len(s.order) - 1; i >= 0; i-- {
		all = append(all, s.devboxes[s.order[i]])
	}
	s.mu.Unlock()
	var views []wire.Devbox
	for _, d := range all {
		v := d.snapshot()
		if status == "" || v.Status == status {
			views = append(views, v)
		}
	}
	total := len(views)
	if after != "" {
		for i, v := range views {
			if v.ID == after {
				views = views[i+1:]
				break
			}
		}
	}
	out := wire.DevboxList{Devboxes: views, HasMore: len(views) > limit}
	if len(views) > limit {
		out.Devboxes = views[:limit]
	}
	if out.Devboxes == nil {
		out.Devboxes = []wire.Devbox{}
	}
	if q.Get("include_total_count") != "false" {
		out.TotalCount = &total
	}
	writeJSON(w, http.StatusOK, out)
}

// waitForStatus is the devbox long poll.
func (s *Server) waitForStatus(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.WaitForStatus
	if !readJSON(w, r, &body) {
		return
	}
	if len(body.Statuses) == 0 {
		writeError(w, http.StatusBadRequest, "statuses must name at least one status")
		return
	}
	ctx := r.Context()
	if body.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(body.TimeoutSeconds)*time.Second)
		defer cancel()
	}
	if !s.holdDevbox(ctx, d, body.Statuses) {
		if r.Context().Err() != nil {
			return
		}
		writeTimeout(w, "devbox "+d.id+" did not reach "+strings.Join(body.Statuses, ", ")+" in time")
		return
	}
	writeJSON(w, http.StatusOK, d.snapshot())
}

// shutdown deletes the backend sandbox; the devbox stays listed.
func (s *Server) shutdown(w http.ResponseWriter, r *http.Request, d *devbox) {
	if err := s.shutDown(r.Context(), d, "api_shutdown"); err != nil {
		writeKindError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.snapshot())
}

// shutDown ends d for reason: its commands, then its backend sandbox.
func (s *Server) shutDown(ctx context.Context, d *devbox, reason string) error {
	d.mu.Lock()
	if d.view.Status == wire.StatusShutdown || d.view.Status == wire.StatusFailure {
		d.mu.Unlock()
		return nil
	}
	backendID := d.backendID
	execs := make([]*execution, 0, len(d.execs))
	for _, e := range d.execs {
		execs = append(execs, e)
	}
	d.view.ShutdownReason = reason
	d.setStatus(wire.StatusShutdown, s.now())
	d.mu.Unlock()
	for _, e := range execs {
		e.cancel()
	}
	if backendID == "" {
		return nil
	}
	if err := s.backend.Delete(ctx, backendID); err != nil && !errors.Is(err, providers.ErrNotFound) {
		return err
	}
	return nil
}

// suspend stops the backend sandbox when it is a machine.
func (s *Server) suspend(w http.ResponseWriter, r *http.Request, d *devbox) {
	if err := s.suspendDevbox(r.Context(), d); err != nil {
		writeKindError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.snapshot())
}

// suspendDevbox moves d through suspending to suspended; its commands end.
func (s *Server) suspendDevbox(ctx context.Context, d *devbox) error {
	d.mu.Lock()
	switch d.view.Status {
	case wire.StatusSuspended:
		d.mu.Unlock()
		return nil
	case wire.StatusRunning:
	default:
		status := d.view.Status
		d.mu.Unlock()
		return providers.Errorf(providers.ErrInvalid, "", "", "devbox %s is %s, not running", d.id, status)
	}
	d.setStatus(wire.StatusSuspending, s.now())
	execs := make([]*execution, 0, len(d.execs))
	for _, e := range d.execs {
		execs = append(execs, e)
	}
	d.mu.Unlock()
	for _, e := range execs {
		e.cancel()
	}
	if m, ok := s.backend.(providers.Machine); ok {
		if err := m.Stop(ctx, d.backendID); err != nil {
			d.mu.Lock()
			d.setStatus(wire.StatusRunning, s.now())
			d.mu.Unlock()
			return err
		}
	}
	d.mu.Lock()
	d.setStatus(wire.StatusSuspended, s.now())
	d.mu.Unlock()
	return nil
}

// resume starts the backend sandbox again.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, d *devbox) {
	d.mu.Lock()
	switch d.view.Status {
	case wire.StatusRunning:
		d.mu.Unlock()
		writeJSON(w, http.StatusOK, d.snapshot())
		return
	case wire.StatusSuspended:
	default:
		status := d.view.Status
		d.mu.Unlock()
		writeError(w, http.StatusBadRequest, "devbox "+d.id+" is "+status+", not suspended")
		return
	}
	d.setStatus(wire.StatusResuming, s.now())
	d.mu.Unlock()
	if m, ok := s.backend.(providers.Machine); ok {
		if err := m.Start(r.Context(), d.backendID); err != nil {
			d.mu.Lock()
			d.setStatus(wire.StatusSuspended, s.now())
			d.mu.Unlock()
			writeKindError(w, err)
			return
		}
	}
	d.mu.Lock()
	d.setStatus(wire.StatusRunning, s.now())
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, d.snapshot())
}

// keepAlive resets the idle timer (withDevbox did).
func (s *Server) keepAlive(w http.ResponseWriter, _ *http.Request, _ *devbox) {
	writeJSON(w, http.StatusOK, map[string]any{})
}

// reap enforces keep_alive_time_seconds and after_idle.
func (s *Server) reap() {
	now := s.now()
	s.mu.Lock()
	all := make([]*devbox, 0, len(s.devboxes))
	for _, d := range s.devboxes {
		all = append(all, d)
	}
	s.mu.Unlock()
	for _, d := range all {
		d.forgetExecutions(now.Add(-keepExecutions))
	}
	for _, d := range all {
		d.mu.Lock()
		status, lp, created, idle := d.view.Status, d.view.LaunchParameters, time.UnixMilli(d.view.CreateTimeMs), now.Sub(d.lastUsed)
		busy := d.busy()
		d.mu.Unlock()
		if status != wire.StatusRunning {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		switch {
		case lp.AfterIdle != nil && lp.AfterIdle.IdleTimeSeconds > 0 && !busy && idle > time.Duration(lp.AfterIdle.IdleTimeSeconds)*time.Second:
			if lp.AfterIdle.OnIdle == "suspend" {
				_ = s.suspendDevbox(ctx, d)
			} else {
				_ = s.shutDown(ctx, d, "idle")
			}
		case lp.AfterIdle == nil && lp.KeepAliveTimeSeconds > 0 && now.Sub(created) > time.Duration(lp.KeepAliveTimeSeconds)*time.Second:
			_ = s.shutDown(ctx, d, "keep_alive_timeout")
		}
		cancel()
	}
}

// resolve turns a path of a request into an absolute one: "~" and
// relative paths start at the devbox user's home.
func (d *devbox) resolve(p string) (string, error) {
	d.mu.Lock()
	home := d.home
	d.mu.Unlock()
	if home == "" {
		home = "/"
	}
	switch {
	case p == "":
		return "", fmt.Errorf("empty path: %w", providers.ErrInvalid)
	case p == "~":
		return home, nil
	case strings.HasPrefix(p, "~/"):
		return strings.TrimSuffix(home, "/") + p[1:], nil
	case strings.HasPrefix(p, "/"):
		return p, nil
	default:
		return strings.TrimSuffix(home, "/") + "/" + p, nil
	}
}

// readJSON decodes a request body (an empty one is no fields), answering
// 400 itself when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with Runloop's error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.Error{Message: msg})
}

// writeTimeout answers a long poll whose hold ran out.
func writeTimeout(w http.ResponseWriter, msg string) {
	w.Header().Set(wire.HeaderShouldRetry, "true")
	writeError(w, http.StatusRequestTimeout, msg)
}

// writeKindError answers with the status of err's kind and its message.
func writeKindError(w http.ResponseWriter, err error) {
	writeError(w, httpapi.StatusForKind(err), err.Error())
}
