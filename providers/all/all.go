// Package all assembles the registry of every built-in provider. Only the
// programs' mains and end-to-end tests import it; the CLI and the TUI
// receive the registry and never import a concrete provider.
package all

import (
	"slices"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/daytonaconf"
	"github.com/agentbox/sandbox/providers/e2b/e2bconf"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/modal/modalconf"
	"github.com/agentbox/sandbox/providers/runloop/runloopconf"
)

// Registry returns a fresh registry holding every built-in provider,
// those of built in place of the ones of the same name: a program passes
// the registrations of what it links beyond the rest (sandbox-cloud: the
// cloud providers', and the local provider's that starts inits from the
// program sandbox). A provider that lives in another program and is not
// in built is there as a hand-over to that program (see
// providers.Registration.Program): every cloud provider, in the program
// sandbox (see providers.CloudProgram).
func Registry(built ...providers.Registration) *providers.Registry {
	regs := []providers.Registration{
		local.Registration(),
		e2bconf.Registration().HandedOver(providers.CloudProgram),
		daytonaconf.Registration().HandedOver(providers.CloudProgram),
		runloopconf.Registration().HandedOver(providers.CloudProgram),
		modalconf.Registration().HandedOver(providers.CloudProgram),
	}
	for _, b := range built {
		if i := slices.IndexFunc(regs, func(r providers.Registration) bool { return r.Name == b.Name }); i >= 0 {
			regs[i] = b
		} else {
			regs = append(regs, b)
		}
	}
	return providers.NewRegistry(regs...)
}
