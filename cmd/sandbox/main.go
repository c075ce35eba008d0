// Command sandbox runs untrusted code in sandboxes with every operation
// approved. See the README for usage.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentbox/sandbox/internal/cli"
	"github.com/agentbox/sandbox/providers/all"
	"github.com/agentbox/sandbox/providers/local"
)

func main() {
	// The local provider re-executes this binary as the sandbox's init.
	local.MaybeRunInit()
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Main(ctx, os.Args[1:], cli.Deps{
		Streams:  cli.SystemStreams(),
		Registry: all.Registry(),
		Getenv:   os.LookupEnv,
		Getwd:    os.Getwd,
	})
}
