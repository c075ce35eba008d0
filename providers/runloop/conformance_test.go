//go:build linux

package runloop_test

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
)

// TestConformance runs the shared provider suite against our client talking
// to the emulator (backed by real local sandboxes) over real HTTP,
// providers.Machine's checks included: Stop and Start suspend and resume
// the devbox, which the emulator maps to the backend's stop and start.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Options{
		New: func(t *testing.T) providers.Provider { return newHarness(t, rlemu.Options{}).client(t, nil) },
	})
}
