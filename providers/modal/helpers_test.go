//go:build linux

package modal_test

import (
	"os"
	"testing"

	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/modal"
	mdemu "github.com/agentbox/sandbox/providers/modal/emulator"
)

func TestMain(m *testing.M) {
	// The local provider behind the emulator re-executes the test binary
	// as each sandbox's init.
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// testSecret is the token secret the test emulators require.
const testSecret = "as-0123456789abcdef"

// harness is an emulator backed by the local provider, with a fault layer
// inside it, served on a loopback port.
type harness struct {
	url    string
	faults *emulator.Faults
	server *mdemu.Server
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	backend := emulatortest.LocalBackend(t)
	faults := emulator.NewFaults()
	srv := mdemu.New(backend, mdemu.Options{APIKey: testSecret, Wrap: faults.Wrap})
	t.Cleanup(func() { _ = srv.Close() })
	return &harness{url: emulatortest.Serve(t, srv), faults: faults, server: srv}
}

// client returns our modal provider pointed at the harness. The SDK reads
// MODAL_SERVER_URL from the environment only, so the test sets it.
func (h *harness) client(t *testing.T, secret string) *modal.Provider {
	t.Helper()
	t.Setenv("MODAL_SERVER_URL", h.url)
	t.Setenv("MODAL_CONFIG_PATH", t.TempDir()+"/none.toml")
	p, err := modal.NewWithOptions(modal.Options{TokenID: "ak-test", TokenSecret: secret, App: "tests"})
	if err != nil {
		t.Fatalf("NewWithOptions: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
