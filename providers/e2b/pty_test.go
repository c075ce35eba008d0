//go:build linux

package e2b_test

import (
	"context"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// TestTerminal runs the terminal checks through our client, the
// emulator's envd PTY calls and the local provider's terminals.
func TestTerminal(t *testing.T) {
	p := newHarness(t).client(t, nil)
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), info.ID) })
	providertest.Terminal(t, p, info.ID)
}
