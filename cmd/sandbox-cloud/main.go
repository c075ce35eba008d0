// The runtime's own updates of GOMAXPROCS are off, as in the program
// sandbox (see its main.go).

//go:debug updatemaxprocs=0

// Command sandbox-cloud is the program sandbox with the cloud providers
// and the interactive mode built in: the clients of E2B, Daytona and
// Runloop, Modal's (Modal's official Go SDK), the emulators of all four
// (`sandbox serve`), and the TUI of bare `sandbox`. The program sandbox
// hands every run that uses one of them (--sandbox e2b, serve --api
// daytona, bare sandbox on a terminal, ...) to this one, installed beside
// it; it also runs any other command as sandbox does. Local sandboxes it starts (the
// emulators') get their inits from the program sandbox beside it, of the
// same build: they need nothing of the clients, whose size and package
// initialisers would cost each.
package main

import (
	"os"

	// First: the program starts on one processor (see package procs).
	_ "github.com/agentbox/sandbox/internal/procs/start"

	"github.com/agentbox/sandbox/internal/builds"
	"github.com/agentbox/sandbox/internal/cli"
	"github.com/agentbox/sandbox/internal/tui"
	"github.com/agentbox/sandbox/providers/all"
	"github.com/agentbox/sandbox/providers/daytona"
	"github.com/agentbox/sandbox/providers/e2b"
	"github.com/agentbox/sandbox/providers/emulator/httpguard"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/modal"
	"github.com/agentbox/sandbox/providers/runloop"
)

// sandboxBeside is the program sandbox installed beside this one when it
// is the same build (the local provider starts its inits from it), else "".
func sandboxBeside() string {
	exe := cli.Beside("sandbox")
	if exe == "" || !builds.Same(exe) {
		return ""
	}
	return exe
}

func main() {
	// Without sandbox beside it, the local provider re-executes this
	// binary as the sandbox's init.
	local.MaybeRunInit()
	reg := all.Registry(e2b.Registration(), daytona.Registration(), runloop.Registration(), modal.Registration(),
		local.RegistrationWith(sandboxBeside))
	os.Exit(cli.RunSystem(reg, httpguard.ServeEmulator, tui.Mode{}))
}
