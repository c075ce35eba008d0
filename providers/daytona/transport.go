package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
	"github.com/agentbox/sandbox/providers/httpapi"
)

// transport is the shared client that sends p's requests.
func (p *Provider) transport() *httpapi.Client {
	return &httpapi.Client{HTTP: p.client, Retry: p.opts.Retry, Provider: Name, StatusError: p.statusError}
}

// headers are the headers of every API and toolbox request.
func (p *Provider) headers() http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+p.opts.APIKey)
	h.Set(wire.HeaderSource, "sandbox-go")
	h.Set(wire.HeaderSDKVersion, wire.SDKVersion)
	h.Set("User-Agent", "sandbox-daytona-go")
	h.Set("Accept", "application/json")
	if p.opts.Organization != "" {
		h.Set(wire.HeaderOrganization, p.opts.Organization)
	}
	return h
}

// newRequest prepares a call to url with a JSON body (when body is not
// nil).
func (p *Provider) newRequest(op, method, url string, body any, idempotent bool) (*httpapi.Request, error) {
	r := &httpapi.Request{Op: op, Method: method, URL: url, Header: p.headers(), Idempotent: idempotent}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("daytona: %s: %w", op, err)
		}
		r.Body = b
		r.Header.Set("Content-Type", "application/json")
	}
	return r, nil
}

// call sends a JSON request to url and decodes the reply into out (when
// not nil).
func (p *Provider) call(ctx context.Context, op, method, url string, in, out any, idempotent bool) error {
	r, err := p.newRequest(op, method, url, in, idempotent)
	if err != nil {
		return err
	}
	_, err = p.transport().DoJSON(ctx, r, out)
	return err
}

// statusError reads an error reply and maps it to a shared kind, keeping
// the server's message: a 401 is a rejected DAYTONA_API_KEY, a daemon
// error code decides the kind where there is one, and the status does
// otherwise.
func (p *Provider) statusError(r *httpapi.Request, resp *http.Response) error {
	msg, raw := httpapi.ReadErrorBody(resp)
	status := resp.StatusCode
	if status == http.StatusUnauthorized {
		return &providers.CredentialError{Provider: Name, Var: EnvAPIKey, Rejected: true, Msg: msg}
	}
	var body wire.Error
	_ = json.Unmarshal(raw, &body)
	kind := httpapi.KindForStatus(status)
	switch {
	case body.Code == wire.CodeFileNotFound:
		kind = providers.ErrNotFound
	case body.Code == wire.CodeExecutionTimeout:
		kind = providers.ErrTimeout
	case strings.HasSuffix(body.Code, "_NOT_FOUND"):
		kind = providers.ErrNotFound
	}
	return &providers.Error{Kind: kind, Provider: Name, Op: r.Op, Msg: fmt.Sprintf("%s (HTTP %d)", msg, status)}
}

// drain reads what is left of a reply and closes it.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
	rc.Close()
}
