package e2b_test

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// TestConformance runs the shared provider suite against our client talking
// to the emulator (backed by real local sandboxes) over real HTTP.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Options{
		New: func(t *testing.T) providers.Provider { return newHarness(t).client(t, nil) },
	})
}
