// Package e2b is the E2B provider: a thin HTTP client of E2B's control
// plane (REST) and of envd, the daemon inside every sandbox (Connect RPC
// with JSON, plus /files for streamed uploads and downloads).
//
// Configuration comes from E2B_API_KEY (required), E2B_DOMAIN, E2B_API_URL
// and E2B_SANDBOX_URL, the variables the official SDKs read, so the same
// settings point this client and the SDKs at E2B or at an emulator
// (`sandbox serve --api e2b`, see the emulator package).
//
// Calls that are safe to repeat (reads, kill, set timeout, mkdir, remove)
// are retried on 429 and 5xx with exponential backoff, honouring
// Retry-After, a bounded number of times. Calls with side effects (create,
// process start, move, upload) are retried only when the server refused
// them outright with 429 or the connection was never made, so a command is
// never run twice by a retry.
package e2b

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/e2bconf"
	"github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/httpapi"
)

// The provider's name, variables and defaults (see package e2bconf).
const (
	Name            = e2bconf.Name
	EnvAPIKey       = e2bconf.EnvAPIKey
	EnvDomain       = e2bconf.EnvDomain
	EnvAPIURL       = e2bconf.EnvAPIURL
	EnvSandboxURL   = e2bconf.EnvSandboxURL
	EnvTemplate     = e2bconf.EnvTemplate
	EnvUser         = e2bconf.EnvUser
	DefaultDomain   = e2bconf.DefaultDomain
	DefaultTemplate = e2bconf.DefaultTemplate
	DefaultUser     = e2bconf.DefaultUser
	DefaultLifetime = e2bconf.DefaultLifetime
)

// Registration describes the provider to the registry, emulator included.
func Registration() providers.Registration {
	r := e2bconf.Registration()
	r.New = func(cfg providers.Config) (providers.Provider, error) {
		return New(cfg)
	}
	r.Emulator = emulator.NewEmulator
	return r
}

// Options configure a Provider directly (tests, benchmarks); New reads
// them from the environment.
type Options struct {
	APIKey string
	// Domain builds the default URLs; empty means DefaultDomain.
	Domain string
	// APIURL is the control plane's base URL; empty means
	// https://api.<Domain>.
	APIURL string
	// SandboxURL, when set, receives every envd request, routed by the
	// E2b-Sandbox-Id and E2b-Sandbox-Port headers; otherwise envd is
	// reached at https://49983-<id>.<domain>.
	SandboxURL string
	// Template is used when a Spec names no image.
	Template string
	// User is the Linux user of commands and file operations.
	User string
	// HTTPClient makes the requests; nil means a client with sane
	// connection timeouts and no overall timeout (streams are long).
	HTTPClient *http.Client
	// Retry bounds retries; zero values take the defaults.
	Retry RetryPolicy
	// PageSize is the page size of List (1..100, default 100).
	PageSize int
}

// RetryPolicy bounds the retries of one call (see httpapi.RetryPolicy).
type RetryPolicy = httpapi.RetryPolicy

// Provider is the E2B client. It is safe for concurrent use.
type Provider struct {
	opts   Options
	client *http.Client

	// mu guards conns, what envd needs per sandbox (token, domain),
	// learnt at create or on first use.
	mu    sync.Mutex
	conns map[string]envdConn
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Closer   = (*Provider)(nil)
)

// New builds a provider from the configuration. A missing E2B_API_KEY
// returns a *providers.CredentialError.
func New(cfg providers.Config) (*Provider, error) {
	opts := Options{
		APIKey:     strings.TrimSpace(cfg.Lookup(EnvAPIKey)),
		Domain:     cfg.Lookup(EnvDomain),
		APIURL:     cfg.Lookup(EnvAPIURL),
		SandboxURL: cfg.Lookup(EnvSandboxURL),
		Template:   cfg.Lookup(EnvTemplate),
		User:       cfg.Lookup(EnvUser),
	}
	if opts.APIKey == "" {
		return nil, &providers.CredentialError{Provider: Name, Var: EnvAPIKey}
	}
	return NewWithOptions(opts)
}

// NewWithOptions builds a provider from explicit options.
func NewWithOptions(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, &providers.CredentialError{Provider: Name, Var: EnvAPIKey}
	}
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	if opts.APIURL == "" {
		opts.APIURL = "https://api." + opts.Domain
	}
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	opts.SandboxURL = strings.TrimRight(opts.SandboxURL, "/")
	if opts.Template == "" {
		opts.Template = DefaultTemplate
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	opts.Retry = opts.Retry.WithDefaults()
	if opts.PageSize <= 0 || opts.PageSize > listPageSize {
		opts.PageSize = listPageSize
	}
	for _, u := range []string{opts.APIURL, opts.SandboxURL} {
		if u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("e2b: URL %q must start with http:// or https://: %w", u, providers.ErrInvalid)
		}
	}
	c := opts.HTTPClient
	if c == nil {
		c = httpapi.NewHTTPClient()
	}
	return &Provider{opts: opts, client: c, conns: map[string]envdConn{}}, nil
}

// Name returns "e2b".
func (p *Provider) Name() string { return Name }

// Capabilities declares what E2B supports.
func (p *Provider) Capabilities() providers.Capabilities { return e2bconf.Capabilities() }

// Close drops idle connections.
func (p *Provider) Close() error {
	p.client.CloseIdleConnections()
	return nil
}
