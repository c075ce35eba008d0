package runloop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// Create makes a devbox and returns once it is running.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	if spec.Network == providers.NetworkOff {
		return providers.Info{}, providers.Errorf(providers.ErrUnsupported, Name, "create", "Runloop devboxes have no switch for the network")
	}
	body := wire.CreateDevbox{EnvironmentVariables: spec.Env, Metadata: spec.Labels}
	if body.Metadata == nil {
		body.Metadata = map[string]string{}
	}
	switch img := spec.Image; {
	case strings.HasPrefix(img, "snp_"):
		body.SnapshotID = img
	case strings.HasPrefix(img, "bpt_"):
		body.BlueprintID = img
	case img != "":
		body.BlueprintName = img
	}
	var lp wire.LaunchParameters
	if spec.TTL > 0 {
		lp.KeepAliveTimeSeconds = int64((spec.TTL + time.Second - 1) / time.Second)
	}
	if spec.AutoStop > 0 {
		lp.AfterIdle = &wire.AfterIdle{IdleTimeSeconds: int64((spec.AutoStop + time.Second - 1) / time.Second), OnIdle: "suspend"}
	}
	if r := spec.Resources; r.CPUs > 0 || r.MemoryMB > 0 {
		lp.ResourceSizeRequest = "CUSTOM_SIZE"
		lp.CustomCPUCores = r.CPUs
		lp.CustomGBMemory = (r.MemoryMB + 1023) / 1024
	}
	if spec.User != "" && spec.User != "root" {
		lp.UserParameters = &wire.UserParameters{Username: spec.User}
	} else {
		// Like the other providers, commands run as root unless the
		// spec names a user (Runloop's own default is "user").
		root := 0
		lp.UserParameters = &wire.UserParameters{Username: "root", UID: &root}
	}
	body.LaunchParameters = &lp
	var dbx wire.Devbox
	if err := p.call(ctx, "create", http.MethodPost, p.url("create_and_await_running"), body, &dbx, false); err != nil {
		return providers.Info{}, err
	}
	if dbx.Status != wire.StatusRunning {
		var err error
		if dbx, err = p.awaitStatus(ctx, dbx.ID, "create", wire.StatusRunning); err != nil {
			return providers.Info{}, err
		}
	}
	if err := p.makeWorkdir(ctx, dbx.ID); err != nil {
		// A devbox that cannot run commands is of no use: shut it down.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = p.call(dctx, "create: shut down", http.MethodPost, p.url(dbx.ID, "shutdown"), nil, nil, true)
		cancel()
		return providers.Info{}, err
	}
	return info(dbx), nil
}

// makeWorkdir creates providers.DefaultWorkdir, where commands start, owned
// by the devbox's user (through sudo when that user is not root).
func (p *Provider) makeWorkdir(ctx context.Context, id string) error {
	const script = `d=` + providers.DefaultWorkdir + `; [ -d "$d" ] && [ -w "$d" ] && exit 0; ` +
		`mkdir -p "$d" 2>/dev/null || { sudo -n mkdir -p "$d" && sudo -n chown "$(id -u):$(id -g)" "$d"; }`
	var stderr strings.Builder
	res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: script, Cwd: "/", Stderr: &stderr})
	if err != nil {
		return fmt.Errorf("runloop: create: making %s: %w", providers.DefaultWorkdir, err)
	}
	if res.ExitCode != 0 {
		return errorf(providers.ErrUnavailable, "create", "making %s: %s", providers.DefaultWorkdir, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// awaitStatus long-polls until the devbox reaches want or a terminal
// status, asking again on every 408; any other final status is an error.
func (p *Provider) awaitStatus(ctx context.Context, id, op, want string) (wire.Devbox, error) {
	statuses := []string{want, wire.StatusFailure, wire.StatusShutdown}
	if want != wire.StatusSuspended {
		statuses = append(statuses, wire.StatusSuspended)
	}
	for {
		var dbx wire.Devbox
		err := p.call(ctx, op+": wait", http.MethodPost, p.url(id, "wait_for_status"), wire.WaitForStatus{Statuses: statuses}, &dbx, true)
		if errors.Is(err, providers.ErrTimeout) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return wire.Devbox{}, err
		}
		if dbx.Status != want {
			msg := "devbox " + id + " is " + dbx.Status
			if dbx.FailureReason != "" {
				msg += ": " + dbx.FailureReason
			}
			return dbx, providers.Errorf(providers.ErrUnavailable, Name, op, "%s, not %s", msg, want)
		}
		return dbx, nil
	}
}

// Get describes a devbox; one that is shut down or failed is not found.
func (p *Provider) Get(ctx context.Context, id string) (providers.Info, error) {
	dbx, err := p.get1(ctx, id)
	if err != nil {
		return providers.Info{}, err
	}
	return info(dbx), nil
}

// get1 fetches a live devbox.
func (p *Provider) get1(ctx context.Context, id string) (wire.Devbox, error) {
	var dbx wire.Devbox
	if err := p.call(ctx, "get "+id, http.MethodGet, p.url(id), nil, &dbx, true); err != nil {
		return wire.Devbox{}, err
	}
	if gone(dbx.Status) {
		return wire.Devbox{}, providers.Errorf(providers.ErrNotFound, Name, "get "+id, "devbox %s is %s", id, dbx.Status)
	}
	return dbx, nil
}

// gone reports the terminal statuses.
func gone(status string) bool { return status == wire.StatusShutdown || status == wire.StatusFailure }

// List pages through the devboxes (the API has no metadata filter) and
// returns the live ones whose metadata holds every label of the filter.
func (p *Provider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	var out []providers.Info
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(p.opts.PageSize)}, "include_total_count": {"false"}}
		if after != "" {
			q.Set("starting_after", after)
		}
		var page wire.DevboxList
		if err := p.call(ctx, "list", http.MethodGet, p.url()+"?"+q.Encode(), nil, &page, true); err != nil {
			return nil, err
		}
		for _, d := range page.Devboxes {
			if !gone(d.Status) && filter.Matches(d.Metadata) {
				out = append(out, info(d))
			}
		}
		if !page.HasMore || len(page.Devboxes) == 0 {
			return out, nil
		}
		after = page.Devboxes[len(page.Devboxes)-1].ID
	}
}

// Delete shuts a devbox down; one already shut down is not found.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if _, err := p.get1(ctx, id); err != nil {
		return err
	}
	return p.call(ctx, "delete "+id, http.MethodPost, p.url(id, "shutdown"), nil, nil, true)
}

// Suspend suspends a devbox (its disk stays, its processes end) and
// returns once it is suspended.
func (p *Provider) Suspend(ctx context.Context, id string) error {
	if err := p.call(ctx, "suspend "+id, http.MethodPost, p.url(id, "suspend"), nil, nil, true); err != nil {
		return err
	}
	_, err := p.awaitStatus(ctx, id, "suspend "+id, wire.StatusSuspended)
	return err
}

// Resume resumes a suspended devbox and returns once it is running.
func (p *Provider) Resume(ctx context.Context, id string) error {
	if err := p.call(ctx, "resume "+id, http.MethodPost, p.url(id, "resume"), nil, nil, true); err != nil {
		return err
	}
	_, err := p.awaitStatus(ctx, id, "resume "+id, wire.StatusRunning)
	return err
}

// info converts a DevboxView.
func info(d wire.Devbox) providers.Info {
	in := providers.Info{
		ID:        d.ID,
		Provider:  Name,
		State:     state(d.Status),
		Labels:    d.Metadata,
		CreatedAt: time.UnixMilli(d.CreateTimeMs).UTC(),
		Image:     cmp.Or(d.BlueprintID, d.SnapshotID),
	}
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	if k := d.LaunchParameters.KeepAliveTimeSeconds; k > 0 {
		in.ExpiresAt = in.CreatedAt.Add(time.Duration(k) * time.Second)
	}
	if a := d.LaunchParameters.AfterIdle; a != nil && a.IdleTimeSeconds > 0 {
		in.AutoStop = time.Duration(a.IdleTimeSeconds) * time.Second
	}
	if u := d.LaunchParameters.UserParameters; u != nil && u.Username != "root" {
		in.User = u.Username
	}
	return in
}

// state maps a devbox status onto the shared states.
func state(s string) providers.State {
	switch s {
	case wire.StatusRunning:
		return providers.StateRunning
	case wire.StatusSuspending, wire.StatusSuspended, wire.StatusResuming, wire.StatusShutdown, wire.StatusFailure:
		// A suspended devbox is a stopped machine (see machine.go).
		return providers.StateStopped
	default:
		return providers.StateUnknown
	}
}

// errorf builds an error of this provider.
func errorf(kind error, op, format string, args ...any) error {
	return &providers.Error{Kind: kind, Provider: Name, Op: op, Msg: fmt.Sprintf(format, args...)}
}
