// The runtime's own updates of GOMAXPROCS are off: the program sets it
// itself (package procs), and the goroutine that watches for them, started
// before any package's initialiser, was a twentieth of a cold
// `sandbox exec` (bench/run.sh exec).

//go:debug updatemaxprocs=0

// Command sandbox runs untrusted code in sandboxes with every operation
// approved. See the README for usage.
//
// The cloud providers (E2B, Daytona, Runloop, Modal), their emulators and
// the interactive mode (the TUI) are not built in here: their HTTP and
// gRPC clients and servers, Modal's SDK, and Bubble Tea with Lip Gloss
// would cost every start of this program, and of every local sandbox's
// init and runners (which re-execute it), their size and their package
// initialisers (net/http alone was a tenth of a cold `sandbox exec`, the
// TUI's libraries a twelfth). A run that uses one, serves an emulator or
// opens the TUI (bare `sandbox` on a terminal) is handed to the program
// sandbox-cloud (cmd/sandbox-cloud), installed beside this one.
// TestNoHTTPInSandbox and TestNoTUIInSandbox keep them out.
package main

import (
	"os"

	// First: the program starts on one processor (see package procs).
	_ "github.com/agentbox/sandbox/internal/procs/start"

	"github.com/agentbox/sandbox/internal/cli"
	"github.com/agentbox/sandbox/providers/all"
	"github.com/agentbox/sandbox/providers/local"
)

func main() {
	// The local provider re-executes this binary as the sandbox's init.
	local.MaybeRunInit()
	os.Exit(cli.RunSystem(all.Registry(), nil, nil))
}
