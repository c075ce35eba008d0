//go:build linux

package modal_test

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// TestConformance runs the shared provider suite against our provider on
// Modal's official Go SDK, talking gRPC to the emulator (backed by real
// local sandboxes). A Modal sandbox is a machine: what a command starts
// with `&` keeps running and /tmp stays between calls.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Options{
		New:     func(t *testing.T) providers.Provider { return newHarness(t).client(t, testSecret) },
		Machine: true,
	})
}
