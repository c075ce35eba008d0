//go:build linux

package emulator_test

import (
	"os"
	"testing"

	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/runloop/emulator"
	rlemutest "github.com/agentbox/sandbox/providers/runloop/emulator/emulatortest"
)

func TestMain(m *testing.M) {
	// The local provider behind the emulator re-executes the test binary
	// as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

const testKey = "ak_emulator_test_key"

// serve starts an emulator backed by the local provider.
func serve(t testing.TB, opts emulator.Options) *rlemutest.Harness {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	return rlemutest.NewHarness(t, opts)
}
