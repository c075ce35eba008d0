// Package emulator serves Daytona's wire API — the control plane under
// /api, the toolbox of every sandbox under /toolbox/{id} (the
// toolboxProxyUrl it hands out) and the Socket.IO events gateway the SDKs
// open at /api/socket.io/ — on top of any provider, so that code written
// for Daytona (the official SDKs, or this project's daytona client) runs
// against local sandboxes. It is what `sandbox serve --api daytona` runs;
// the official TypeScript SDK's conformance script runs against it
// unchanged.
//
// Sandboxes are started, stopped (the backend's Machine Stop when it has
// one) and destroyed; archived, paused and the other states are not
// emulated. autoStopInterval stops a sandbox that saw no toolbox request
// for that many minutes, autoDeleteInterval destroys one that has been
// stopped that long (0: at once). A session's commands run on the
// backend with providers.SessionCommand, so cd and export carry over;
// their output is kept with Daytona's stdout and stderr markers and
// followed over a websocket.
//
// Signed file URLs (see signed.go) and /system/metrics work; code-run runs
// Python with python3 and JavaScript with node. What it does not
// implement: snapshots and image builds, volumes, secrets, warm pools,
// organizations, regions, preview URLs, backups, forks, resizing, pause
// and archive; events pushed on the gateway; the toolbox's git, LSP, PTY,
// interpreter, computer-use and port APIs; a command's input; file owners
// (reported as the sandbox's user). Relative paths are taken from
// /workspace, which is also the working and the home directory it
// reports. Resource fields are stored and reported but not enforced.
package emulator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
	shared "github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/httpapi"
)

// Labels the emulator keeps on backend sandboxes so that a restarted
// emulator finds its sandboxes again.
const (
	labelMarker   = "daytona-emulator"
	labelID       = "daytona-emulator-id"
	labelName     = "daytona-emulator-name"
	labelSnapshot = "daytona-emulator-snapshot"
)

// internalLabel reports the labels the emulator keeps for itself.
func internalLabel(k string) bool {
	return k == labelMarker || k == labelID || k == labelName || k == labelSnapshot
}

// Defaults of a created sandbox, as Daytona's.
const (
	defaultAutoStop    = 15
	defaultAutoArchive = 7 * 24 * 60
	defaultAutoDelete  = -1
	defaultUser        = "daytona"
	defaultCPU         = 1
	defaultMemory      = 1
	defaultDisk        = 3
	organizationID     = "emulator"
	// workDir is the working directory, home and base of relative paths.
	workDir = providers.DefaultWorkdir
)

// Options configure a Server.
type Options struct {
	// APIKey is the key clients must send as a Bearer token; empty
	// accepts any non-empty key.
	APIKey string
	// Log receives one line per request; nil logs nothing.
	Log io.Writer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Minute is the unit of the auto-stop and auto-delete intervals
	// (tests shorten it); zero means a minute.
	Minute time.Duration
	// ReapInterval is how often the intervals are checked (default 1s).
	ReapInterval time.Duration
}

// Server is the emulator. It is an http.Handler and safe for concurrent use.
type Server struct {
	backend providers.Provider
	opts    Options
	mux     *http.ServeMux
	// handler is mux behind the request log and the authentication.
	handler http.Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	sandboxes map[string]*sandbox
}

// New returns an emulator running every sandbox on backend. Close stops
// its background work.
func New(backend providers.Provider, opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Minute <= 0 {
		opts.Minute = time.Minute
	}
	if opts.ReapInterval <= 0 {
		opts.ReapInterval = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{backend: backend, opts: opts, ctx: ctx, cancel: cancel, sandboxes: map[string]*sandbox{}}
	s.routes()
	s.handler = shared.LogRequests(opts.Log, opts.Now, http.HandlerFunc(s.authenticate))
	s.wg.Add(1)
	go s.reap()
	return s
}

// NewEmulator has the shape providers.Registration's Emulator field wants.
// Without a key it makes up a random one (Env reports it), so a served
// emulator never accepts anonymous requests.
func NewEmulator(backend providers.Provider, opts providers.EmulatorOptions) (providers.Emulator, error) {
	if backend == nil {
		return nil, fmt.Errorf("daytona emulator: no backend provider: %w", providers.ErrInvalid)
	}
	key := opts.APIKey
	if key == "" {
		key = "dtn_" + shared.RandomHex(16)
	}
	return New(backend, Options{APIKey: key, Log: opts.Log}), nil
}

// Env returns the variables that point Daytona clients at baseURL.
func (s *Server) Env(baseURL string) map[string]string {
	key := s.opts.APIKey
	if key == "" {
		key = "dtn_" + strings.Repeat("0", 64)
	}
	return map[string]string{
		"DAYTONA_API_URL": strings.TrimRight(baseURL, "/") + "/api",
		"DAYTONA_API_KEY": key,
	}
}

// Close stops the reaper and the commands the emulator started. The
// backend's sandboxes stay; a new emulator finds them again. Close may be
// called more than once.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	all := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		all = append(all, sb)
	}
	s.mu.Unlock()
	for _, sb := range all {
		sb.endSessions()
	}
	s.wg.Wait()
	return nil
}

// ServeHTTP logs, authenticates and routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// authenticate answers 401 to a request without the key. The Socket.IO
// gateway authenticates inside its own protocol.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/socket.io") && !s.authorized(r) && !s.signedURL(r) {
		writeError(w, r, http.StatusUnauthorized, "Invalid credentials: send the API key as Authorization: Bearer <key>", "")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized checks the Bearer key.
func (s *Server) authorized(r *http.Request) bool {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && s.validKey(key)
}

// validKey compares a key in constant time (digests hide the length).
func (s *Server) validKey(key string) bool {
	if key == "" {
		return false
	}
	if s.opts.APIKey == "" {
		return true
	}
	g, w := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(s.opts.APIKey))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func (s *Server) routes() {
	m := http.NewServeMux()
	s.mux = m
	m.HandleFunc("GET /api/socket.io/", s.socketIO)
	s.controlRoutes(m)
	s.toolboxRoutes(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path+" (not emulated)", "")
	})
}

// writeJSON writes v with a status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes Daytona's error body; code is a daemon error code
// (toolbox) or empty.
func writeError(w http.ResponseWriter, r *http.Request, status int, msg, code string) {
	e := errorBody(r, status, msg, code)
	writeJSON(w, status, e)
}

// errorBody is Daytona's error body for a status.
func errorBody(r *http.Request, status int, msg, code string) wire.Error {
	e := wire.Error{StatusCode: status, Message: msg, Error: http.StatusText(status), Path: r.URL.Path, Method: r.Method, Timestamp: time.Now().UTC().Format(time.RFC3339Nano)}
	if code != "" {
		e.Code, e.Source = code, wire.SourceDaemon
	}
	return e
}

// writeBackendError maps a backend error to a status through the shared
// table, keeping its message; a missing file carries FILE_NOT_FOUND.
func writeBackendError(w http.ResponseWriter, r *http.Request, err error) {
	status := httpapi.StatusForKind(err)
	code := ""
	if status == http.StatusNotFound && strings.HasPrefix(routePath(r), "/files") {
		code = wire.CodeFileNotFound
	}
	writeError(w, r, status, err.Error(), code)
}

// routePath is the request's path inside the toolbox ("/files/info").
func routePath(r *http.Request) string {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/toolbox/"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i:]
		}
	}
	return p
}

func isKind(err, kind error) bool { return errors.Is(err, kind) }

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
