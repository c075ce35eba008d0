// Package all assembles the registry of every built-in provider. Only the
// program's main and end-to-end tests import it; the CLI and the TUI receive
// the registry and never import a concrete provider.
package all

import (
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona"
	"github.com/agentbox/sandbox/providers/e2b"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/runloop"
)

// Registry returns a fresh registry holding every built-in provider.
func Registry() *providers.Registry {
	return providers.NewRegistry(append([]providers.Registration{
		local.Registration(),
		e2b.Registration(),
		daytona.Registration(),
		runloop.Registration(),
	}, optional()...)...)
}
