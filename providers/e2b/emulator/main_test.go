package emulator_test

import (
	"os"
	"testing"

	"github.com/agentbox/sandbox/providers"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/local"
)

func TestMain(m *testing.M) {
	// The local backend re-executes the test binary as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// testKey is an API key in the format the SDK expects.
const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// noPool turns the local backend's pooled inits off: one started as a
// test ends would be made in its state directory while that is removed.
func noPool(key string) (string, bool) {
	if key == "SANDBOX_LOCAL_POOL" {
		return "0", true
	}
	return "", false
}

// serve starts an emulator backed by a fresh local provider behind a fault
// layer and returns its URL.
func serve(t *testing.T) (string, *emulator.Faults, *e2bemu.Server) {
	t.Helper()
	backend, err := local.New(providers.Config{StateDir: t.TempDir(), Getenv: noPool})
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	srv := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	faults := emulator.NewFaults()
	return emulator.Serve(t, faults.Wrap(srv)), faults, srv
}
