// Package daytona is the Daytona provider: a thin HTTP client of Daytona's
// control plane (REST under the API URL, which ends in /api) and of the
// toolbox, the daemon inside every sandbox, reached at the sandbox's
// toolboxProxyUrl followed by its id.
//
// Configuration comes from DAYTONA_API_KEY (required), DAYTONA_API_URL,
// DAYTONA_TARGET and DAYTONA_ORGANIZATION_ID, the variables the official
// SDKs read, so the same settings point this client and the SDKs at
// Daytona or at an emulator (`sandbox serve --api daytona`, see the
// emulator package).
//
// A command runs in a session of its own: the session's command is started
// asynchronously, its output followed over the toolbox's websocket as it
// is produced (stdout and stderr apart), and its exit code read once the
// stream ends; the session is deleted afterwards, which also ends a
// command whose timeout passed. The toolbox has no stdin stream that
// ends, so a command's stdin is read to its end and uploaded to a file
// the command reads. Files go through the toolbox's file API, streamed
// both ways. Sandboxes are machines (providers.Machine, see machine.go).
//
// Calls that are safe to repeat (reads, stop, delete, mkdir, remove) are
// retried on 429 and 5xx with exponential backoff, honouring Retry-After,
// a bounded number of times; calls with side effects (create, a command's
// start, move, upload) only when the server refused them with 429 or the
// connection was never made (see httpapi).
package daytona

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/daytonaconf"
	"github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/httpapi"
)

// The provider's name, variables and defaults (see package daytonaconf).
const (
	Name            = daytonaconf.Name
	EnvAPIKey       = daytonaconf.EnvAPIKey
	EnvAPIURL       = daytonaconf.EnvAPIURL
	EnvTarget       = daytonaconf.EnvTarget
	EnvOrganization = daytonaconf.EnvOrganization
	EnvSnapshot     = daytonaconf.EnvSnapshot
	DefaultAPIURL   = daytonaconf.DefaultAPIURL
)

// Registration describes the provider to the registry, emulator included.
func Registration() providers.Registration {
	r := daytonaconf.Registration()
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
	// APIURL is the control plane's base URL; empty means DefaultAPIURL.
	APIURL string
	// Target is the region sandboxes are created in; empty lets Daytona
	// choose.
	Target string
	// Organization is sent as X-Daytona-Organization-ID when set.
	Organization string
	// Snapshot is used when a Spec names no image.
	Snapshot string
	// HTTPClient makes the requests; nil means a client with sane
	// connection timeouts and no overall timeout (streams are long).
	HTTPClient *http.Client
	// Retry bounds retries; zero values take the defaults.
	Retry httpapi.RetryPolicy
	// PageSize is the page size of List (1..200, default 100).
	PageSize int
}

// Provider is the Daytona client. It is safe for concurrent use.
type Provider struct {
	opts   Options
	client *http.Client

	// mu guards known: each sandbox's toolboxProxyUrl and user, learnt
	// from the control plane.
	mu    sync.Mutex
	known map[string]known
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Closer   = (*Provider)(nil)
)

// New builds a provider from the configuration. A missing DAYTONA_API_KEY
// returns a *providers.CredentialError.
func New(cfg providers.Config) (*Provider, error) {
	return NewWithOptions(Options{
		APIKey:       strings.TrimSpace(cfg.Lookup(EnvAPIKey)),
		APIURL:       cfg.Lookup(EnvAPIURL),
		Target:       cfg.Lookup(EnvTarget),
		Organization: cfg.Lookup(EnvOrganization),
		Snapshot:     cfg.Lookup(EnvSnapshot),
	})
}

// NewWithOptions builds a provider from explicit options.
func NewWithOptions(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, &providers.CredentialError{Provider: Name, Var: EnvAPIKey}
	}
	opts.APIURL = strings.TrimRight(cmp.Or(opts.APIURL, DefaultAPIURL), "/")
	if !strings.HasPrefix(opts.APIURL, "http://") && !strings.HasPrefix(opts.APIURL, "https://") {
		return nil, fmt.Errorf("daytona: %s %q must start with http:// or https://: %w", EnvAPIURL, opts.APIURL, providers.ErrInvalid)
	}
	opts.Retry = opts.Retry.WithDefaults()
	if opts.PageSize <= 0 || opts.PageSize > maxPageSize {
		opts.PageSize = defaultPageSize
	}
	c := opts.HTTPClient
	if c == nil {
		c = httpapi.NewHTTPClient()
	}
	return &Provider{opts: opts, client: c, known: map[string]known{}}, nil
}

// Page sizes of GET /sandbox.
const (
	defaultPageSize = 100
	maxPageSize     = 200
)

// Name returns "daytona".
func (p *Provider) Name() string { return Name }

// Capabilities declares what Daytona supports.
func (p *Provider) Capabilities() providers.Capabilities { return daytonaconf.Capabilities() }

// Close drops idle connections.
func (p *Provider) Close() error {
	p.client.CloseIdleConnections()
	return nil
}

// minutes rounds d up to whole minutes, at least one.
func minutes(d time.Duration) int {
	return max(int((d+time.Minute-1)/time.Minute), 1)
}
