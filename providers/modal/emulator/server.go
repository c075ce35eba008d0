// Package emulator serves Modal's gRPC API — the control plane
// (modal.client.ModalClient) and the task command router
// (modal.task_command_router.TaskCommandRouter) on one port — on top of
// any provider, so that code written for Modal's official SDKs runs
// against local sandboxes unchanged. It is built on the SDK's own
// generated protobuf package and is what `sandbox serve --api modal` runs.
//
// The SDKs dial the command router without TLS only when the control
// plane's host is a loopback name (localhost, 127.0.0.1, ::1), so clients
// must reach the emulator through one: MODAL_SERVER_URL=http://127.0.0.1:PORT.
// The router URL handed out is https://<the address the client used>.
//
// Served: AuthTokenGet, AppGetOrCreate, EnvironmentGetOrCreate,
// ImageGetOrCreate (every image builds at once; the backend's default image
// is used), ImageFromId, ImageDelete, the V2 sandbox calls (SandboxCreateV2, SandboxWaitV2,
// SandboxTerminateV2, SandboxTagsSetV2, SandboxTagsGetV2, SandboxListV2,
// SandboxGetFromNameV2, SandboxGetTaskIdV2, SandboxGetCommandRouterAccess;
// the V1 SandboxGetFromName, SandboxWait, SandboxTerminate,
// SandboxGetTaskId, SandboxTagsGet and SandboxTagsSet answer NotFound,
// since every sandbox here is a V2 one, so that the SDKs' fallback ends and
// an id of the V1 shape is not found rather than unsupported),
// and on the router TaskExecStart, TaskExecStdioRead (resumable by byte
// offset), TaskExecStdinWrite, TaskExecStdinWriteStream,
// TaskExecStdinStatus, TaskExecWait, TaskExecPoll, SandboxWaitUntilReady
// (which waits for an exec readiness probe to exit 0; the emulator runs it
// on the backend every interval) and the entrypoint's SandboxStdioReadV2 and SandboxStdinWriteV2 (a
// sandbox with an entrypoint ends when it exits). Output is kept from the
// last offset a reader reached, less 4 MiB for resumes; a command more
// than 16 MiB ahead of its reader waits, as on a pipe. The SDKs' file
// operations run
// /__modal/.bin/modal-sandbox-fs-tools with a JSON argument; the emulator
// answers those execs itself with the backend's file operations (see
// fstools.go), so the sandboxes need no helper installed.
//
// Sandbox timeouts end a sandbox (status TIMEOUT); block_network maps to
// the backend's network off, anything else to its default. Every call
// runs on the backend given to New, so the approval policy of a gated
// backend sees each of them; a denial answers PERMISSION_DENIED.
//
// Not implemented (the calls answer UNIMPLEMENTED; create parameters
// among these are accepted and ignored): functions, classes, queues,
// volumes, secrets (Secrets.FromName), cloud buckets, snapshots, tunnels,
// sidecars, proxies and GPUs; TCP readiness probes (a sandbox with one is
// ready at once); idle timeouts; registry images (the backend's default
// image runs whatever tag is named); PTYs; enforcing CIDR and domain
// allowlists (their entries are checked). File watching is served by
// polling (see watch.go). Reads through the file helper are limited to
// 1 GiB (the SDKs take a file's bytes only once the helper has exited, so
// the emulator holds them).
package emulator

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/emulator"
)

// Labels the emulator puts on backend sandboxes.
const (
	labelMarker = "modal-emulator"
	labelID     = "modal-emulator-id"
)

// Options configure a Server.
type Options struct {
	// APIKey is the token secret clients must send; empty accepts any
	// non-empty one.
	APIKey string
	// Log receives one line per call; nil logs nothing.
	Log io.Writer
	// Wrap, when set, wraps the gRPC handler inside the h2c layer (the
	// fault layer of package emulator, in tests).
	Wrap func(http.Handler) http.Handler
	// Intercept, when set, is called with every call's full method name
	// once it is authorised; an error it returns (a gRPC status) answers
	// the call instead (the gRPC fault layer, in tests).
	Intercept func(ctx context.Context, method string) error
}

// Server is the emulator: an http.Handler serving gRPC over cleartext
// HTTP/2. It is safe for concurrent use.
type Server struct {
	backend providers.Provider
	opts    Options
	grpc    *grpc.Server
	handler http.Handler
	// key signs the JWTs handed out for the command router.
	key []byte

	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the commands and endings running in the background.
	wg sync.WaitGroup

	mu   sync.Mutex
	apps map[string]string // app name → id
	// creates maps a create's idempotency key to its sandbox id, so a
	// retried create makes one sandbox.
	creates   map[string]string
	sandboxes map[string]*sandbox
	tasks     map[string]*sandbox // task id → sandbox
	// images maps the hash of an image's Dockerfile commands to its id.
	images map[string]string
}

// New returns an emulator running every sandbox on backend. Close ends
// the commands it started; the backend's sandboxes are left alone.
func New(backend providers.Provider, opts Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{backend: backend, opts: opts, key: randomBytes(32), ctx: ctx, cancel: cancel,
		apps: map[string]string{}, creates: map[string]string{}, sandboxes: map[string]*sandbox{}, tasks: map[string]*sandbox{},
		images: map[string]string{}}
	s.grpc = grpc.NewServer(
		grpc.ChainUnaryInterceptor(s.unaryAuth),
		grpc.ChainStreamInterceptor(s.streamAuth),
	)
	pb.RegisterModalClientServer(s.grpc, &control{s: s})
	pb.RegisterTaskCommandRouterServer(s.grpc, &router{s: s})
	var h http.Handler = s.grpc
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	h = emulator.LogRequests(opts.Log, time.Now, h)
	s.handler = h2c.NewHandler(h, &http2.Server{})
	return s
}

// ServeHTTP serves gRPC (HTTP/2 with prior knowledge).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Env returns the variables that point Modal's SDKs (and this project's
// modal provider) at the emulator served at baseURL.
func (s *Server) Env(baseURL string) map[string]string {
	secret := s.opts.APIKey
	if secret == "" {
		secret = "emulator"
	}
	return map[string]string{
		"MODAL_SERVER_URL":   baseURL,
		"MODAL_TOKEN_ID":     "ak-emulator",
		"MODAL_TOKEN_SECRET": secret,
	}
}

// Close ends the commands the emulator started and its timers, and waits
// for what runs in the background.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	for _, sb := range s.sandboxes {
		if sb.timer != nil {
			sb.timer.Stop()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// background runs f counted by Close, unless the emulator is closed.
func (s *Server) background(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Token headers the SDKs send on every control-plane call.
const (
	headerTokenID     = "x-modal-token-id"
	headerTokenSecret = "x-modal-token-secret"
)

// routerService is the gRPC service name of the command router, whose
// calls carry a bearer JWT instead of the token.
const routerService = "/modal.task_command_router.TaskCommandRouter/"

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return next(srv, ss)
}

// authorize checks the token (control plane) or the JWT (router).
func (s *Server) authorize(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if strings.HasPrefix(method, routerService) {
		tok, ok := strings.CutPrefix(first("authorization"), "Bearer ")
		if !ok || !s.validJWT(tok) {
			return status.Error(codes.Unauthenticated, "invalid or missing command router token")
		}
		return s.intercept(ctx, method)
	}
	id, secret := first(headerTokenID), first(headerTokenSecret)
	if id == "" || secret == "" {
		return status.Error(codes.Unauthenticated, "missing token: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
	}
	if s.opts.APIKey != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(s.opts.APIKey)) != 1 {
		return status.Error(codes.Unauthenticated, "token rejected")
	}
	return s.intercept(ctx, method)
}

func (s *Server) intercept(ctx context.Context, method string) error {
	if s.opts.Intercept == nil {
		return nil
	}
	return s.opts.Intercept(ctx, method)
}

// jwt mints a signed token valid for a day (the SDKs read its exp).
func (s *Server) jwt() string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body, _ := json.Marshal(map[string]int64{"exp": time.Now().Add(24 * time.Hour).Unix()})
	msg := head + "." + enc.EncodeToString(body)
	return msg + "." + enc.EncodeToString(s.sign(msg))
}

func (s *Server) sign(msg string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (s *Server) validJWT(tok string) bool {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	return err == nil && hmac.Equal(sig, s.sign(tok[:i]))
}

// randomBytes returns n random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// crockford is the alphabet of ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newID mints prefix + 26 ULID characters (V2-shaped for sandboxes: the
// SDKs route any id that is not sb- plus 22 base-62 characters to V2).
func newID(prefix string) string {
	b := randomBytes(26)
	for i := range b {
		b[i] = crockford[int(b[i])%len(crockford)]
	}
	return prefix + string(b)
}

// statusCodes maps the shared kinds (and context errors) to gRPC codes,
// first match wins.
var statusCodes = []struct {
	kind error
	code codes.Code
}{
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{providers.ErrTimeout, codes.DeadlineExceeded},
	{providers.ErrNotFound, codes.NotFound},
	{providers.ErrInvalid, codes.InvalidArgument},
	{providers.ErrExists, codes.AlreadyExists},
	{providers.ErrQuota, codes.ResourceExhausted},
	{providers.ErrDenied, codes.PermissionDenied},
	{providers.ErrAuth, codes.Unauthenticated},
	{providers.ErrUnsupported, codes.Unimplemented},
	{providers.ErrUnavailable, codes.Unavailable},
}

// statusOf turns a backend error into a gRPC status, keeping its message.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	for _, k := range statusCodes {
		if errors.Is(err, k.kind) {
			code = k.code
			break
		}
	}
	return status.Error(code, err.Error())
}

// authority returns the host:port the client dialled.
func authority(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(":authority"); len(v) > 0 {
		return v[0]
	}
	return "127.0.0.1"
}

// routerURL is the command router's address for a client of ctx.
func routerURL(ctx context.Context) string { return "https://" + authority(ctx) }

// notFound is the status of an unknown sandbox.
func notFound(id string) error {
	return status.Errorf(codes.NotFound, "Sandbox with id %s not found", id)
}

var errClosed = fmt.Errorf("emulator closed: %w", providers.ErrUnavailable)
