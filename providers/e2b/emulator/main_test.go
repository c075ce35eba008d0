//go:build linux

package emulator_test

import (
	"os"
	"testing"

	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/local"
)

func TestMain(m *testing.M) {
	// The local backend re-executes the test binary as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// testKey is an API key in the format the SDK expects.
const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// serve starts an emulator backed by a fresh local provider behind a fault
// layer and returns its URL.
func serve(t *testing.T) (string, *emulator.Faults, *e2bemu.Server) {
	t.Helper()
	backend := emulatortest.LocalBackend(t)
	srv := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	faults := emulator.NewFaults()
	return emulatortest.Serve(t, faults.Wrap(srv)), faults, srv
}
