package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/emulator/httpguard"
	"github.com/agentbox/sandbox/providers/fake"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveRegistry has the fake provider as the backend and an e2b emulator.
func serveRegistry() *providers.Registry {
	em := providers.Registration{
		Name: "e2b",
		New: func(providers.Config) (providers.Provider, error) {
			return nil, &providers.CredentialError{Provider: "e2b", Var: "E2B_API_KEY"}
		},
		Emulator: e2bemu.NewEmulator,
	}
	return providers.NewRegistry(fake.Registration(), em)
}

// served is a `sandbox serve` running in the test.
type served struct {
	env    map[string]string
	stderr *lockedBuffer
	stop   func() int
}

// startServe runs `sandbox serve --api e2b --backend fake args...` until
// the test ends and returns the variables it printed.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	home := t.TempDir()
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, append([]string{"--yes", "serve", "--api", "e2b", "--backend", "fake"}, args...), Deps{
			Streams:  Streams{In: strings.NewReader(""), Out: out, Err: errb},
			Registry: serveRegistry(),
			Getenv:   func(k string) (string, bool) { return home, k == "HOME" },
			Getwd:    func() (string, error) { return home, nil },
			Serve:    httpguard.ServeEmulator,
		})
	}()
	var once sync.Once
	exit := -1
	s := &served{env: map[string]string{}, stderr: errb, stop: func() int {
		once.Do(func() { cancel(); exit = <-code })
		return exit
	}}
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(20 * time.Second)
	for len(s.env) < 3 {
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d: %s", c, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve printed nothing within 20s; stderr %q", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
		for line := range strings.SplitSeq(out.String(), "\n") {
			if kv, ok := strings.CutPrefix(line, "export "); ok {
				if k, v, ok := strings.Cut(kv, "="); ok {
					s.env[k] = v
				}
			}
		}
	}
	return s
}

// listSandboxes calls the control plane with key and returns the status.
func listSandboxes(t *testing.T, c *http.Client, url, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/sandboxes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET /sandboxes: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeNonLoopbackWarning: serving on an address other machines can
// reach prints a warning on stderr; a loopback address does not.
func TestServeNonLoopbackWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:0", false},
		{"localhost:0", false},
		{"0.0.0.0:0", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			s := startServe(t, "--addr", tt.addr)
			if code := s.stop(); code != 0 {
				t.Errorf("serve exited with %d: %s", code, s.stderr.String())
			}
			stderr := s.stderr.String()
			warned := strings.Contains(stderr, "is not a loopback address") && strings.Contains(stderr, "execute commands") && strings.Contains(stderr, "--api-key")
			if warned != tt.warn {
				t.Errorf("--addr %s: warned %v, want %v; stderr %q", tt.addr, warned, tt.warn, stderr)
			}
		})
	}
}

// TestServeKeyAndConnectionLimit: the served API refuses a wrong key and
// accepts the printed one, and more idle connections than --max-conns do
// not lock a client out: they are closed after --idle-timeout in turn.
func TestServeKeyAndConnectionLimit(t *testing.T) {
	t.Parallel()
	const maxConns = 4
	s := startServe(t, "--addr", "127.0.0.1:0", "--max-conns", "4", "--idle-timeout", "300ms")
	url, key := s.env["E2B_API_URL"], s.env["E2B_API_KEY"]
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	tests := []struct {
		name string
		key  string
		want int
	}{
		{"wrong key", "e2b_" + strings.Repeat("0", 40), http.StatusUnauthorized},
		{"truncated key", key[:len(key)-1], http.StatusUnauthorized},
		{"printed key", key, http.StatusOK},
	}
	for _, tt := range tests {
		if got := listSandboxes(t, c, url, tt.key); got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}

	addr := strings.TrimPrefix(url, "http://")
	tr.CloseIdleConnections()
	start := time.Now()
	var idle []net.Conn
	t.Cleanup(func() {
		for _, conn := range idle {
			conn.Close()
		}
	})
	for i := range maxConns + 50 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, conn)
		if i%2 == 0 {
			// A keep-alive request, then silence; the others send nothing.
			if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := listSandboxes(t, c, url, key); got != http.StatusOK {
		t.Errorf("a client behind %d idle connections: status %d", len(idle), got)
	}
	// Each of the connections ahead holds one of the 4 slots for at least
	// the 300ms timeout, so the client's turn comes after 13 such turns
	// (12 leave a margin): the limit was in force.
	if took := time.Since(start); took < 12*300*time.Millisecond {
		t.Errorf("served after %v: the %d connections ahead were not limited to %d at once", took, len(idle), maxConns)
	}
	for i, conn := range idle[:maxConns] {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			t.Errorf("idle connection %d: %v, want the server to have closed it", i, err)
		}
	}
}

// TestServeFlagErrors: limits that make no sense are usage errors.
func TestServeFlagErrors(t *testing.T) {
	t.Parallel()
	tests := [][]string{
		{"--max-conns", "0"},
		{"--idle-timeout", "0s"},
	}
	for _, args := range tests {
		var out, stderr bytes.Buffer
		home := t.TempDir()
		code := Main(context.Background(), append([]string{"serve", "--api", "e2b", "--backend", "fake"}, args...), Deps{
			Streams:  Streams{In: strings.NewReader(""), Out: &out, Err: &stderr},
			Registry: serveRegistry(),
			Getenv:   func(k string) (string, bool) { return home, k == "HOME" },
			Getwd:    func() (string, error) { return home, nil },
		})
		if code != ExitUsage || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%q: exit %d, want %d; stderr %q", args, code, ExitUsage, stderr.String())
		}
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 3000}, true},
		{&net.TCPAddr{IP: net.ParseIP("127.1.2.3"), Port: 3000}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 3000}, true},
		{&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 3000}, false},
		{&net.TCPAddr{IP: net.ParseIP("::"), Port: 3000}, false},
		{&net.TCPAddr{IP: net.ParseIP("192.168.1.10"), Port: 3000}, false},
		{&net.TCPAddr{Port: 3000}, false},
		{&net.UnixAddr{Name: "sock", Net: "unix"}, true},
	}
	for _, tt := range tests {
		if got := loopback(tt.addr); got != tt.want {
			t.Errorf("loopback(%v) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
