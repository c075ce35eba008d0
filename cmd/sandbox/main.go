// Command sandbox runs untrusted code in sandboxes with every operation
// approved. See the README for usage.
//
// Two programs of the release sit beside it. Local sandboxes' inits and
// runners are started from sandbox-init (cmd/sandbox-init), which links
// the local provider alone and so starts faster, when it is there and of
// the same build; else from this program. Modal's provider is not built
// in here: its SDK would cost every start of this program its package
// initialisers, so a run that uses Modal is handed to sandbox-modal
// (cmd/sandbox-modal).
package main

import (
	"os"

	"github.com/agentbox/sandbox/internal/cli"
	"github.com/agentbox/sandbox/providers/all"
	"github.com/agentbox/sandbox/providers/local"
)

func main() {
	// Without sandbox-init, the local provider re-executes this binary
	// as the sandbox's init.
	local.MaybeRunInit()
	os.Exit(cli.RunSystem(all.Registry(local.RegistrationWith(cli.Beside("sandbox-init")))))
}
