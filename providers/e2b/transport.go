package e2b

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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// api says which API a request goes to, for error mapping.
type api int

const (
	controlAPI api = iota
	envdAPI
)

// errUnreachable marks the edge's reply for a sandbox it cannot reach; the
// request did not reach envd, so it may be sent again after a resume.
var errUnreachable = errors.New("sandbox unreachable")

// request is one logical call, possibly sent several times.
type request struct {
	api    api
	op     string
	method string
	url    string
	header http.Header
	// body is a replayable body; stream a body read once.
	body   []byte
	stream io.Reader
	// idempotent calls are retried on 5xx and on broken connections.
	idempotent bool
	// goneOK turns a 404 on a repeated try into success: an earlier try
	// that got no reply already did the work (kill).
	goneOK bool
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

// do sends r, retrying as its kind allows, and returns a response with a
// 2xx status; any other status becomes an error of the shared kinds.
func (p *Provider) do(ctx context.Context, r request) (*http.Response, error) {
	pol := p.opts.Retry
	var counted *countingReader
	if r.stream != nil {
		counted = &countingReader{r: r.stream}
	}
	for attempt := 1; ; attempt++ {
		var body io.Reader
		switch {
		case counted != nil:
			body = io.NopCloser(counted)
		case r.body != nil:
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, r.url, body)
		if err != nil {
			return nil, fmt.Errorf("e2b: %s: %w", r.op, err)
		}
		for k, v := range r.header {
			req.Header[k] = v
		}
		resp, err := p.client.Do(req)
		last := attempt >= pol.Attempts
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A connection never made sent nothing; a broken one may have
			// delivered the request, so only idempotent calls repeat it.
			safe := r.idempotent || isDialError(err)
			if counted != nil && counted.n.Load() > 0 {
				safe = false
			}
			if !safe || last {
				return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: r.op, Err: err, Msg: retryNote(err.Error(), attempt)}
			}
			if err := sleep(ctx, backoff(pol, attempt)); err != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		if r.goneOK && attempt > 1 && resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			resp.StatusCode, resp.Body = http.StatusNoContent, http.NoBody
			return resp, nil
		}
		herr := p.statusError(r, resp)
		retryable := resp.StatusCode == http.StatusTooManyRequests ||
			(r.idempotent && resp.StatusCode >= 500 && !errors.Is(herr, providers.ErrNotFound))
		if counted != nil && counted.n.Load() > 0 {
			retryable = false
		}
		if !retryable || last {
			if attempt > 1 {
				herr = addNote(herr, attempt)
			}
			return nil, herr
		}
		wait := backoff(pol, attempt)
		if ra, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
			if ra > pol.MaxRetryAfter {
				return nil, addNote(herr, attempt, fmt.Sprintf("the server asks to retry after %v, longer than the %v this client waits", ra, pol.MaxRetryAfter))
			}
			wait = ra
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// doJSON sends r and decodes a JSON reply into out (when not nil).
func (p *Provider) doJSON(ctx context.Context, r request, out any) (*http.Response, error) {
	resp, err := p.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: r.op, Msg: "reading the reply: " + err.Error(), Err: err}
	}
	return resp, nil
}

// statusError reads an error reply and maps it to a shared kind, keeping
// the server's message.
func (p *Provider) statusError(r request, resp *http.Response) error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(raw))
	var body struct {
		Code      json.RawMessage `json:"code"`
		Message   string          `json:"message"`
		SandboxID string          `json:"sandboxId"`
	}
	connectCode := ""
	if json.Unmarshal(raw, &body) == nil && (body.Message != "" || body.Code != nil) {
		msg = body.Message
		var s string
		if json.Unmarshal(body.Code, &s) == nil {
			connectCode = s
		}
	}
	if msg == "" {
		msg = resp.Status
	}
	status := resp.StatusCode
	if r.api == controlAPI && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		return &providers.CredentialError{Provider: Name, Var: EnvAPIKey, Rejected: true, Msg: msg}
	}
	kind := kindForStatus(status)
	if connectCode != "" {
		kind = kindForCode(connectCode)
	}
	// The edge proxy answers 502 for a sandbox it cannot reach: gone, or
	// paused. The request never reached envd.
	var cause error
	if status == http.StatusBadGateway && (body.SandboxID != "" || strings.Contains(strings.ToLower(msg), "not found")) {
		kind, cause = providers.ErrNotFound, errUnreachable
	}
	if status == http.StatusTooManyRequests {
		kind = providers.ErrQuota
	}
	return &providers.Error{Kind: kind, Provider: Name, Op: r.op, Msg: fmt.Sprintf("%s (HTTP %d)", msg, status), Err: cause}
}

func kindForStatus(status int) error {
	switch {
	case status == http.StatusBadRequest, status == http.StatusConflict, status == http.StatusRequestEntityTooLarge:
		return providers.ErrInvalid
	case status == http.StatusUnauthorized:
		return providers.ErrAuth
	case status == http.StatusForbidden:
		// envd's 403 is about the operation (a policy or a file's
		// permissions), not the key: the control plane's 401/403 are
		// turned into credential errors before this.
		return providers.ErrDenied
	case status == http.StatusNotFound:
		return providers.ErrNotFound
	case status == http.StatusTooManyRequests, status == http.StatusInsufficientStorage:
		return providers.ErrQuota
	case status == http.StatusNotImplemented:
		return providers.ErrUnsupported
	default:
		return providers.ErrUnavailable
	}
}

// kindForCode maps a Connect error code to a shared kind.
func kindForCode(code string) error {
	switch code {
	case wire.CodeNotFound:
		return providers.ErrNotFound
	case wire.CodeInvalidArgument, wire.CodeFailedPrecondition, wire.CodeOutOfRange:
		return providers.ErrInvalid
	case wire.CodeAlreadyExists:
		return providers.ErrExists
	case wire.CodeUnauthenticated:
		return providers.ErrAuth
	case wire.CodePermissionDenied:
		return providers.ErrDenied
	case wire.CodeResourceExhausted:
		return providers.ErrQuota
	case wire.CodeDeadlineExceeded:
		return providers.ErrTimeout
	case wire.CodeUnimplemented:
		return providers.ErrUnsupported
	default:
		return providers.ErrUnavailable
	}
}

// connectError turns a Connect error into a provider error.
func connectError(op string, e *wire.Error) error {
	return &providers.Error{Kind: kindForCode(e.Code), Provider: Name, Op: op, Msg: e.Error()}
}

func addNote(err error, attempt int, extra ...string) error {
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

// backoff is the delay before try attempt+1: exponential with jitter.
func backoff(pol RetryPolicy, attempt int) time.Duration {
	d := pol.BaseDelay << (attempt - 1)
	if d > pol.MaxDelay || d <= 0 {
		d = pol.MaxDelay
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := time.Until(t)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isDialError reports a connection that was never established.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
