package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// serveFlags are the flags of `sandbox serve`.
type serveFlags struct {
	api     string
	addr    string
	backend string
	apiKey  string
	log     bool
	// maxConns and idleTimeout bound what clients can hold of the server
	// (see Deps.Serve).
	maxConns    int
	idleTimeout time.Duration
}

func newServeCmd(app *App) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --api NAME",
		Short: "Serve a cloud provider's API (e2b, daytona, runloop) on sandboxes of another provider (local by default)",
		Long: `serve runs an emulator of a cloud provider's API — the control plane and the
in-sandbox daemon on one listener — whose sandboxes are real sandboxes of
another provider, local by default. Code written for that provider's official
SDK runs against it unchanged: point the SDK at it with the variables printed
on stdout (for e2b: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY; for daytona:
DAYTONA_API_URL and DAYTONA_API_KEY; for runloop: RUNLOOP_BASE_URL and
RUNLOOP_API_KEY).

Every operation passes through the approval policy like any other; requests
count as your own, so --deny rules and a --policy file apply.

Whoever can reach the address and holds the API key can run commands in the
sandboxes: keep the default loopback address, or use a long random
--api-key (the default) on a network you trust; the API is plain HTTP. At
most --max-conns connections are served at once; idle ones are closed after
--idle-timeout, and a request whose upload or response stalls for two
minutes is ended (long uploads and output streams that keep moving are not).`,
		Example: `  sandbox serve --api e2b --addr 127.0.0.1:3000
  sandbox serve --api e2b --backend local --log
  sandbox serve --api daytona --addr 127.0.0.1:3001`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return app.serve(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.api, "api", "", "the API to serve: a provider with an emulator (e2b, daytona, runloop)")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:3000", "listen on `HOST:PORT` (port 0 picks a free one)")
	fl.StringVar(&f.backend, "backend", "local", "the provider whose sandboxes back the emulator")
	fl.StringVar(&f.apiKey, "api-key", "", "the API key clients must send (default: a random key, printed)")
	fl.BoolVar(&f.log, "log", false, "log every request to stderr")
	fl.IntVar(&f.maxConns, "max-conns", providers.EmulatorMaxConns, "serve at most `N` connections at once; more wait their turn")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", providers.EmulatorIdleTimeout, "close a connection that sends no request for this long")
	return cmd
}

// emulatorNames lists the providers that have an emulator.
func (a *App) emulatorNames() []string {
	var names []string
	for _, reg := range a.deps.Registry.All() {
		// A provider built into another program has its emulator there.
		if reg.Emulator != nil || reg.Program != "" {
			names = append(names, reg.Name)
		}
	}
	return names
}

func (a *App) serve(ctx context.Context, f serveFlags) error {
	if f.api == "" {
		return &UsageError{Err: fmt.Errorf("--api is required (one of: %s)", strings.Join(a.emulatorNames(), ", "))}
	}
	reg, err := a.deps.Registry.Lookup(f.api)
	if err != nil {
		return &UsageError{Err: err}
	}
	if reg.Program != "" {
		// Its emulator is in the program that has it built in.
		return a.engine.HandOver(reg.Name)
	}
	if reg.Emulator == nil {
		return &UsageError{Err: fmt.Errorf("provider %s has no emulator (serve one of: %s)", f.api, strings.Join(a.emulatorNames(), ", "))}
	}
	if _, err := a.deps.Registry.Lookup(f.backend); err != nil {
		return &UsageError{Err: fmt.Errorf("--backend: %w", err)}
	}
	if f.maxConns < 1 {
		return &UsageError{Err: fmt.Errorf("--max-conns must be at least 1, not %d", f.maxConns)}
	}
	if f.idleTimeout <= 0 {
		return &UsageError{Err: fmt.Errorf("--idle-timeout must be positive, not %v", f.idleTimeout)}
	}
	if a.deps.Serve == nil {
		return fmt.Errorf("serve: this program serves no emulator: run the same command with %s", providers.CloudProgram)
	}
	backend, err := a.engine.Gated(f.backend)
	if err != nil {
		return err
	}
	opts := providers.EmulatorOptions{APIKey: f.apiKey}
	if f.log {
		opts.Log = a.masker.Writer(a.streams.Err)
	}
	em, err := reg.Emulator(backend, opts)
	if err != nil {
		return err
	}
	defer em.Close()

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("--addr: %w", err)}
	}
	url := "http://" + ln.Addr().String()
	env := em.Env(url)
	if err := a.printServeEnv(a.streams.Out, f.api, url, env); err != nil {
		ln.Close()
		return err
	}
	fmt.Fprintf(a.streams.Err, "sandbox: serving the %s API on %s, backed by %s sandboxes; stop with Ctrl-C\n", f.api, url, f.backend)
	if !loopback(ln.Addr()) {
		fmt.Fprintf(a.streams.Err, "sandbox: warning: %s is not a loopback address: whoever can reach it and holds the API key can execute commands in %s sandboxes; the API key (--api-key, or the random one printed) is the only protection and travels in plain HTTP\n", ln.Addr(), f.backend)
	}
	if err := a.deps.Serve(ctx, em, ln, f.maxConns, f.idleTimeout); err != nil {
		return err
	}
	fmt.Fprintln(a.streams.Err, "sandbox: stopped serving")
	// Stopping on a signal is how a server ends: not an error.
	return nil
}

// loopback reports whether a listener's address only accepts clients of
// this machine. The unspecified address (0.0.0.0, ::), which listens on
// every interface, is not loopback.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr != nil && addr.Network() == "unix"
	}
	return tcp.IP.IsLoopback()
}

// printServeEnv prints the variables clients need: shell export lines, or
// one JSON object with --json.
func (a *App) printServeEnv(w io.Writer, api, url string, env map[string]string) error {
	if a.flags.json {
		return output.JSON(w, map[string]any{"api": api, "url": url, "env": env})
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := fmt.Fprintf(w, "export %s=%s\n", k, shellQuote(env[k])); err != nil {
			return err
		}
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
