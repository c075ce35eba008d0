// Command sandbox-init is what the program sandbox starts as the init of
// each local sandbox, as the init's runners and as the reaper of deleted
// sandboxes, when it is installed beside sandbox and of the same build: it
// links the local provider alone, so each of those processes starts in
// about half the time the whole program takes (its package initialisers
// and the pages of a binary three times its size). Without it, sandbox
// starts itself for them. Run by hand, it says so and exits 2.
package main

import (
	"fmt"
	"os"

	"github.com/agentbox/sandbox/providers/local"
)

func main() {
	local.MaybeRunInit()
	fmt.Fprintln(os.Stderr, "sandbox-init is started by sandbox for local sandboxes; run sandbox instead")
	os.Exit(2)
}
