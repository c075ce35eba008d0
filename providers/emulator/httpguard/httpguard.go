// Package httpguard bounds what clients can hold of an emulator served to a
// network (`sandbox serve`): how many connections are open at once, how long
// a connection may sit idle or take to send its headers, and how long a
// request body or a response may stall.
//
// Stalls are measured per read and per write, not per request: an upload
// that keeps arriving, or a command's output streamed for hours, is never
// cut, while a client that stops sending or stops reading is. There is
// deliberately no http.Server ReadTimeout or WriteTimeout, which would end
// every long upload and stream.
package httpguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/agentbox/sandbox/providers"
)

// Defaults of Limits.
const (
	// DefaultMaxConns is the number of connections served at once.
	DefaultMaxConns = providers.EmulatorMaxConns
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection with no request.
	DefaultIdleTimeout = providers.EmulatorIdleTimeout
	// DefaultStallTimeout ends a request whose body, or whose response,
	// has not moved for this long.
	DefaultStallTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's headers.
	DefaultMaxHeaderBytes = 64 << 10
)

// Limits bound what one client can hold of a server. A zero field takes
// its default (see DefaultLimits).
type Limits struct {
	// MaxConns is how many connections are served at once; further ones
	// wait in the kernel's accept queue until one closes, so idle clients
	// cannot use up the process's file descriptors.
	MaxConns int
	// ReadHeaderTimeout bounds the time to read a request's headers,
	// from the connection's opening or its first byte after an idle wait.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new
	// request for this long.
	IdleTimeout time.Duration
	// BodyStallTimeout ends a request whose body sends no byte for this
	// long. Handlers that wait for a client stream on purpose, once the
	// request is authenticated, lift it with AllowIdleBody.
	BodyStallTimeout time.Duration
	// WriteStallTimeout ends a response when one write to the client
	// blocks for this long (the client stopped reading). Time between
	// writes does not count.
	WriteStallTimeout time.Duration
	// MaxHeaderBytes bounds the size of a request's headers.
	MaxHeaderBytes int
}

// DefaultLimits returns the limits `sandbox serve` uses.
func DefaultLimits() Limits {
	return Limits{
		MaxConns:          DefaultMaxConns,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		BodyStallTimeout:  DefaultStallTimeout,
		WriteStallTimeout: DefaultStallTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}
}

// withDefaults fills the zero fields of l.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.BodyStallTimeout <= 0 {
		l.BodyStallTimeout = d.BodyStallTimeout
	}
	if l.WriteStallTimeout <= 0 {
		l.WriteStallTimeout = d.WriteStallTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	return l
}

// NewServer returns a server for h with l's timeouts; serve it on a
// listener from LimitListener. The caller may set further fields
// (BaseContext, ErrorLog) before serving.
func NewServer(h http.Handler, l Limits) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           Handler(h, l),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		Protocols:         Protocols(),
	}
}

// Protocols are what an emulator's server speaks: HTTP/1.1, and cleartext
// HTTP/2 with prior knowledge (h2c), which SDKs use for http:// base URLs
// (Runloop's TypeScript SDK; gRPC, Modal's).
func Protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// LimitListener wraps ln so that it accepts at most l.MaxConns
// connections at once.
func LimitListener(ln net.Listener, l Limits) net.Listener {
	return netutil.LimitListener(ln, l.withDefaults().MaxConns)
}

// ServeEmulator serves em on ln, with the default limits but maxConns
// and idleTimeout, until ctx ends (a nil return) or serving fails. Then em
// is closed first (ending its processes ends their streams, so the
// shutdown does not wait for long-running commands) and the server is
// shut down, waiting up to five seconds for the requests in flight.
// `sandbox serve` serves with it (the CLI's Deps.Serve).
func ServeEmulator(ctx context.Context, em providers.Emulator, ln net.Listener, maxConns int, idleTimeout time.Duration) error {
	h, ok := em.(http.Handler)
	if !ok {
		return fmt.Errorf("serve: the emulator %T serves no HTTP", em)
	}
	l := DefaultLimits()
	l.MaxConns = maxConns
	l.IdleTimeout = idleTimeout
	// A connection that sends nothing is idle too.
	l.ReadHeaderTimeout = min(l.ReadHeaderTimeout, idleTimeout)
	srv := NewServer(h, l)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(LimitListener(ln, l)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	em.Close()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: shut down: %w", err)
	}
	return nil
}

// Handler wraps h with the per-read and per-write stall deadlines of l
// (BodyStallTimeout, WriteStallTimeout). NewServer uses it.
func Handler(h http.Handler, l Limits) http.Handler {
	l = l.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(l.WriteStallTimeout))
		// The server writes what is buffered after the handler returns,
		// which may be long after its last write.
		defer func() { _ = rc.SetWriteDeadline(time.Now().Add(l.WriteStallTimeout)) }()
		w = &stallWriter{ResponseWriter: w, rc: rc, stall: l.WriteStallTimeout}

		// A request without a body gets no read deadline: the server is
		// already reading the connection in the background to notice the
		// client leaving, and a deadline there would cancel the request.
		if r.Body != nil && r.Body != http.NoBody {
			b := &stallBody{ReadCloser: r.Body, rc: rc, stall: l.BodyStallTimeout}
			b.arm()
			defer b.end()
			r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
			r.Body = b
		}
		h.ServeHTTP(w, r)
	})
}

// AllowIdleBody lifts the body stall deadline of r, for a handler that
// reads a client stream whose pauses are legitimate (a command's stdin).
// Call it only once the request is authenticated. It does nothing for a
// request that did not pass through Handler.
func AllowIdleBody(r *http.Request) {
	if b, ok := r.Context().Value(bodyKey{}).(*stallBody); ok {
		b.allowIdle()
	}
}

// bodyKey carries a request's *stallBody in its context.
type bodyKey struct{}

// stallBody moves the connection's read deadline forward before every read
// of the body and removes it once the body has been read to its end: the
// server then reads the connection in the background to notice the client
// leaving, and a deadline left there would cancel the request.
type stallBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	stall time.Duration

	// mu orders the deadline changes; off is set at the body's end, when
	// idle waits are allowed and when the handler has returned.
	mu  sync.Mutex
	off bool
}

// arm sets the read deadline one stall from now, unless lifted.
func (b *stallBody) arm() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.off {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.stall))
	}
}

// Read reads the body under a fresh deadline.
func (b *stallBody) Read(p []byte) (int, error) {
	b.arm()
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.mu.Lock()
		if !b.off && errors.Is(err, io.EOF) {
			b.off = true
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.mu.Unlock()
	}
	return n, err
}

// allowIdle removes the read deadline for the rest of the body.
func (b *stallBody) allowIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.off {
		b.off = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// end stops deadline changes when the handler returns: from then on the
// server owns the connection's deadlines.
func (b *stallBody) end() {
	b.mu.Lock()
	b.off = true
	b.mu.Unlock()
}

// stallWriter moves the connection's write deadline forward before every
// write and flush.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

// Write writes under a fresh deadline.
func (s *stallWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	return s.ResponseWriter.Write(p)
}

// FlushError flushes under a fresh deadline; http.ResponseController
// uses it.
func (s *stallWriter) FlushError() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	return s.rc.Flush()
}

// Flush implements http.Flusher.
func (s *stallWriter) Flush() { _ = s.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (s *stallWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
