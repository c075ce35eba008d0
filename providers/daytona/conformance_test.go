//go:build linux

package daytona_test

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/providertest"
)

// TestConformance runs the shared provider suite against our client talking
// to the emulator (backed by real local sandboxes, which are machines) over
// real HTTP and websockets, providers.Machine's checks included.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Options{
		New: func(t *testing.T) providers.Provider { return newHarness(t, emulator.Options{}).client(t, nil) },
	})
}
