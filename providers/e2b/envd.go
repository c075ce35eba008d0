package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// envdBase is the base URL of id's envd.
func (p *Provider) envdBase(id string, c envdConn) string {
	if p.opts.SandboxURL != "" {
		return p.opts.SandboxURL
	}
	domain := c.domain
	if domain == "" {
		domain = p.opts.Domain
	}
	return fmt.Sprintf("https://%d-%s.%s", wire.EnvdPort, id, domain)
}

// envdRequest prepares a request to id's envd with the routing headers,
// the access token and the user.
func (p *Provider) envdRequest(ctx context.Context, id, op, path string) (request, error) {
	c, err := p.conn(ctx, id)
	if err != nil {
		return request{}, err
	}
	h := http.Header{}
	h.Set(wire.HeaderSandboxID, id)
	h.Set(wire.HeaderSandboxPort, strconv.Itoa(wire.EnvdPort))
	if c.token != "" {
		h.Set(wire.HeaderAccessToken, c.token)
	}
	h.Set("Authorization", basicUser(p.opts.User))
	h.Set("User-Agent", "sandbox-e2b-go")
	return request{api: envdAPI, op: op, method: http.MethodPost, url: p.envdBase(id, c) + path, header: h}, nil
}

// basicUser is the Authorization header that names envd's user: Basic
// with an empty password.
func basicUser(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// doEnvd sends an envd request; when the edge cannot reach a sandbox
// that turns out to be paused, it resumes the sandbox and sends the
// request once more (it never reached envd the first time). Streamed
// bodies are not sent again.
func (p *Provider) doEnvd(ctx context.Context, id string, r request) (*http.Response, error) {
	resp, err := p.do(ctx, r)
	if err == nil || !errors.Is(err, errUnreachable) || r.stream != nil {
		return resp, err
	}
	d, derr := p.detail(ctx, id)
	if derr != nil || d.State != wire.StatePaused {
		return nil, err
	}
	if cerr := p.Connect(ctx, id, max(time.Until(d.EndAt), 5*time.Minute)); cerr != nil {
		return nil, fmt.Errorf("e2b: resume paused sandbox %s: %w", id, cerr)
	}
	return p.do(ctx, r)
}

// unary calls a unary Connect method with JSON.
func (p *Provider) unary(ctx context.Context, id, op, path string, in, out any, idempotent bool) error {
	r, err := p.envdRequest(ctx, id, op, path)
	if err != nil {
		return err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("e2b: %s: %w", op, err)
	}
	r.body, r.idempotent = b, idempotent
	r.header.Set("Content-Type", wire.ContentTypeUnary)
	r.header.Set("Connect-Protocol-Version", "1")
	resp, err := p.doEnvd(ctx, id, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: op, Msg: "reading the reply: " + err.Error(), Err: err}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: op, Msg: "decoding the reply: " + err.Error(), Err: err}
	}
	return nil
}

// stream opens a server-streaming Connect method: one request envelope,
// a reply of envelopes read with readStream. timeoutMs, when positive, is
// sent as Connect-Timeout-Ms; user, when set, replaces the configured one.
func (p *Provider) stream(ctx context.Context, id, op, path string, in any, timeoutMs int64, user string) (io.ReadCloser, error) {
	r, err := p.envdRequest(ctx, id, op, path)
	if err != nil {
		return nil, err
	}
	if user != "" {
		r.header.Set("Authorization", basicUser(user))
	}
	var buf bytes.Buffer
	if err := wire.WriteMessage(&buf, in); err != nil {
		return nil, fmt.Errorf("e2b: %s: %w", op, err)
	}
	r.body = buf.Bytes()
	r.header.Set("Content-Type", wire.ContentTypeStream)
	r.header.Set("Connect-Protocol-Version", "1")
	r.header.Set(wire.HeaderKeepalive, "30")
	if timeoutMs > 0 {
		r.header.Set(wire.HeaderConnectTimeout, strconv.FormatInt(timeoutMs, 10))
	}
	resp, err := p.doEnvd(ctx, id, r)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, wire.ContentTypeStream) {
		resp.Body.Close()
		return nil, providers.Errorf(providers.ErrUnavailable, Name, op, "unexpected reply of type %q to a stream", ct)
	}
	return resp.Body, nil
}

// nextMessage reads the next message of a stream into out. It returns
// done=true at the end-of-stream envelope (with its error, if any), and
// an error matching ErrUnavailable when the stream is cut.
func nextMessage(body io.Reader, op string, out any) (done bool, err error) {
	flags, payload, err := wire.ReadEnvelope(body)
	if err != nil {
		return false, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: op, Msg: "the stream was cut before it ended: " + err.Error(), Err: err}
	}
	if flags&wire.FlagCompressed != 0 {
		return false, providers.Errorf(providers.ErrUnavailable, Name, op, "compressed envelope that was never asked for")
	}
	if flags&wire.FlagEndStream != 0 {
		var end wire.EndStream
		if err := json.Unmarshal(payload, &end); err != nil {
			return true, providers.Errorf(providers.ErrUnavailable, Name, op, "bad end of stream: %v", err)
		}
		if end.Error != nil {
			return true, connectError(op, end.Error)
		}
		return true, nil
	}
	if err := json.Unmarshal(payload, out); err != nil {
		return false, providers.Errorf(providers.ErrUnavailable, Name, op, "bad stream message: %v", err)
	}
	return false, nil
}
