package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/httpapi"
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

// request is one logical call, possibly sent several times (see
// httpapi.Request).
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

// transport is the shared client that sends p's requests.
func (p *Provider) transport() *httpapi.Client {
	return &httpapi.Client{HTTP: p.client, Retry: p.opts.Retry, Provider: Name, StatusError: p.statusError}
}

// wireRequest converts r for the shared client.
func (r request) wireRequest() *httpapi.Request {
	return &httpapi.Request{
		Op: r.op, Method: r.method, URL: r.url, Header: r.header,
		Body: r.body, Stream: r.stream, Idempotent: r.idempotent, GoneOK: r.goneOK, Data: r.api,
	}
}

// do sends r, retrying as its kind allows, and returns a response with a
// 2xx status; any other status becomes an error of the shared kinds.
func (p *Provider) do(ctx context.Context, r request) (*http.Response, error) {
	return p.transport().Do(ctx, r.wireRequest())
}

// doJSON sends r and decodes a JSON reply into out (when not nil).
func (p *Provider) doJSON(ctx context.Context, r request, out any) (*http.Response, error) {
	return p.transport().DoJSON(ctx, r.wireRequest(), out)
}

// statusError reads an error reply and maps it to a shared kind, keeping
// the server's message: a Connect code decides the kind where there is
// one, and the control plane's 401 and 403 are credential errors.
func (p *Provider) statusError(r *httpapi.Request, resp *http.Response) error {
	msg, raw := httpapi.ReadErrorBody(resp)
	var body struct {
		Code      json.RawMessage `json:"code"`
		SandboxID string          `json:"sandboxId"`
	}
	connectCode := ""
	if json.Unmarshal(raw, &body) == nil {
		var s string
		if json.Unmarshal(body.Code, &s) == nil {
			connectCode = s
		}
	}
	status := resp.StatusCode
	if r.Data == controlAPI && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
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
	return &providers.Error{Kind: kind, Provider: Name, Op: r.Op, Msg: fmt.Sprintf("%s (HTTP %d)", msg, status), Err: cause}
}

// kindForStatus is the shared table, except that E2B answers 409 for an
// operation the sandbox's state refuses (pausing a paused sandbox), and
// envd's 403 is about the operation (a policy or a file's permissions):
// the control plane's 401 and 403 become credential errors before this.
func kindForStatus(status int) error {
	if status == http.StatusConflict {
		return providers.ErrInvalid
	}
	return httpapi.KindForStatus(status)
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
