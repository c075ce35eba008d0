//go:build linux

package local

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// TestTerminal runs the terminal checks as root and as a default user
// that is not root (as the e2b emulator's sandboxes have).
func TestTerminal(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec providers.Spec
	}{
		{"root", providers.Spec{}},
		{"user", providers.Spec{User: "user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t)
			id := newSandbox(t, p, tc.spec)
			providertest.Terminal(t, p, id)
		})
	}
}
