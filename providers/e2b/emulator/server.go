// Package emulator serves E2B's wire API — the control plane and envd on
// one listener — on top of any provider, so that code written for E2B (the
// official SDKs, or this project's e2b client) runs against free local
// sandboxes. It is what `sandbox serve --api e2b` runs and the harness of
// the e2b client's tests; the official JavaScript SDK's conformance script
// runs against it unchanged.
//
// Requests carrying the E2b-Sandbox-Id and E2b-Sandbox-Port headers, or
// sent to a host named <port>-<sandbox id>.<domain>, go to that sandbox's
// envd; everything else is the control plane. Point clients at it with
// E2B_API_URL and E2B_SANDBOX_URL both set to the server's URL (see Env).
//
// It serves, beside commands and files: PTYs (on backends implementing
// providers.Terminal), directory watching (by polling, see watch.go), file
// metadata in extended attributes (see metadata.go), signed /files URLs
// that name no sandbox (the signature tells it), metrics (see metrics.go),
// startedAfter/startedBefore in the list, and auto-pause at the timeout
// (autoPause; a paused sandbox wakes on connect). A killed sandbox's
// command streams are cut, as when envd's VM goes away.
//
// What it does not implement: the template, snapshot, fork, volume,
// secret, team, key, node and admin APIs; sandbox logs; PUT
// /sandboxes/{id}/network and the network, mcp, iam, volumeMounts and
// autoResume fields of a create (allow_internet_access maps to the
// backend's network mode); templates themselves (any template id is
// accepted and the backend's default image is used unless the backend
// supports images); a pause that freezes processes (a paused sandbox only
// refuses envd traffic until connect); /files/compose, envd's /metrics and
// the orchestrator's endpoints; Range and gzip replies on GET /files; file
// owners in entries (always "user"); ports other than envd's; signals
// other than SIGKILL and SIGTERM (both end the command through the
// backend); exit events kept for late Connect calls; protobuf binary
// encoding and compression. Process ids are the emulator's, not the
// sandbox's.
//
// Like E2B, each sandbox has the user "user" (see users.go): it is the
// backend sandbox's default user (Spec.User), commands run as the user a
// request names (the SDKs' user option; "user" when none) in that user's
// home with its HOME, USER and LOGNAME, and "~" and relative paths start
// at that home. The emulator's extension header wire.HeaderDefaultUser on
// a create names another default user (this project's e2b client sends
// root, the user it runs everything as). File operations run as the
// sandbox's default user, but for uploads and downloads that name another
// user (root's, into /root), which run as commands of that user, and new
// directories the default user cannot make, which root makes as envd does
// (see writeFile); root is the backend's root (the local provider's has no
// capabilities: it cannot write the user's files). A sandbox is a machine as on E2B when the
// backend's are (the local provider's): what one command starts runs on
// for the next, and files in /tmp, /home/user and everywhere else stay
// between calls.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator"
)

// EnvdVersion is the envd version the emulator reports: recent enough
// that the SDKs take their current code paths (octet-stream uploads,
// closing stdin, file metadata).
const EnvdVersion = "0.6.13"

// Labels the emulator keeps on backend sandboxes so that it finds its own
// sandboxes again after a restart.
const (
	labelMarker   = "e2b-emulator"
	labelID       = "e2b-emulator-id"
	labelTemplate = "e2b-emulator-template"
	// labelEnd holds the end of the sandbox's first timeout (Unix
	// seconds), so that a restarted emulator keeps its deadline.
	labelEnd = "e2b-emulator-end"
	// labelUser names the sandbox's default user (Spec.User) when the
	// backend took it.
	labelUser = "e2b-emulator-user"
	// labelAutoPause marks a sandbox that pauses at its timeout.
	labelAutoPause = "e2b-emulator-autopause"
)

// internalLabel reports the labels the emulator keeps for itself and never
// shows as metadata.
func internalLabel(k string) bool {
	return k == labelMarker || k == labelID || k == labelTemplate || k == labelEnd || k == labelUser || k == labelAutoPause
}

// Timeouts of created sandboxes, in seconds: the server default when the
// create call sends none, and the longest allowed.
const (
	defaultTimeout = 15
	maxTimeout     = 24 * 3600
)

// Options configure a Server.
type Options struct {
	// APIKey is the key clients must send as X-API-Key; empty accepts
	// any non-empty key.
	APIKey string
	// Log receives one line per request; nil logs nothing.
	Log io.Writer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReapInterval is how often expired sandboxes are killed (default 1s).
	ReapInterval time.Duration
}

// Server is the emulator. It is an http.Handler and safe for concurrent use.
type Server struct {
	backend providers.Provider
	opts    Options
	now     func() time.Time
	mux     *http.ServeMux
	envd    *http.ServeMux

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// secret derives each sandbox's envd access token, so tokens stay the
	// same when an emulator with the same API key restarts.
	secret string

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	// killing holds the ids whose backend sandbox a kill is deleting:
	// none is adopted again meanwhile (see kill).
	killing map[string]bool
}

// sandbox is the emulator's record of one E2B sandbox.
type sandbox struct {
	id        string
	backendID string
	template  string
	metadata  map[string]string
	envs      map[string]string
	token     string
	started   time.Time
	end       time.Time
	paused    bool
	internet  *bool
	// autoPause pauses the sandbox at its timeout instead of killing it
	// (a paused sandbox wakes on connect).
	autoPause bool
	// killed is closed when the sandbox is killed: the streams of its
	// commands then drop their connections, as envd's do when its VM
	// goes away.
	killed     chan struct{}
	killedOnce sync.Once

	// watchMu guards watchers, the polling watchers of CreateWatcher,
	// and running, every watch that polls (streams too).
	watchMu  sync.Mutex
	watchers map[string]*watcher
	running  map[*watcher]bool

	// metricsMu guards samples, the metrics taken so far.
	metricsMu sync.Mutex
	samples   []wire.SandboxMetric

	// mu guards procs and nextPID.
	mu      sync.Mutex
	procs   map[uint32]*process
	nextPID uint32

	// user is the sandbox's default user, "user" unless the backend
	// refused it ("" then: the backend's own user).
	user string
	// setupMu guards what prepare learns: whether it ran, and the home
	// of user ("" for the backend's default directory).
	setupMu  sync.Mutex
	prepared bool
	home     string
}

// New returns an emulator running every sandbox on backend. Close stops
// its background work.
func New(backend providers.Provider, opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReapInterval <= 0 {
		opts.ReapInterval = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	secret := opts.APIKey
	if secret == "" {
		secret = randomString(32)
	}
	s := &Server{backend: backend, opts: opts, now: opts.Now, ctx: ctx, cancel: cancel, secret: secret, sandboxes: map[string]*sandbox{}}
	s.routes()
	s.wg.Add(1)
	go s.reap()
	return s
}

// NewEmulator has the shape providers.Registration's Emulator field wants.
// Without a key it makes up a random one in E2B's format (Env reports it),
// so a served emulator never accepts anonymous requests.
func NewEmulator(backend providers.Provider, opts providers.EmulatorOptions) (providers.Emulator, error) {
	if backend == nil {
		return nil, fmt.Errorf("e2b emulator: no backend provider: %w", providers.ErrInvalid)
	}
	key := opts.APIKey
	if key == "" {
		key = "e2b_" + emulator.RandomHex(20)
	}
	return New(backend, Options{APIKey: key, Log: opts.Log}), nil
}

// Env returns the variables that point E2B clients at baseURL.
func (s *Server) Env(baseURL string) map[string]string {
	key := s.opts.APIKey
	if key == "" {
		key = "e2b_" + strings.Repeat("0", 40)
	}
	return map[string]string{
		"E2B_API_URL":     baseURL,
		"E2B_SANDBOX_URL": baseURL,
		"E2B_API_KEY":     key,
	}
}

// Close stops the reaper and kills the processes the emulator started,
// which ends their streams. The backend's sandboxes stay; a new emulator
// finds them again. Close may be called more than once.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// envdHost splits the first label of an envd host, <port>-<id> (digits,
// then lower-case letters and digits).
func envdHost(label string) (port, id string, ok bool) {
	port, id, ok = strings.Cut(label, "-")
	if !ok || port == "" || id == "" {
		return "", "", false
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return "", "", false
		}
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "", "", false
		}
	}
	return port, id, true
}

// ServeHTTP routes a request to envd or the control plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Log != nil {
		start := s.now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		w = rec
		defer func() {
			fmt.Fprintf(s.opts.Log, "%s %s %s %s -> %d (%v)\n", start.UTC().Format(time.RFC3339), r.Method, r.Host, r.URL.RequestURI(), rec.status, s.now().Sub(start).Round(time.Millisecond))
		}()
	}
	id, port := r.Header.Get(wire.HeaderSandboxID), r.Header.Get(wire.HeaderSandboxPort)
	if id == "" && port == "" {
		host := r.Host
		if i := strings.IndexByte(host, '.'); i > 0 {
			if p, sid, ok := envdHost(host[:i]); ok {
				port, id = p, sid
			}
		}
	}
	if id == "" && port == "" && r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
		sb := s.bySignature(r)
		if sb == nil {
			writeAPIError(w, http.StatusUnauthorized, msgBadSignature)
			return
		}
		id, port = sb.id, strconv.Itoa(wire.EnvdPort)
	}
	if id != "" || port != "" {
		if id == "" || port == "" {
			writeAPIError(w, http.StatusBadRequest, "both E2b-Sandbox-Id and E2b-Sandbox-Port are required")
			return
		}
		s.serveEnvd(w, r, id, port)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// statusRecorder remembers the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// reap kills sandboxes whose timeout passed.
func (s *Server) reap() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := s.now()
		var expired []*sandbox
		s.mu.Lock()
		for _, sb := range s.sandboxes {
			if !now.After(sb.end) || sb.paused {
				continue
			}
			if sb.autoPause {
				// As on E2B, an auto-paused sandbox waits for a
				// connect; its deadline then starts again.
				sb.paused = true
				continue
			}
			expired = append(expired, sb)
		}
		s.mu.Unlock()
		for _, sb := range expired {
			ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
			_ = s.kill(ctx, sb)
			cancel()
		}
	}
}

// kill ends a sandbox: its processes, the backend sandbox, the record.
// Until the backend's sandbox is deleted its id is not adopted again: a
// lookup or a list meanwhile would find it still running and bring the
// killed sandbox back.
func (s *Server) kill(ctx context.Context, sb *sandbox) error {
	s.mu.Lock()
	if s.sandboxes[sb.id] != sb {
		s.mu.Unlock()
		return providers.ErrNotFound
	}
	delete(s.sandboxes, sb.id)
	if s.killing == nil {
		s.killing = map[string]bool{}
	}
	s.killing[sb.id] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.killing, sb.id)
		s.mu.Unlock()
	}()
	sb.markKilled()
	sb.stopWatchers()
	sb.killAll()
	err := s.backend.Delete(ctx, sb.backendID)
	if err != nil && !isKind(err, providers.ErrNotFound) {
		return err
	}
	return nil
}

// lookup finds a sandbox by E2B id, asking the backend for sandboxes a
// previous emulator created.
func (s *Server) lookup(ctx context.Context, id string) (*sandbox, error) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	s.mu.Unlock()
	if ok {
		return sb, nil
	}
	if !validID(id) {
		return nil, providers.ErrNotFound
	}
	found, err := s.backend.List(ctx, providers.Filter{Labels: map[string]string{labelMarker: "1", labelID: id}})
	if err != nil {
		return nil, err
	}
	for _, info := range found {
		if info.State == providers.StateRunning || info.State == providers.StatePaused {
			if sb := s.adopt(info); sb != nil {
				return sb, nil
			}
		}
	}
	return nil, providers.ErrNotFound
}

// adopt records a backend sandbox found by its labels; nil when a kill
// is deleting it.
func (s *Server) adopt(info providers.Info) *sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := info.Labels[labelID]
	if sb, ok := s.sandboxes[id]; ok {
		return sb
	}
	if s.killing[id] {
		return nil
	}
	md := map[string]string{}
	for k, v := range info.Labels {
		if !internalLabel(k) {
			md[k] = v
		}
	}
	end := s.now().Add(5 * time.Minute)
	if n, err := strconv.ParseInt(info.Labels[labelEnd], 10, 64); err == nil {
		end = time.Unix(n, 0)
	}
	started := info.CreatedAt
	if started.IsZero() {
		started = s.now()
	}
	sb := &sandbox{
		id: id, backendID: info.ID, template: info.Labels[labelTemplate], metadata: md,
		token: s.tokenFor(id), started: started, end: end, user: info.Labels[labelUser],
		procs: map[uint32]*process{}, nextPID: 1000, killed: make(chan struct{}),
		autoPause: info.Labels[labelAutoPause] == "1",
	}
	s.sandboxes[id] = sb
	return sb
}

// markKilled closes sb.killed once.
func (sb *sandbox) markKilled() { sb.killedOnce.Do(func() { close(sb.killed) }) }

// sameSecret compares a key, token or signature a client sent with the
// expected one in constant time: comparing SHA-256 digests hides the length
// as well as where the two first differ.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// tokenFor derives the envd access token of sandbox id.
func (s *Server) tokenFor(id string) string {
	sum := sha256.Sum256([]byte("e2b-emulator envd token\x00" + s.secret + "\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// validID reports an E2B-style id.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomString returns n random characters of idAlphabet.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// writeJSON writes v with a status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeAPIError writes the control plane's error body.
func writeAPIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.APIError{Code: status, Message: msg})
}

// statusOf maps a backend error to an HTTP status.
func statusOf(err error) int {
	switch {
	case isKind(err, providers.ErrNotFound):
		return http.StatusNotFound
	case isKind(err, providers.ErrInvalid), isKind(err, providers.ErrExists):
		return http.StatusBadRequest
	case isKind(err, providers.ErrAuth):
		return http.StatusUnauthorized
	case isKind(err, providers.ErrDenied):
		return http.StatusForbidden
	case isKind(err, providers.ErrQuota):
		return http.StatusTooManyRequests
	case isKind(err, providers.ErrUnsupported):
		return http.StatusNotImplemented
	case isKind(err, providers.ErrTimeout):
		return http.StatusGatewayTimeout
	case isKind(err, providers.ErrUnavailable):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// codeOf maps a backend error to a Connect code.
func codeOf(err error) string {
	switch {
	case isKind(err, providers.ErrNotFound):
		return wire.CodeNotFound
	case isKind(err, providers.ErrInvalid):
		return wire.CodeInvalidArgument
	case isKind(err, providers.ErrExists):
		return wire.CodeAlreadyExists
	case isKind(err, providers.ErrAuth):
		return wire.CodeUnauthenticated
	case isKind(err, providers.ErrDenied):
		return wire.CodePermissionDenied
	case isKind(err, providers.ErrQuota):
		return wire.CodeResourceExhausted
	case isKind(err, providers.ErrUnsupported):
		return wire.CodeUnimplemented
	case isKind(err, providers.ErrTimeout), isKind(err, context.DeadlineExceeded):
		return wire.CodeDeadlineExceeded
	case isKind(err, providers.ErrUnavailable):
		return wire.CodeUnavailable
	case isKind(err, context.Canceled):
		return wire.CodeCanceled
	default:
		return wire.CodeInternal
	}
}

func isKind(err, kind error) bool { return errors.Is(err, kind) }

// itoa formats an int.
func itoa(n int) string { return strconv.Itoa(n) }
