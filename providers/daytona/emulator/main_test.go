//go:build linux

package emulator_test

import (
	"os"
	"testing"

	"github.com/agentbox/sandbox/providers/daytona/emulator"
	shared "github.com/agentbox/sandbox/providers/emulator"
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
const testKey = "dtn_test_key_0123456789abcdef"

// serve starts an emulator on a local backend behind the fault layer and
// returns its URL.
func serve(t testing.TB, opts emulator.Options) (string, *shared.Faults, *emulator.Server) {
	t.Helper()
	backend := emulatortest.LocalBackend(t)
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	srv := emulator.New(backend, opts)
	t.Cleanup(func() { _ = srv.Close() })
	faults := shared.NewFaults()
	return emulatortest.Serve(t, faults.Wrap(srv)), faults, srv
}
