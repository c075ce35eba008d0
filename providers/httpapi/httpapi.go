// Package httpapi is the HTTP plumbing the cloud providers' clients share:
// one logical call sent with bounded retries (exponential backoff with
// jitter, Retry-After honoured up to a limit), repeated only when that is
// safe (an idempotent call, a refusal with 429, or a connection that was
// never made; never a streamed body of which some bytes were sent), and
// one table between the shared error kinds of package providers and HTTP
// statuses, which clients read replies with and emulators answer with.
//
// Each provider keeps its own wire details: how it reads an error body,
// which statuses of its API mean something else (a credential error, a
// sandbox that cannot be reached), through Client.StatusError.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// RetryPolicy bounds the retries of one call.
type RetryPolicy struct {
	// Attempts is the most tries of one call, the first included
	// (default 5).
	Attempts int
	// BaseDelay is the first backoff delay, doubled each time
	// (default 250ms), up to MaxDelay (default 5s).
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a server asking
	// for a longer wait fails the call at once (default 30s).
	MaxRetryAfter time.Duration
}

// WithDefaults fills the zero fields of r.
func (r RetryPolicy) WithDefaults() RetryPolicy {
	if r.Attempts <= 0 {
		r.Attempts = 5
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 250 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 5 * time.Second
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = 30 * time.Second
	}
	return r
}

// Request is one logical call, possibly sent several times.
type Request struct {
	// Op names the operation in errors ("create", "read /x").
	Op     string
	Method string
	URL    string
	Header http.Header
	// Body is a replayable body; Stream a body read once, which is sent
	// again only when none of it was read.
	Body   []byte
	Stream io.Reader
	// Idempotent calls are retried on 5xx and on broken connections.
	Idempotent bool
	// GoneOK turns a 404 on a repeated try into success: an earlier try
	// that got no reply already did the work (a delete).
	GoneOK bool
	// Data is the provider's own note about the request, for its
	// StatusError.
	Data any
}

// Client sends Requests. It is safe for concurrent use.
type Client struct {
	// HTTP makes the requests.
	HTTP *http.Client
	// Retry bounds the retries; zero fields take the defaults.
	Retry RetryPolicy
	// Provider names the provider in errors.
	Provider string
	// StatusError turns a reply with a status other than 2xx into an
	// error (it closes the body); nil means Client.DefaultStatusError.
	StatusError func(r *Request, resp *http.Response) error
}

// NewHTTPClient returns an HTTP client for long streams: sane connection
// timeouts, no overall timeout, many idle connections per host.
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	tr.ResponseHeaderTimeout = 0
	return &http.Client{Transport: tr}
}

// countingReader counts the bytes a request body gave away, so a streamed
// body is retried only when none of it was sent.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// Do sends r, retrying as its kind allows, and returns a response with a
// 2xx status; any other status becomes an error of the shared kinds.
func (c *Client) Do(ctx context.Context, r *Request) (*http.Response, error) {
	pol := c.Retry.WithDefaults()
	var counted *countingReader
	if r.Stream != nil {
		counted = &countingReader{r: r.Stream}
	}
	sent := func() bool { return counted != nil && counted.n.Load() > 0 }
	for attempt := 1; ; attempt++ {
		var body io.Reader
		switch {
		case counted != nil:
			body = io.NopCloser(counted)
		case r.Body != nil:
			body = bytes.NewReader(r.Body)
		}
		req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.Provider, r.Op, err)
		}
		for k, v := range r.Header {
			req.Header[k] = v
		}
		resp, err := c.HTTP.Do(req)
		last := attempt >= pol.Attempts
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A connection never made sent nothing; a broken one may have
			// delivered the request, so only idempotent calls repeat it.
			safe := (r.Idempotent || IsDialError(err)) && !sent()
			if !safe || last {
				if IsDialError(err) {
					return nil, unreachable(c.Provider, r, attempt, err)
				}
				return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: c.Provider, Op: r.Op, Err: err, Msg: retryNote(err.Error(), attempt)}
			}
			if err := Sleep(ctx, Backoff(pol, attempt)); err != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		if r.GoneOK && attempt > 1 && resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			resp.StatusCode, resp.Body = http.StatusNoContent, http.NoBody
			return resp, nil
		}
		herr := c.statusError(r, resp)
		retryable := resp.StatusCode == http.StatusTooManyRequests ||
			(r.Idempotent && resp.StatusCode >= 500 && !errors.Is(herr, providers.ErrNotFound))
		if sent() {
			retryable = false
		}
		if !retryable || last {
			if attempt > 1 {
				herr = AddNote(herr, attempt)
			}
			return nil, herr
		}
		wait := Backoff(pol, attempt)
		if ra, ok := RetryAfter(resp.Header.Get("Retry-After")); ok {
			if ra > pol.MaxRetryAfter {
				return nil, AddNote(herr, attempt, fmt.Sprintf("the server asks to retry after %v, longer than the %v this client waits", ra, pol.MaxRetryAfter))
			}
			wait = ra
		}
		if err := Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// DoJSON sends r and decodes a JSON reply into out (when not nil).
func (c *Client) DoJSON(ctx context.Context, r *Request, out any) (*http.Response, error) {
	resp, err := c.Do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: c.Provider, Op: r.Op, Msg: "reading the reply: " + err.Error(), Err: err}
	}
	return resp, nil
}

func (c *Client) statusError(r *Request, resp *http.Response) error {
	if c.StatusError != nil {
		return c.StatusError(r, resp)
	}
	return c.DefaultStatusError(r, resp)
}

// DefaultStatusError reads an error reply (closing its body) and maps its
// status with KindForStatus, keeping the server's message: the "message"
// (or "error") field of a JSON body, else the body, else the status line.
func (c *Client) DefaultStatusError(r *Request, resp *http.Response) error {
	msg, _ := ReadErrorBody(resp)
	return &providers.Error{Kind: KindForStatus(resp.StatusCode), Provider: c.Provider, Op: r.Op, Msg: fmt.Sprintf("%s (HTTP %d)", msg, resp.StatusCode)}
}

// ReadErrorBody reads up to 64 KiB of an error reply, closes it, and
// returns the server's message (the "message" or "error" field of a JSON
// body, else the trimmed body, else the status line) and the raw bytes.
func ReadErrorBody(resp *http.Response) (msg string, raw []byte) {
	defer resp.Body.Close()
	raw, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg = strings.TrimSpace(string(raw))
	var body struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil {
		for _, f := range []json.RawMessage{body.Message, body.Error} {
			var s string
			if json.Unmarshal(f, &s) == nil && s != "" {
				msg = s
				break
			}
		}
	}
	if msg == "" {
		msg = resp.Status
	}
	return msg, raw
}

// KindForStatus maps an HTTP status to a shared error kind: the reverse of
// StatusForKind, plus the statuses servers use besides those.
func KindForStatus(status int) error {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return providers.ErrInvalid
	case http.StatusConflict:
		return providers.ErrExists
	case http.StatusUnauthorized:
		return providers.ErrAuth
	case http.StatusForbidden:
		return providers.ErrDenied
	case http.StatusNotFound, http.StatusGone:
		return providers.ErrNotFound
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return providers.ErrQuota
	case http.StatusNotImplemented:
		return providers.ErrUnsupported
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return providers.ErrTimeout
	default:
		return providers.ErrUnavailable
	}
}

// StatusForKind maps an error to the HTTP status an emulator answers
// with, by its shared kind (500 when it has none).
func StatusForKind(err error) int {
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, providers.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, providers.ErrExists):
		return http.StatusConflict
	case errors.Is(err, providers.ErrAuth):
		return http.StatusUnauthorized
	case errors.Is(err, providers.ErrDenied):
		return http.StatusForbidden
	case errors.Is(err, providers.ErrQuota):
		return http.StatusTooManyRequests
	case errors.Is(err, providers.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, providers.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, providers.ErrUnavailable):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// AddNote appends "after N attempts" (and extra notes) to err's message.
func AddNote(err error, attempt int, extra ...string) error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		cp := *pe
		cp.Msg = retryNote(cp.Msg, attempt, extra...)
		return &cp
	}
	var ce *providers.CredentialError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%s: %w", retryNote("", attempt, extra...), err)
}

func retryNote(msg string, attempt int, extra ...string) string {
	parts := []string{msg}
	if attempt > 1 {
		parts = append(parts, fmt.Sprintf("after %d attempts", attempt))
	}
	parts = append(parts, extra...)
	var out []string
	for _, s := range parts {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}

// Backoff is the delay before try attempt+1: exponential with jitter,
// between half and all of BaseDelay·2^(attempt-1), at most MaxDelay.
func Backoff(pol RetryPolicy, attempt int) time.Duration {
	d := pol.BaseDelay << (attempt - 1)
	if d > pol.MaxDelay || d <= 0 {
		d = pol.MaxDelay
	}
	return d/2 + rand.N(d/2+1)
}

// RetryAfter parses a Retry-After header: seconds or an HTTP date.
func RetryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// unreachable is the error of a call whose connection was never made:
// the URL it tried (without the query, which may carry tokens) and why.
func unreachable(provider string, r *Request, attempts int, err error) error {
	where := r.URL
	if u, perr := url.Parse(r.URL); perr == nil {
		u.RawQuery, u.Fragment, u.User = "", "", nil
		where = u.String()
	}
	cause := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		cause = op.Err.Error()
	}
	return &providers.UnreachableError{Provider: provider, Op: r.Op, URL: where, Cause: cause, Attempts: attempts, Err: err}
}

// IsDialError reports a connection that was never established.
func IsDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// SizedBody wraps a reply body so that a read ending before the
// Content-Length (want; -1 when unknown) is an error of kind
// ErrUnavailable, and so is a connection broken mid-way: a cut download
// is never taken for a short file.
type SizedBody struct {
	// Body is the reply body; Provider and Op name the call in errors.
	Body     io.ReadCloser
	Want     int64
	Provider string
	Op       string
	got      int64
}

// Read reads the body, turning an early end into an error.
func (b *SizedBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	b.got += int64(n)
	if err == io.EOF && b.Want >= 0 && b.got < b.Want {
		return n, &providers.Error{Kind: providers.ErrUnavailable, Provider: b.Provider, Op: b.Op, Msg: fmt.Sprintf("download cut after %d of %d bytes", b.got, b.Want)}
	}
	if err != nil && err != io.EOF {
		return n, &providers.Error{Kind: providers.ErrUnavailable, Provider: b.Provider, Op: b.Op, Msg: fmt.Sprintf("download cut after %d bytes: %v", b.got, err), Err: err}
	}
	return n, err
}

// Close closes the body.
func (b *SizedBody) Close() error { return b.Body.Close() }
