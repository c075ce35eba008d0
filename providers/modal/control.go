package modal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentbox/sandbox/providers"
)

// Reserved tags: what Modal's API does not return about a sandbox. Labels
// with this prefix are refused at create.
const (
	tagPrefix  = "sandbox."
	tagCreated = tagPrefix + "created"
	tagImage   = tagPrefix + "image"
	tagNetwork = tagPrefix + "network"
	tagExpires = tagPrefix + "expires"
)

// Create makes a sandbox in the app from the Spec's image (a registry tag)
// and returns once it runs commands.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	for k := range spec.Labels {
		if strings.HasPrefix(k, tagPrefix) {
			return providers.Info{}, providers.Errorf(providers.ErrInvalid, Name, "create", "label %q uses the reserved prefix %q", k, tagPrefix)
		}
	}
	if spec.User != "" && spec.User != "root" {
		return providers.Info{}, providers.Errorf(providers.ErrUnsupported, Name, "create", "a default user other than root is not supported")
	}
	c, app, err := p.appHandle(ctx)
	if err != nil {
		return providers.Info{}, err
	}
	image := spec.Image
	if image == "" {
		image = p.opts.Image
	}
	ttl := spec.TTL
	if ttl <= 0 {
		ttl = DefaultLifetime
	}
	// Modal takes whole seconds.
	ttl = ttl.Round(time.Second)
	if ttl < time.Second {
		ttl = time.Second
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	tags := maps.Clone(spec.Labels)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[tagCreated] = now.Format(time.RFC3339Nano)
	tags[tagImage] = image
	tags[tagNetwork] = string(spec.Network)
	if spec.TTL > 0 {
		tags[tagExpires] = now.Add(spec.TTL).Format(time.RFC3339Nano)
	}
	params := &modalsdk.SandboxCreateParams{
		CPU:          spec.Resources.CPUs,
		MemoryMiB:    spec.Resources.MemoryMB,
		Timeout:      ttl,
		Env:          spec.Env,
		Tags:         tags,
		BlockNetwork: spec.Network == providers.NetworkOff,
	}
	if spec.AutoStop > 0 {
		params.IdleTimeout = spec.AutoStop.Round(time.Second)
	}
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry(image, nil), params)
	if err != nil {
		return providers.Info{}, p.mapErr("create", err)
	}
	info := infoFrom(sb.SandboxID, tags)
	// The contract's working directory; images do not have it.
	code, err := p.shell(ctx, sb.SandboxID, "mkdir -p "+DefaultWorkdir, nil, nil)
	if err == nil && code != 0 {
		err = providers.Errorf(providers.ErrUnavailable, Name, "create", "mkdir %s exited %d", DefaultWorkdir, code)
	}
	if err != nil {
		// Do not leave a sandbox nobody knows about.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = sb.Terminate(cleanup, nil)
		return providers.Info{}, err
	}
	return info, nil
}

// infoFrom builds an Info from a sandbox's tags, reserved ones included.
func infoFrom(id string, tags map[string]string) providers.Info {
	info := providers.Info{ID: id, Provider: Name, State: providers.StateRunning, Labels: map[string]string{}}
	for k, v := range tags {
		switch k {
		case tagCreated:
			info.CreatedAt, _ = time.Parse(time.RFC3339Nano, v)
		case tagExpires:
			info.ExpiresAt, _ = time.Parse(time.RFC3339Nano, v)
		case tagImage:
			info.Image = v
		case tagNetwork:
			info.Network = providers.Network(v)
		default:
			if !strings.HasPrefix(k, tagPrefix) {
				info.Labels[k] = v
			}
		}
	}
	return info
}

// isSandboxID reports whether ref has the shape of a Modal sandbox id
// ("sb-" and letters and digits); anything else is taken for a name.
func isSandboxID(ref string) bool {
	rest, ok := strings.CutPrefix(ref, "sb-")
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// handle returns an SDK handle of a sandbox named by its id (no call is
// made) or by its name in the app (looked up; names are what Modal's
// SDKs give at create, e.g. Sandbox.create(name=...) in Python).
func (p *Provider) handle(ctx context.Context, id string) (*modalsdk.Sandbox, error) {
	c, err := p.sdk()
	if err != nil {
		return nil, err
	}
	if !isSandboxID(id) {
		sb, err := c.Sandboxes.FromName(ctx, p.opts.App, id, nil)
		if err != nil {
			return nil, p.mapErr("sandbox "+id, err)
		}
		return sb, nil
	}
	sb, err := c.Sandboxes.FromID(ctx, id, nil)
	if err != nil {
		return nil, p.mapErr("sandbox "+id, err)
	}
	return sb, nil
}

// live returns a handle of a sandbox that exists and has not ended; an
// ended one is ErrNotFound, as Delete leaves it.
func (p *Provider) live(ctx context.Context, id string) (*modalsdk.Sandbox, error) {
	sb, err := p.handle(ctx, id)
	if err != nil {
		return nil, err
	}
	code, err := sb.Poll(ctx, nil)
	if err != nil {
		return nil, p.mapErr("sandbox "+id, err)
	}
	if code != nil {
		return nil, providers.Errorf(providers.ErrNotFound, Name, "sandbox "+id, "sandbox has ended (exit %d)", *code)
	}
	return sb, nil
}

// Get describes a running sandbox, named by its id or its name in the
// app; the Info carries the id.
func (p *Provider) Get(ctx context.Context, id string) (providers.Info, error) {
	sb, err := p.live(ctx, id)
	if err != nil {
		return providers.Info{}, err
	}
	tags, err := sb.GetTags(ctx, nil)
	if err != nil {
		return providers.Info{}, p.mapErr("get "+id, err)
	}
	return infoFrom(sb.SandboxID, tags), nil
}

// List returns the app's running sandboxes carrying every label of the
// filter (Modal filters by tags).
func (p *Provider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	c, app, err := p.appHandle(ctx)
	if err != nil {
		return nil, err
	}
	seq, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{AppID: app.AppID, Tags: filter.Labels})
	if err != nil {
		return nil, p.mapErr("list", err)
	}
	var out []providers.Info
	for sb, err := range seq {
		if err != nil {
			return nil, p.mapErr("list", err)
		}
		tags, err := sb.GetTags(ctx, nil)
		if errors.Is(p.mapErr("", err), providers.ErrNotFound) {
			continue // ended between the two calls
		}
		if err != nil {
			return nil, p.mapErr("list", err)
		}
		info := infoFrom(sb.SandboxID, tags)
		if filter.Matches(info.Labels) {
			out = append(out, info)
		}
	}
	return out, nil
}

// Delete terminates a running sandbox.
func (p *Provider) Delete(ctx context.Context, id string) error {
	sb, err := p.live(ctx, id)
	if err != nil {
		return err
	}
	if _, err := sb.Terminate(ctx, &modalsdk.SandboxTerminateParams{Wait: true}); err != nil {
		return p.mapErr("delete "+id, err)
	}
	return nil
}

// mapErr classifies an SDK or gRPC error with the shared kinds, keeping
// its message. A rejected token is a *providers.CredentialError naming
// the variables.
func (p *Provider) mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var perr *providers.Error
	if errors.As(err, &perr) || errors.Is(err, providers.ErrAuth) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w", Name, op, err)
	}
	// The SDK's error for no token anywhere has no type of its own.
	if strings.HasPrefix(err.Error(), "missing credentials") {
		return &providers.CredentialError{Provider: Name, Var: credentialVars}
	}
	kind := providers.ErrUnavailable
	var (
		notFound   modalsdk.NotFoundError
		fsNotFound modalsdk.SandboxFilesystemNotFoundError
		invalid    modalsdk.InvalidError
		exists     modalsdk.AlreadyExistsError
		exhausted  modalsdk.ResourceExhaustedError
		execTO     modalsdk.ExecTimeoutError
		sbTO       modalsdk.SandboxTimeoutError
		isDir      modalsdk.SandboxFilesystemIsADirectoryError
		notDir     modalsdk.SandboxFilesystemNotADirectoryError
		pathExists modalsdk.SandboxFilesystemPathAlreadyExistsError
		perm       modalsdk.SandboxFilesystemPermissionError
	)
	switch {
	case errors.As(err, &notFound), errors.As(err, &fsNotFound):
		kind = providers.ErrNotFound
	case errors.As(err, &invalid), errors.As(err, &isDir), errors.As(err, &notDir):
		kind = providers.ErrInvalid
	case errors.As(err, &exists), errors.As(err, &pathExists):
		kind = providers.ErrExists
	case errors.As(err, &exhausted):
		kind = providers.ErrQuota
	case errors.As(err, &execTO), errors.As(err, &sbTO):
		kind = providers.ErrTimeout
	case errors.As(err, &perm):
		kind = providers.ErrDenied
	default:
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.Unauthenticated:
				return &providers.CredentialError{Provider: Name, Var: credentialVars,
					Rejected: p.opts.TokenID != "" || p.opts.TokenSecret != "", Msg: st.Message()}
			case codes.PermissionDenied:
				kind = providers.ErrDenied
			case codes.NotFound:
				kind = providers.ErrNotFound
			case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
				kind = providers.ErrInvalid
			case codes.AlreadyExists:
				kind = providers.ErrExists
			case codes.ResourceExhausted:
				kind = providers.ErrQuota
			case codes.DeadlineExceeded:
				kind = providers.ErrTimeout
			case codes.Unimplemented:
				kind = providers.ErrUnsupported
			}
			return &providers.Error{Kind: kind, Provider: Name, Op: op, Msg: st.Message(), Err: err}
		}
	}
	return &providers.Error{Kind: kind, Provider: Name, Op: op, Msg: err.Error(), Err: err}
}
