//go:build linux

package runloop_test

import (
	"os"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/runloop"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
	rlemutest "github.com/agentbox/sandbox/providers/runloop/emulator/emulatortest"
)

func TestMain(m *testing.M) {
	// The local provider behind the emulator re-executes the test binary
	// as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// testKey is the API key the test emulators require.
const testKey = "ak_0123456789abcdef0123456789abcdef"

// harness is an emulator backed by the local provider (see
// rlemutest.Harness).
type harness struct{ *rlemutest.Harness }

func newHarness(t testing.TB, opts rlemu.Options) harness {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	return harness{rlemutest.NewHarness(t, opts)}
}

// client returns our runloop client pointed at the harness.
func (h harness) client(t testing.TB, mod func(*runloop.Options)) *runloop.Provider {
	t.Helper()
	opts := runloop.Options{
		APIKey:  testKey,
		BaseURL: h.URL,
		Retry:   httpapi.RetryPolicy{Attempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
	}
	if mod != nil {
		mod(&opts)
	}
	p, err := runloop.NewWithOptions(opts)
	if err != nil {
		t.Fatalf("NewWithOptions: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
