// The runtime's own updates of GOMAXPROCS are off, as in the program
// sandbox (see its main.go).

//go:debug updatemaxprocs=0

// Command sandbox-modal is the program sandbox with Modal's provider and
// emulator built in (Modal's official Go SDK). The program sandbox hands
// every run that uses Modal (--sandbox modal, serve --api modal) to this
// one, installed beside it; it also runs any other command as sandbox
// does. Local sandboxes it starts (the emulator's) get their inits from
// the program sandbox beside it, of the same build: they need nothing of
// the SDK, whose package initialisers would run in each.
package main

import (
	"os"

	// First: the program starts on one processor (see package procs).
	_ "github.com/agentbox/sandbox/internal/procs/start"

	"github.com/agentbox/sandbox/internal/cli"
	"github.com/agentbox/sandbox/providers/all"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/modal"
)

func main() {
	// Without sandbox beside it, the local provider re-executes this
	// binary as the sandbox's init.
	local.MaybeRunInit()
	os.Exit(cli.RunSystem(all.Registry(modal.Registration(), local.RegistrationWith(cli.Beside("sandbox")))))
}
