package e2b

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// envdConn is what reaching one sandbox's envd takes.
type envdConn struct {
	token  string
	domain string
}

// listPageSize is the largest page of GET /v2/sandboxes.
const listPageSize = 100

func (p *Provider) controlRequest(op, method, path string, body any, idempotent bool) (request, error) {
	r := request{api: controlAPI, op: op, method: method, url: p.opts.APIURL + path, idempotent: idempotent, header: http.Header{}}
	r.header.Set(wire.HeaderAPIKey, p.opts.APIKey)
	r.header.Set("Accept", "application/json")
	r.header.Set("User-Agent", "sandbox-e2b-go")
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return r, fmt.Errorf("e2b: %s: %w", op, err)
		}
		r.body = b
		r.header.Set("Content-Type", "application/json")
	}
	return r, nil
}

// Create makes a sandbox from the template (Spec.Image or the configured
// default) with the labels as metadata and the environment as envVars.
// Create is not repeated on server errors: a retry could leave a second
// sandbox behind.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	template := spec.Image
	if template == "" {
		template = p.opts.Template
	}
	ttl := spec.TTL
	if ttl <= 0 {
		ttl = DefaultLifetime
	}
	secure := true
	body := wire.NewSandbox{
		TemplateID: template,
		Timeout:    seconds(ttl),
		Metadata:   spec.Labels,
		EnvVars:    spec.Env,
		Secure:     &secure,
	}
	switch spec.Network {
	case providers.NetworkOn:
		on := true
		body.AllowInternetAccess = &on
	case providers.NetworkOff:
		off := false
		body.AllowInternetAccess = &off
	}
	r, err := p.controlRequest("create", http.MethodPost, "/sandboxes", body, false)
	if err != nil {
		return providers.Info{}, err
	}
	// This project's emulator makes the user everything runs as the
	// sandbox's default (it would otherwise be E2B's "user"); E2B
	// ignores the header.
	r.header.Set(wire.HeaderDefaultUser, cmp.Or(spec.User, p.opts.User))
	var sb wire.Sandbox
	if _, err := p.doJSON(ctx, r, &sb); err != nil {
		return providers.Info{}, err
	}
	if sb.SandboxID == "" {
		return providers.Info{}, providers.Errorf(providers.ErrUnavailable, Name, "create", "the reply names no sandbox")
	}
	p.remember(sb.SandboxID, envdConn{token: sb.EnvdAccessToken, domain: deref(sb.Domain)})
	// The contract's working directory exists in every sandbox.
	if err := p.Mkdir(ctx, sb.SandboxID, providers.DefaultWorkdir); err != nil {
		p.deleteQuietly(sb.SandboxID)
		return providers.Info{}, fmt.Errorf("e2b: create: prepare %s: %w", providers.DefaultWorkdir, err)
	}
	// The server's record carries the authoritative times.
	info, err := p.Get(ctx, sb.SandboxID)
	if err != nil {
		p.deleteQuietly(sb.SandboxID)
		return providers.Info{}, fmt.Errorf("e2b: create: describe the new sandbox: %w", err)
	}
	if info.Network == providers.NetworkDefault {
		info.Network = spec.Network
	}
	return info, nil
}

// deleteQuietly removes a sandbox this call created and could not finish.
func (p *Provider) deleteQuietly(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.Delete(ctx, id)
}

// Get describes a sandbox.
func (p *Provider) Get(ctx context.Context, id string) (providers.Info, error) {
	d, err := p.detail(ctx, id)
	if err != nil {
		return providers.Info{}, err
	}
	return infoOf(d), nil
}

func (p *Provider) detail(ctx context.Context, id string) (wire.SandboxDetail, error) {
	if err := checkID(id); err != nil {
		return wire.SandboxDetail{}, err
	}
	r, err := p.controlRequest("get "+id, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, true)
	if err != nil {
		return wire.SandboxDetail{}, err
	}
	var d wire.SandboxDetail
	if _, err := p.doJSON(ctx, r, &d); err != nil {
		return wire.SandboxDetail{}, err
	}
	p.remember(id, envdConn{token: d.EnvdAccessToken, domain: deref(d.Domain)})
	return d, nil
}

// List pages through GET /v2/sandboxes with the labels as a metadata
// filter; the server does the filtering and this client checks it again.
func (p *Provider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(p.opts.PageSize))
	if len(filter.Labels) > 0 {
		q.Set("metadata", EncodeMetadataQuery(filter.Labels))
	}
	out := []providers.Info{}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page > 10000 {
			return nil, providers.Errorf(providers.ErrUnavailable, Name, "list", "the server keeps returning pages")
		}
		r, err := p.controlRequest("list", http.MethodGet, "/v2/sandboxes?"+q.Encode(), nil, true)
		if err != nil {
			return nil, err
		}
		var items []wire.SandboxDetail
		resp, err := p.doJSON(ctx, r, &items)
		if err != nil {
			return nil, err
		}
		for _, d := range items {
			if seen[d.SandboxID] || !filter.Matches(d.Metadata) {
				continue
			}
			seen[d.SandboxID] = true
			out = append(out, infoOf(d))
		}
		next := resp.Header.Get(wire.HeaderNextToken)
		if next == "" || len(items) == 0 {
			break
		}
		q.Set("nextToken", next)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// EncodeMetadataQuery encodes labels as the metadata query value of
// GET /v2/sandboxes: "k1=v1&k2=v2" with each key and value escaped.
func EncodeMetadataQuery(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(labels[k]))
	}
	return strings.Join(parts, "&")
}

// Delete kills a sandbox. A kill that is retried after the first one went
// through finds the sandbox gone; that counts as success.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	r, err := p.controlRequest("delete "+id, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, true)
	if err != nil {
		return err
	}
	r.goneOK = true
	_, err = p.doJSON(ctx, r, nil)
	p.forget(id)
	return err
}

// SetTimeout makes the sandbox end d from now (it may shorten it).
func (p *Provider) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	if err := checkID(id); err != nil {
		return err
	}
	r, err := p.controlRequest("set timeout of "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/timeout", wire.TimeoutRequest{Timeout: seconds(d)}, true)
	if err != nil {
		return err
	}
	_, err = p.doJSON(ctx, r, nil)
	return err
}

// Pause pauses a running sandbox (E2B keeps its memory and files); the
// next operation on it, or Connect, resumes it.
func (p *Provider) Pause(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	r, err := p.controlRequest("pause "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause", struct{}{}, false)
	if err != nil {
		return err
	}
	_, err = p.doJSON(ctx, r, nil)
	return err
}

// Connect resumes a paused sandbox (or finds a running one), extending its
// lifetime to at least d from now, and remembers how to reach it.
func (p *Provider) Connect(ctx context.Context, id string, d time.Duration) error {
	if err := checkID(id); err != nil {
		return err
	}
	r, err := p.controlRequest("connect "+id, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/connect", wire.TimeoutRequest{Timeout: seconds(d)}, true)
	if err != nil {
		return err
	}
	var sb wire.Sandbox
	if _, err := p.doJSON(ctx, r, &sb); err != nil {
		return err
	}
	p.remember(id, envdConn{token: sb.EnvdAccessToken, domain: deref(sb.Domain)})
	return nil
}

// conn returns how to reach id's envd: learnt at create, else from GET,
// resuming a paused sandbox first.
func (p *Provider) conn(ctx context.Context, id string) (envdConn, error) {
	if err := checkID(id); err != nil {
		return envdConn{}, err
	}
	p.mu.Lock()
	c, ok := p.conns[id]
	p.mu.Unlock()
	if ok {
		return c, nil
	}
	d, err := p.detail(ctx, id)
	if err != nil {
		return envdConn{}, err
	}
	if d.State == wire.StatePaused {
		left := time.Until(d.EndAt)
		if left < 5*time.Minute {
			left = 5 * time.Minute
		}
		if err := p.Connect(ctx, id, left); err != nil {
			return envdConn{}, err
		}
	}
	p.mu.Lock()
	c = p.conns[id]
	p.mu.Unlock()
	return c, nil
}

func (p *Provider) remember(id string, c envdConn) {
	p.mu.Lock()
	p.conns[id] = c
	p.mu.Unlock()
}

func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.conns, id)
	p.mu.Unlock()
}

func infoOf(d wire.SandboxDetail) providers.Info {
	state := providers.StateUnknown
	switch d.State {
	case wire.StateRunning:
		state = providers.StateRunning
	case wire.StatePaused:
		state = providers.StatePaused
	}
	labels := d.Metadata
	if labels == nil {
		labels = map[string]string{}
	}
	info := providers.Info{
		ID:        d.SandboxID,
		Provider:  Name,
		State:     state,
		Labels:    labels,
		CreatedAt: d.StartedAt,
		ExpiresAt: d.EndAt,
		Image:     d.TemplateID,
	}
	if d.Alias != "" {
		info.Image = d.Alias
	}
	if d.AllowInternetAccess != nil {
		info.Network = providers.NetworkOff
		if *d.AllowInternetAccess {
			info.Network = providers.NetworkOn
		}
	}
	return info
}

// checkID refuses ids that cannot be E2B sandbox ids before they become
// part of a URL or a host name.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("e2b: empty sandbox id: %w", providers.ErrInvalid)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return &providers.Error{Kind: providers.ErrNotFound, Provider: Name, Op: "sandbox " + id, Msg: "not an E2B sandbox id (lower-case letters and digits)"}
		}
	}
	return nil
}

func seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
