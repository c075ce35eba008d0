package approval

import (
	"context"
	"io"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// ---- lifecycle: not gated ----

// Name passes through: it touches no sandbox.
func (g *Gate) Name() string { return g.inner.Name() }

// Capabilities passes through: it touches no sandbox.
func (g *Gate) Capabilities() providers.Capabilities { return g.inner.Capabilities() }

// KeepsSessions says that the gate takes a request's session as it is:
// it decides on the command itself and only then turns the session into
// what the provider behind it runs (see Exec), so a caller in front of
// the gate (an emulator) must not wrap the command first.
func (g *Gate) KeepsSessions() bool { return true }

// Create passes through: creating, listing and deleting sandboxes are
// governed by the command line (the verb and --sandbox-id/--keep), not by
// the approval policy.
func (g *Gate) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	return g.inner.Create(ctx, spec)
}

// Get passes through: see Create.
func (g *Gate) Get(ctx context.Context, id string) (providers.Info, error) {
	return g.inner.Get(ctx, id)
}

// List passes through: see Create.
func (g *Gate) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	return g.inner.List(ctx, filter)
}

// Delete passes through: see Create.
func (g *Gate) Delete(ctx context.Context, id string) error {
	return g.inner.Delete(ctx, id)
}

// Close closes the inner provider when it implements providers.Closer.
func (g *Gate) Close() error {
	if c, ok := g.inner.(providers.Closer); ok {
		return c.Close()
	}
	return nil
}

// ---- machines (providers.Machine) ----

// machine returns the inner provider's providers.Machine, or an error
// matching providers.ErrUnsupported that names the provider.
func (g *Gate) machine(op string) (providers.Machine, error) {
	m, ok := g.inner.(providers.Machine)
	if !ok {
		return nil, providers.Errorf(providers.ErrUnsupported, g.inner.Name(), op,
			"provider %s has no machines: its sandboxes keep no processes running between operations, so they cannot be started, stopped or listed", g.inner.Name())
	}
	return m, nil
}

// Start passes through, as Delete does: starting and stopping a sandbox
// are lifecycle operations, governed by the command line, not by the
// approval policy. Without providers.Machine it returns ErrUnsupported.
func (g *Gate) Start(ctx context.Context, id string) error {
	m, err := g.machine("start")
	if err != nil {
		return err
	}
	return m.Start(ctx, id)
}

// Stop passes through: see Start.
func (g *Gate) Stop(ctx context.Context, id string) error {
	m, err := g.machine("stop")
	if err != nil {
		return err
	}
	return m.Stop(ctx, id)
}

// ProcessesTarget is the target of the request that lists a sandbox's
// processes (kind list): path rules see it as the sandbox's /proc.
const ProcessesTarget = "/proc"

// Processes is gated as KindList with target ProcessesTarget.
func (g *Gate) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	m, err := g.machine("ps")
	if err != nil {
		return nil, err
	}
	var out []providers.Process
	err = g.do(ctx, g.request(ctx, KindList, id, ProcessesTarget), func(ctx context.Context) (*int, error) {
		var err error
		out, err = m.Processes(ctx, id)
		return nil, err
	})
	return out, err
}

// SignalArgv is the command a Signal request is decided as: `kill -s
// NAME PID`, NAME without its SIG prefix (TERM, KILL…), or the number of
// a signal without a name.
func SignalArgv(pid int, sig syscall.Signal) []string {
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if name == "" {
		name = strconv.Itoa(int(sig))
	}
	return []string{"kill", "-s", name, strconv.Itoa(pid)}
}

// Signal is gated as KindExec of the argv SignalArgv, so that
// `--allow 'exec:kill *'` allows it and rules on kill apply as they do
// to a kill run with exec.
func (g *Gate) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	m, err := g.machine("kill")
	if err != nil {
		return err
	}
	argv := SignalArgv(pid, sig)
	req := g.request(ctx, KindExec, id, QuoteArgv(argv))
	req.Argv = argv
	req.Details.Dest = ""
	return g.do(ctx, req, func(ctx context.Context) (*int, error) {
		return nil, m.Signal(ctx, id, pid, sig)
	})
}

// LogsTarget is the target of the request that reads the output of the
// background command pid (kind read): path rules see it as that
// process's directory of the sandbox's /proc.
func LogsTarget(pid int) string { return ProcessesTarget + "/" + strconv.Itoa(pid) }

// Logs is gated as KindRead with target LogsTarget(pid). It copies the
// output of a background command into w (following it until it ends when
// follow is set) and returns its exit status once it has ended.
func (g *Gate) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	m, err := g.machine("logs")
	if err != nil {
		return nil, err
	}
	var code *int
	err = g.do(ctx, g.request(ctx, KindRead, id, LogsTarget(pid)), func(ctx context.Context) (*int, error) {
		var err error
		code, err = m.Logs(ctx, id, pid, follow, w)
		return nil, err
	})
	return code, err
}
