// Package modal is the Modal provider. It wraps Modal's official Go SDK
// (github.com/modal-labs/modal-client/go) rather than speaking the wire
// protocol itself: sandboxes are created in an app looked up or created by
// name, from an image named by a registry tag, and commands run through the
// SDK's exec (the task command router). Files are read and written with the
// SDK's filesystem API; what that API lacks (directory listings, rename,
// tar transfers) runs as shell commands through package execfs.
//
// Credentials and endpoints are what the SDK reads: MODAL_TOKEN_ID and
// MODAL_TOKEN_SECRET (taken from the configuration, .env files included,
// and handed to the SDK), else the active profile of ~/.modal.toml
// (MODAL_CONFIG_PATH, MODAL_PROFILE); MODAL_SERVER_URL and MODAL_ENVIRONMENT
// are read by the SDK from the process environment. A plaintext
// MODAL_SERVER_URL (http://) works only on a loopback address, because the
// SDK dials the command router without TLS only then; `sandbox serve --api
// modal` (see the emulator package) serves such an address.
//
// The SDK client is built on the first operation, not in New, so that
// building the provider (as every CLI start does) opens no connection.
// Our labels are Modal tags; the provider adds reserved tags (prefix
// "sandbox.") for what Modal's API does not return: creation time, image
// and network mode. A sandbox is named by its id or, for one another
// program created with a name, by that name in the app (see Get).
package modal

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/execfs"
	"github.com/agentbox/sandbox/providers/modal/modalconf"
)

// Name is the registry name of the provider.
const Name = modalconf.Name

// Environment variables the provider reads or documents.
const (
	EnvTokenID     = modalconf.EnvTokenID
	EnvTokenSecret = modalconf.EnvTokenSecret
	EnvServerURL   = modalconf.EnvServerURL
	EnvEnvironment = modalconf.EnvEnvironment
	EnvApp         = modalconf.EnvApp
	EnvImage       = modalconf.EnvImage
)

// credentialVars names the variables a missing or rejected token points at.
const credentialVars = EnvTokenID + " and " + EnvTokenSecret

// Defaults (see package modalconf).
const (
	DefaultApp      = modalconf.DefaultApp
	DefaultImage    = modalconf.DefaultImage
	DefaultLifetime = modalconf.DefaultLifetime
	DefaultWorkdir  = modalconf.DefaultWorkdir
)

// Registration describes the provider to the registry, emulator included.
func Registration() providers.Registration {
	r := modalconf.Registration()
	r.New = func(cfg providers.Config) (providers.Provider, error) {
		return New(cfg)
	}
	r.Emulator = newEmulator
	return r
}

// Options configure a Provider directly (tests); New reads them from the
// configuration.
type Options struct {
	// TokenID and TokenSecret override the profile's token when set.
	TokenID, TokenSecret string
	// Environment overrides the profile's environment when set.
	Environment string
	// App names the app of every sandbox; empty means DefaultApp.
	App string
	// Image is the registry tag used when a Spec names none; empty means
	// DefaultImage.
	Image string
}

// Provider is the Modal client. It is safe for concurrent use.
type Provider struct {
	opts Options
	fs   execfs.FS

	// mu guards the SDK client and the app, made on first use.
	mu     sync.Mutex
	client *modalsdk.Client
	app    *modalsdk.App
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Closer   = (*Provider)(nil)
)

// New builds a provider from the configuration. It does not connect: the
// SDK client is made by the first operation.
func New(cfg providers.Config) (*Provider, error) {
	return NewWithOptions(Options{
		TokenID:     strings.TrimSpace(cfg.Lookup(EnvTokenID)),
		TokenSecret: strings.TrimSpace(cfg.Lookup(EnvTokenSecret)),
		Environment: cfg.Lookup(EnvEnvironment),
		App:         cfg.Lookup(EnvApp),
		Image:       cfg.Lookup(EnvImage),
	})
}

// NewWithOptions builds a provider from explicit options.
func NewWithOptions(opts Options) (*Provider, error) {
	if opts.App == "" {
		opts.App = DefaultApp
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	p := &Provider{opts: opts}
	p.fs = execfs.FS{Provider: Name, Exec: p.shell, Put: p.put, Get: p.get}
	return p, nil
}

// Name returns "modal".
func (p *Provider) Name() string { return Name }

// Capabilities declares what Modal supports.
func (p *Provider) Capabilities() providers.Capabilities {
	return modalconf.Capabilities()
}

// Close closes the SDK client's connections.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		p.client.Close()
		p.client, p.app = nil, nil
	}
	return nil
}

// sdk returns the SDK client, making it on first use.
func (p *Provider) sdk() (*modalsdk.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		return p.client, nil
	}
	c, err := modalsdk.NewClientWithOptions(&modalsdk.ClientParams{
		TokenID:     p.opts.TokenID,
		TokenSecret: p.opts.TokenSecret,
		Environment: p.opts.Environment,
		// The SDK warns on stderr, e.g. about the plaintext router of
		// an emulator; errors come back as values.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, p.mapErr("connect", err)
	}
	p.client = c
	return c, nil
}

// appHandle returns the app, looking it up (and creating it when
// missing) on first use.
func (p *Provider) appHandle(ctx context.Context) (*modalsdk.Client, *modalsdk.App, error) {
	c, err := p.sdk()
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	app := p.app
	p.mu.Unlock()
	if app != nil {
		return c, app, nil
	}
	app, err = c.Apps.FromName(ctx, p.opts.App, &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		return nil, nil, p.mapErr("app "+p.opts.App, err)
	}
	p.mu.Lock()
	p.app = app
	p.mu.Unlock()
	return c, app, nil
}
