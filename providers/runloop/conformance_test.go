//go:build linux

package runloop_test

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
)

// TestConformance runs the shared provider suite against our client talking
// to the emulator (backed by real local sandboxes) over real HTTP. A devbox
// is a machine (what a command starts with `&` keeps running, /tmp stays)
// though the client does not implement providers.Machine: Options.Machine
// runs the machine checks that need no Machine method.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Options{
		New:     func(t *testing.T) providers.Provider { return newHarness(t, rlemu.Options{}).client(t, nil) },
		Machine: true,
	})
}
