package providers

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Config is what a provider constructor may read. Providers never call
// os.Getenv themselves: the CLI resolves flags, the environment and .env
// files and hands the result over here.
type Config struct {
	// Getenv looks up a variable: the real environment, then a .env file
	// for provider credentials and endpoints only. A provider's switches
	// that weaken isolation or move files (the local provider's
	// SANDBOX_LOCAL_*) and paths come from the real environment alone.
	Getenv func(key string) (string, bool)
	// StateDir is the tool's state directory ($XDG_STATE_HOME/sandbox); a
	// provider that keeps files stores them under StateDir/<name>.
	StateDir string
}

// Lookup returns the value of key, or "" when it is unset.
func (c Config) Lookup(key string) string {
	if c.Getenv == nil {
		return ""
	}
	v, _ := c.Getenv(key)
	return v
}

// EnvKey documents one environment variable a provider reads.
type EnvKey struct {
	Name     string `json:"name"`
	Help     string `json:"help"`
	Required bool   `json:"required"`
	// Secret values are masked wherever they are printed.
	Secret bool `json:"secret"`
}

// Registration describes a provider to the registry.
type Registration struct {
	Name        string
	Description string
	// Env lists the variables the provider reads.
	Env []EnvKey
	// Capabilities is what the provider supports; it must equal what
	// New(...).Capabilities() returns.
	Capabilities Capabilities
	// Hidden providers work but are not listed by `sandbox providers`.
	Hidden bool
	// New builds the provider. A missing required key returns a
	// *CredentialError.
	New func(cfg Config) (Provider, error)
	// Ready, when set, says whether the provider has what it needs to
	// run (credentials it may find elsewhere than in Env, such as a
	// configuration file) and, if not, what is missing; without it the
	// required variables of Env decide.
	Ready func(cfg Config) (ok bool, missing []string)
	// Program, when set, names the program of the same release that has
	// this provider built in, in place of this one: its New and Emulator
	// are nil here, and a run that needs the provider is handed over to
	// that program whole (see the engine's Handoff). A provider whose
	// dependencies would cost every run of this program their start-up
	// (Modal's SDK) lives there.
	Program string
	// Emulator, when set, builds a server speaking this provider's wire
	// API that runs everything on backend (any provider). `sandbox serve
	// --api <Name>` uses it; nil means the provider has no emulator.
	Emulator func(backend Provider, opts EmulatorOptions) (Emulator, error)
}

// CloudProgram is the program of the release that has the cloud
// providers (E2B, Daytona, Runloop, Modal) and their emulators built in;
// the program sandbox hands every run that uses one over to it (see
// Registration.Program). Their HTTP and gRPC clients and servers, and
// Modal's SDK, would cost every start of sandbox, and of every local
// sandbox's init and runners (which re-execute it), their size and their
// package initialisers: a tenth of a cold `sandbox exec`.
const CloudProgram = "sandbox-cloud"

// Defaults of the limits `sandbox serve` puts on an emulator's clients
// (see package httpguard).
const (
	// EmulatorMaxConns is the number of connections served at once.
	EmulatorMaxConns = 512
	// EmulatorIdleTimeout closes a keep-alive connection with no request.
	EmulatorIdleTimeout = time.Minute
)

// EmulatorOptions configure an emulator.
type EmulatorOptions struct {
	// APIKey is the key clients must present; empty accepts any
	// non-empty key.
	APIKey string
	// Log receives one line per request; nil logs nothing.
	Log io.Writer
}

// Emulator is a server speaking a provider's wire API: an http.Handler
// too, which `sandbox serve` serves (the interface does not say so, so
// that this package, which every program imports, links no HTTP: the
// program sandbox has no emulator, see CloudProgram).
type Emulator interface {
	// Env returns the variables that point the provider's clients (ours
	// and the official SDKs) at the emulator served at baseURL, such as
	// "http://127.0.0.1:3000".
	Env(baseURL string) map[string]string
	// Close ends background work and the processes it started; the
	// backend's sandboxes are left alone.
	Close() error
}

// HandedOver is r for a program that has not the provider built in: every
// run that uses it, as a provider or an emulator, goes to program (see
// Program).
func (r Registration) HandedOver(program string) Registration {
	r.Program, r.New, r.Emulator = program, nil, nil
	return r
}

// Configured reports whether the provider has what it needs in cfg: its
// Ready check, or else every required variable.
func (r Registration) Configured(cfg Config) (ok bool, missing []string) {
	if r.Ready != nil {
		return r.Ready(cfg)
	}
	for _, k := range r.Env {
		if k.Required && cfg.Lookup(k.Name) == "" {
			missing = append(missing, k.Name)
		}
	}
	return len(missing) == 0, missing
}

// Registry maps provider names to registrations. It is built once by the
// program (see providers/all) and passed down; there is no global registry.
type Registry struct {
	regs map[string]Registration
}

// NewRegistry returns a registry holding regs. Duplicate names panic, as
// they are a programming error.
func NewRegistry(regs ...Registration) *Registry {
	r := &Registry{regs: make(map[string]Registration, len(regs))}
	for _, reg := range regs {
		if _, dup := r.regs[reg.Name]; dup {
			panic("providers: duplicate registration " + reg.Name)
		}
		r.regs[reg.Name] = reg
	}
	return r
}

// Lookup finds a registration. An unknown name returns an error that lists
// the known ones.
func (r *Registry) Lookup(name string) (Registration, error) {
	if reg, ok := r.regs[name]; ok {
		return reg, nil
	}
	return Registration{}, &UnknownProviderError{Name: name, Known: r.Names()}
}

// UnknownProviderError names a provider that is not registered, and the
// ones that are. It matches ErrInvalid.
type UnknownProviderError struct {
	Name  string
	Known []string
}

// Error lists the known providers.
func (e *UnknownProviderError) Error() string {
	return fmt.Sprintf("unknown provider %q (known: %s)", e.Name, strings.Join(e.Known, ", "))
}

// Is matches ErrInvalid.
func (e *UnknownProviderError) Is(target error) bool { return target == ErrInvalid }

// Names returns the visible provider names, sorted.
func (r *Registry) Names() []string {
	var names []string
	for n, reg := range r.regs {
		if !reg.Hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// All returns the visible registrations sorted by name.
func (r *Registry) All() []Registration {
	var out []Registration
	for _, n := range r.Names() {
		out = append(out, r.regs[n])
	}
	return slices.Clip(out)
}
