package runloop

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// transport is the shared client that sends p's requests.
func (p *Provider) transport() *httpapi.Client {
	return &httpapi.Client{HTTP: p.client, Retry: p.opts.Retry, Provider: Name, StatusError: p.statusError}
}

// url joins the base URL and an API path built from escaped parts.
func (p *Provider) url(parts ...string) string {
	s := p.opts.BaseURL + "/v1/devboxes"
	for _, part := range parts {
		s += "/" + url.PathEscape(part)
	}
	return s
}

// headers are the headers of every request; a non-GET request carries an
// idempotency key, the same on every try of one call.
func (p *Provider) headers(method string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+p.opts.APIKey)
	h.Set("User-Agent", "sandbox-runloop-go")
	h.Set("Accept", "application/json")
	if method != http.MethodGet {
		h.Set(wire.HeaderRequestID, "sandbox-go-"+newUUIDv7())
	}
	return h
}

// call sends a JSON request and decodes the reply into out (when not nil).
func (p *Provider) call(ctx context.Context, op, method, u string, in, out any, idempotent bool) error {
	r := &httpapi.Request{Op: op, Method: method, URL: u, Header: p.headers(method), Idempotent: idempotent}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("runloop: %s: %w", op, err)
		}
		r.Body = b
		r.Header.Set("Content-Type", "application/json")
	}
	_, err := p.transport().DoJSON(ctx, r, out)
	return err
}

// statusError maps an error reply to a shared kind keeping the server's
// message; a 401 is a rejected RUNLOOP_API_KEY.
func (p *Provider) statusError(r *httpapi.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusUnauthorized {
		msg, _ := httpapi.ReadErrorBody(resp)
		return &providers.CredentialError{Provider: Name, Var: EnvAPIKey, Rejected: true, Msg: msg}
	}
	return p.transport().DefaultStatusError(r, resp)
}

// newUUIDv7 returns a UUID of version 7: a millisecond timestamp then
// random bits, the form Runloop wants for command ids.
func newUUIDv7() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ts[2:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
