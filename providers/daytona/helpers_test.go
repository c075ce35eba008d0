//go:build linux

package daytona_test

import (
	"os"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona"
	dtnemu "github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/local"
)

func TestMain(m *testing.M) {
	// The local provider behind the emulator re-executes the test binary
	// as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// testKey is the API key the test emulators require.
const testKey = "dtn_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// harness is an emulator backed by the local provider, behind a fault
// layer, served on a loopback port.
type harness struct {
	url     string
	faults  *emulator.Faults
	server  *dtnemu.Server
	backend providers.Provider
}

// newHarness serves an emulator with opts (the test key unless one is
// given) on a local backend of the test's own.
func newHarness(t testing.TB, opts dtnemu.Options) *harness {
	t.Helper()
	backend := emulatortest.LocalBackend(t)
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	srv := dtnemu.New(backend, opts)
	t.Cleanup(func() { _ = srv.Close() })
	faults := emulator.NewFaults()
	url := emulatortest.Serve(t, faults.Wrap(srv))
	return &harness{url: url, faults: faults, server: srv, backend: backend}
}

// client returns our daytona client pointed at the harness.
func (h *harness) client(t testing.TB, mod func(*daytona.Options)) *daytona.Provider {
	t.Helper()
	opts := daytona.Options{
		APIKey: testKey,
		APIURL: h.url + "/api",
		Retry:  httpapi.RetryPolicy{Attempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
	}
	if mod != nil {
		mod(&opts)
	}
	p, err := daytona.NewWithOptions(opts)
	if err != nil {
		t.Fatalf("NewWithOptions: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
