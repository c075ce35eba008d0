package daytona

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
	"github.com/agentbox/sandbox/providers/daytona/wire"
)

// sandboxURL is the control plane's URL of one sandbox (plus suffix).
func (p *Provider) sandboxURL(id, suffix string) string {
	return p.opts.APIURL + "/sandbox/" + url.PathEscape(id) + suffix
}

// Create makes a sandbox from the snapshot (Spec.Image or the configured
// default) with the labels, the environment and the auto-stop interval,
// waits until it has started and prepares the working directory. Create
// is not repeated on server errors: a retry could leave a second sandbox
// behind.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	body := wire.CreateSandbox{
		Snapshot: cmp.Or(spec.Image, p.opts.Snapshot),
		User:     spec.User,
		Env:      spec.Env,
		Labels:   spec.Labels,
		Target:   p.opts.Target,
	}
	switch {
	case spec.AutoStop < 0:
		never := 0
		body.AutoStopInterval = &never
	case spec.AutoStop > 0:
		m := minutes(spec.AutoStop)
		body.AutoStopInterval = &m
	}
	switch spec.Network {
	case providers.NetworkOn:
		off := false
		body.NetworkBlockAll = &off
	case providers.NetworkOff:
		on := true
		body.NetworkBlockAll = &on
	}
	var sb wire.Sandbox
	if err := p.call(ctx, "create", http.MethodPost, p.opts.APIURL+"/sandbox", body, &sb, false); err != nil {
		return providers.Info{}, err
	}
	if sb.ID == "" {
		return providers.Info{}, providers.Errorf(providers.ErrUnavailable, Name, "create", "the reply names no sandbox")
	}
	p.remember(sb)
	fail := func(what string, err error) (providers.Info, error) {
		p.deleteQuietly(ctx, sb.ID)
		return providers.Info{}, fmt.Errorf("daytona: create: %s: %w", what, err)
	}
	if sb.State != wire.StateStarted {
		var err error
		if sb, err = p.waitState(ctx, sb.ID, wire.StateStarted); err != nil {
			return fail("wait until started", err)
		}
	}
	// The contract's working directory exists in every sandbox.
	if err := p.Mkdir(ctx, sb.ID, providers.DefaultWorkdir); err != nil {
		return fail("prepare "+providers.DefaultWorkdir, err)
	}
	info := infoOf(sb)
	if info.Network == providers.NetworkDefault {
		info.Network = spec.Network
	}
	return info, nil
}

// waitState polls the sandbox every so often until it is in state want,
// failing on error states or when ctx ends. Daytona's control plane
// usually answers a create, start or stop in the final state already.
func (p *Provider) waitState(ctx context.Context, id, want string) (wire.Sandbox, error) {
	delay := 100 * time.Millisecond
	for {
		sb, err := p.detail(ctx, id)
		if err != nil {
			return sb, err
		}
		switch sb.State {
		case want:
			return sb, nil
		case wire.StateError, "build_failed":
			return sb, providers.Errorf(providers.ErrUnavailable, Name, "sandbox "+id, "state %s: %s", sb.State, sb.ErrorReason)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return sb, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// deleteQuietly removes a sandbox this call created and could not finish,
// even when ctx has ended.
func (p *Provider) deleteQuietly(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = p.Delete(ctx, id)
}

// Get describes a sandbox.
func (p *Provider) Get(ctx context.Context, id string) (providers.Info, error) {
	sb, err := p.detail(ctx, id)
	if err != nil {
		return providers.Info{}, err
	}
	return infoOf(sb), nil
}

func (p *Provider) detail(ctx context.Context, id string) (wire.Sandbox, error) {
	if err := checkID(id); err != nil {
		return wire.Sandbox{}, err
	}
	var sb wire.Sandbox
	if err := p.call(ctx, "get "+id, http.MethodGet, p.sandboxURL(id, ""), nil, &sb, true); err != nil {
		return wire.Sandbox{}, err
	}
	if sb.State == wire.StateDestroyed {
		return wire.Sandbox{}, providers.Errorf(providers.ErrNotFound, Name, "get "+id, "the sandbox was destroyed")
	}
	p.remember(sb)
	return sb, nil
}

// List pages through GET /sandbox with the labels as the server's filter
// (a JSON object); this client checks the filter again.
func (p *Provider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(p.opts.PageSize))
	if len(filter.Labels) > 0 {
		b, err := json.Marshal(filter.Labels)
		if err != nil {
			return nil, fmt.Errorf("daytona: list: %w", err)
		}
		q.Set("labels", string(b))
	}
	out := []providers.Info{}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page > 10000 {
			return nil, providers.Errorf(providers.ErrUnavailable, Name, "list", "the server keeps returning pages")
		}
		var list wire.SandboxList
		if err := p.call(ctx, "list", http.MethodGet, p.opts.APIURL+"/sandbox?"+q.Encode(), nil, &list, true); err != nil {
			return nil, err
		}
		for _, sb := range list.Items {
			if seen[sb.ID] || sb.State == wire.StateDestroyed || !filter.Matches(sb.Labels) {
				continue
			}
			seen[sb.ID] = true
			p.remember(sb)
			out = append(out, infoOf(sb))
		}
		if list.NextCursor == nil || *list.NextCursor == "" || len(list.Items) == 0 {
			break
		}
		q.Set("cursor", *list.NextCursor)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Delete destroys a sandbox. A delete that is retried after the first one
// went through finds the sandbox gone; that counts as success.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	r, err := p.newRequest("delete "+id, http.MethodDelete, p.sandboxURL(id, ""), nil, true)
	if err != nil {
		return err
	}
	r.GoneOK = true
	_, err = p.transport().DoJSON(ctx, r, nil)
	p.forget(id)
	return err
}

// Start starts a stopped sandbox and waits until it has started.
func (p *Provider) Start(ctx context.Context, id string) error {
	return p.transition(ctx, id, "start", "/start", wire.StateStarted)
}

// Stop stops a sandbox (its files stay, its processes end) and waits
// until it has stopped.
func (p *Provider) Stop(ctx context.Context, id string) error {
	return p.transition(ctx, id, "stop", "/stop", wire.StateStopped)
}

func (p *Provider) transition(ctx context.Context, id, op, suffix, want string) error {
	if err := checkID(id); err != nil {
		return err
	}
	var sb wire.Sandbox
	if err := p.call(ctx, op+" "+id, http.MethodPost, p.sandboxURL(id, suffix), nil, &sb, true); err != nil {
		return err
	}
	if sb.State != want {
		var err error
		if sb, err = p.waitState(ctx, id, want); err != nil {
			return err
		}
	}
	p.remember(sb)
	return nil
}

// known is what the client remembers of a sandbox to reach its toolbox:
// its proxy URL, its user, and whether it was last seen stopped.
type known struct {
	proxy   string
	user    string
	stopped bool
}

// remember keeps a sandbox's toolbox proxy URL, user and state.
func (p *Provider) remember(sb wire.Sandbox) {
	if sb.ToolboxProxyURL == "" {
		return
	}
	stopped := sb.State == wire.StateStopped || sb.State == wire.StateArchived
	p.mu.Lock()
	p.known[sb.ID] = known{proxy: sb.ToolboxProxyURL, user: sb.User, stopped: stopped}
	p.mu.Unlock()
}

func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.known, id)
	p.mu.Unlock()
}

// toolbox returns what reaching id's toolbox takes, asking the control
// plane the first time. A sandbox last seen stopped is started first: any
// operation starts a stopped machine.
func (p *Provider) toolbox(ctx context.Context, id string) (known, error) {
	if err := checkID(id); err != nil {
		return known{}, err
	}
	p.mu.Lock()
	k, ok := p.known[id]
	p.mu.Unlock()
	if ok && k.stopped {
		if err := p.Start(ctx, id); err != nil {
			return known{}, fmt.Errorf("daytona: start stopped sandbox %s: %w", id, err)
		}
		p.mu.Lock()
		k, ok = p.known[id]
		p.mu.Unlock()
	}
	if ok {
		return k, nil
	}
	sb, err := p.detail(ctx, id)
	if err != nil {
		return known{}, err
	}
	if sb.State == wire.StateStopped || sb.State == wire.StateArchived {
		if err := p.Start(ctx, id); err != nil {
			return known{}, fmt.Errorf("daytona: start stopped sandbox %s: %w", id, err)
		}
	}
	k = known{proxy: sb.ToolboxProxyURL, user: sb.User}
	if k.proxy == "" {
		var u wire.ToolboxProxyURL
		if err := p.call(ctx, "toolbox URL of "+id, http.MethodGet, p.sandboxURL(id, "/toolbox-proxy-url"), nil, &u, true); err != nil {
			return known{}, err
		}
		k.proxy = u.URL
		p.remember(wire.Sandbox{ID: id, ToolboxProxyURL: k.proxy, User: k.user})
	}
	if k.proxy == "" {
		return known{}, providers.Errorf(providers.ErrUnavailable, Name, "sandbox "+id, "the control plane gives no toolbox URL")
	}
	return k, nil
}

// toolboxBase returns the base URL of id's toolbox: its proxy URL, learnt
// from the control plane, followed by the id.
func (p *Provider) toolboxBase(ctx context.Context, id string) (string, error) {
	k, err := p.toolbox(ctx, id)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(k.proxy, "/") + "/" + url.PathEscape(id), nil
}

// infoOf converts the control plane's description.
func infoOf(sb wire.Sandbox) providers.Info {
	state := providers.StateUnknown
	switch sb.State {
	case wire.StateStarted:
		state = providers.StateRunning
	case wire.StateStopped, wire.StateArchived:
		state = providers.StateStopped
	case wire.StatePaused:
		state = providers.StatePaused
	}
	labels := sb.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	info := providers.Info{
		ID:        sb.ID,
		Provider:  Name,
		State:     state,
		Labels:    labels,
		CreatedAt: sb.CreatedAt,
		Image:     sb.Snapshot,
		User:      sb.User,
		Network:   providers.NetworkOn,
	}
	if sb.NetworkBlockAll {
		info.Network = providers.NetworkOff
	}
	if sb.AutoStopInterval > 0 {
		info.AutoStop = time.Duration(sb.AutoStopInterval) * time.Minute
	}
	return info
}

// checkID refuses ids that cannot be Daytona sandbox ids or names before
// they become part of a URL.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("daytona: empty sandbox id: %w", providers.ErrInvalid)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') || len(id) > 128 {
			return &providers.Error{Kind: providers.ErrNotFound, Provider: Name, Op: "sandbox " + id, Msg: "not a Daytona sandbox id or name"}
		}
	}
	return nil
}
