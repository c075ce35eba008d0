//go:build linux

package emulatortest

import (
	"net/http"
	"sync/atomic"
	"testing"

	shared "github.com/agentbox/sandbox/providers/emulator"
	sharedtest "github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/runloop/emulator"
)

// Harness is an emulator for one test: backed by the local provider, with
// a fault layer (which sees HTTP/2 requests too), served on a loopback
// port that speaks HTTP/1.1 and h2c. The test binary's TestMain must
// call local.MaybeRunInit.
type Harness struct {
	// URL is the emulator's base URL ("http://127.0.0.1:PORT").
	URL string
	// Key is the API key the emulator requires.
	Key string
	// Faults is the fault layer the requests pass through.
	Faults *shared.Faults
	// Server is the emulator itself.
	Server *emulator.Server
	// HTTP2 counts the requests that came over HTTP/2.
	HTTP2 *atomic.Int64
}

// NewHarness starts a Harness with opts (Wrap is its own; an empty APIKey
// is a fixed test key) and ends it with the test.
func NewHarness(t testing.TB, opts emulator.Options) *Harness {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = "ak_test_0123456789abcdef"
	}
	h := &Harness{Key: opts.APIKey, Faults: shared.NewFaults(), HTTP2: &atomic.Int64{}}
	opts.Wrap = func(next http.Handler) http.Handler {
		return h.Faults.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 {
				h.HTTP2.Add(1)
			}
			next.ServeHTTP(w, r)
		}))
	}
	h.Server = emulator.New(sharedtest.LocalBackend(t), opts)
	t.Cleanup(func() { _ = h.Server.Close() })
	h.URL = sharedtest.Serve(t, h.Server)
	return h
}
