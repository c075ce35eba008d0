//go:build linux

package e2b_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/local"
)

func TestMain(m *testing.M) {
	// The local provider behind the emulator re-executes the test binary
	// as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// testKey is the API key the test emulators require.
const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// harness is an emulator backed by the local provider, behind a fault
// layer, served on a loopback port.
type harness struct {
	url     string
	faults  *emulator.Faults
	server  *e2bemu.Server
	backend providers.Provider
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	backend := emulatortest.LocalBackend(t)
	srv := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	faults := emulator.NewFaults()
	url := emulatortest.Serve(t, faults.Wrap(srv))
	return &harness{url: url, faults: faults, server: srv, backend: backend}
}

// client returns our e2b client pointed at the harness.
func (h *harness) client(t testing.TB, mod func(*e2b.Options)) *e2b.Provider {
	t.Helper()
	opts := e2b.Options{
		APIKey:     testKey,
		APIURL:     h.url,
		SandboxURL: h.url,
		Retry:      e2b.RetryPolicy{Attempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
	}
	if mod != nil {
		mod(&opts)
	}
	p, err := e2b.NewWithOptions(opts)
	if err != nil {
		t.Fatalf("NewWithOptions: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// decodeJSON decodes a reply body into v.
func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode reply: %v", err)
	}
}
