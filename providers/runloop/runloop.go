// Package runloop is the Runloop provider: a thin HTTP client of Runloop's
// REST API (https://api.runloop.ai/v1), whose sandboxes are devboxes.
//
// Configuration comes from RUNLOOP_API_KEY (required) and RUNLOOP_BASE_URL,
// the variables the official SDKs read, so the same settings point this
// client and the SDKs at Runloop or at the emulator (`sandbox serve --api
// runloop`, see the emulator package).
//
// Devboxes are created with create_and_await_running and, when they are not
// running yet, waited for with Runloop's server-held long poll
// (wait_for_status, asked again on each 408). Labels are devbox metadata;
// the API lists devboxes without a metadata filter, so List pages through
// them and filters here. A devbox that is shut down is gone for this
// client: Get and Delete report ErrNotFound.
//
// A command runs with execute and a command id made here, so a call
// repeated after a lost reply runs it once. Its stdout and stderr stream
// over the execution's two SSE streams, which resume from the byte offset
// reached when a stream is cut, and its exit status comes from the
// execution long poll. File operations that run as commands, whose output
// nobody watches, let the server wait a second for them instead: one that
// ends in that time costs one request. A command given stdin
// reads it from a file it was uploaded to, and its output, which may be
// binary (the API's JSON strings carry text only), goes to files that are
// downloaded once it ended. Files are moved with
// upload_file (a streamed multipart body) and download_file (a streamed
// reply); what the API has no endpoint for (stat, list, mkdir, remove,
// rename, directory transfer as tar) runs as commands through package
// execfs.
//
// Devboxes are machines (providers.Machine, see machine.go): Stop and
// Start suspend and resume them, and background commands, the process
// list, signals and logs run as commands through package execbg.
package runloop

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/execbg"
	"github.com/agentbox/sandbox/providers/execfs"
	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/runloop/emulator"
	"github.com/agentbox/sandbox/providers/runloop/runloopconf"
)

// The provider's name, variables and defaults (see package runloopconf).
const (
	Name           = runloopconf.Name
	EnvAPIKey      = runloopconf.EnvAPIKey
	EnvBaseURL     = runloopconf.EnvBaseURL
	DefaultBaseURL = runloopconf.DefaultBaseURL
)

// Registration describes the provider to the registry, emulator included.
func Registration() providers.Registration {
	r := runloopconf.Registration()
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
	// BaseURL is the API's base URL; empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient makes the requests; nil means a client with sane
	// connection timeouts and no overall timeout (streams are long).
	HTTPClient *http.Client
	// Retry bounds retries; zero values take the defaults.
	Retry httpapi.RetryPolicy
	// PageSize is the page size of List (default 100).
	PageSize int
	// OptimisticSeconds is how long execute waits for a command whose
	// output is not streamed (file operations run as commands, a
	// command given stdin) before answering "running" (default 1; the API
	// allows up to 25). Commands whose output is streamed do not wait.
	OptimisticSeconds int
}

// Provider is the Runloop client. It is safe for concurrent use.
type Provider struct {
	opts   Options
	client *http.Client
	fs     *execfs.FS
	bg     *execbg.Machine
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Closer   = (*Provider)(nil)
)

// New builds a provider from the configuration. A missing RUNLOOP_API_KEY
// returns a *providers.CredentialError.
func New(cfg providers.Config) (*Provider, error) {
	return NewWithOptions(Options{
		APIKey:  strings.TrimSpace(cfg.Lookup(EnvAPIKey)),
		BaseURL: cfg.Lookup(EnvBaseURL),
	})
}

// NewWithOptions builds a provider from explicit options.
func NewWithOptions(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, &providers.CredentialError{Provider: Name, Var: EnvAPIKey}
	}
	opts.BaseURL = strings.TrimRight(cmp.Or(opts.BaseURL, DefaultBaseURL), "/")
	if !strings.HasPrefix(opts.BaseURL, "http://") && !strings.HasPrefix(opts.BaseURL, "https://") {
		return nil, fmt.Errorf("runloop: %s %q must start with http:// or https://: %w", EnvBaseURL, opts.BaseURL, providers.ErrInvalid)
	}
	opts.Retry = opts.Retry.WithDefaults()
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.OptimisticSeconds <= 0 {
		opts.OptimisticSeconds = 1
	}
	c := opts.HTTPClient
	if c == nil {
		c = httpapi.NewHTTPClient()
	}
	p := &Provider{opts: opts, client: c}
	p.fs = &execfs.FS{Provider: Name, Exec: p.execScript, Put: p.put, Get: p.get}
	p.bg = &execbg.Machine{Provider: Name, Runner: p}
	return p, nil
}

// Name returns "runloop".
func (p *Provider) Name() string { return Name }

// Capabilities declares what Runloop supports through this client.
func (p *Provider) Capabilities() providers.Capabilities { return runloopconf.Capabilities() }

// Close drops idle connections.
func (p *Provider) Close() error {
	p.client.CloseIdleConnections()
	return nil
}
