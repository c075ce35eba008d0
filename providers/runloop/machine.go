package runloop

import (
	"bytes"
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/execbg"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// A devbox is a machine: Stop suspends it (its disk stays, its processes
// end) and Start resumes it; an operation on a suspended devbox, which
// Runloop refuses, resumes it and is tried once more, so a devbox
// suspended by its idle policy (Spec.AutoStop) wakes at its next use.
// Background commands, the process list, signals and logs run as
// commands in the devbox through package execbg, whose records live in
// the devbox's /tmp.

var _ providers.Machine = (*Provider)(nil)

// Start resumes a suspended devbox and returns once it runs; a running
// devbox is left as it is.
func (p *Provider) Start(ctx context.Context, id string) error {
	dbx, err := p.get1(ctx, id)
	if err != nil {
		return err
	}
	return p.start(ctx, id, dbx.Status)
}

// start brings a devbox whose status is status to running.
func (p *Provider) start(ctx context.Context, id, status string) error {
	op := "start " + id
	switch status {
	case wire.StatusRunning:
		return nil
	case wire.StatusResuming:
		_, err := p.awaitStatus(ctx, id, op, wire.StatusRunning)
		return err
	case wire.StatusSuspending:
		if _, err := p.awaitStatus(ctx, id, op, wire.StatusSuspended); err != nil {
			return err
		}
	case wire.StatusSuspended:
	default:
		return errorf(providers.ErrUnavailable, op, "devbox %s is %s and cannot be started", id, status)
	}
	if err := p.Resume(ctx, id); err != nil {
		return err
	}
	// Processes ended with the suspension; records of background
	// commands that a disk kept would name pids that mean nothing now.
	_, _ = p.Exec(ctx, id, providers.ExecRequest{Argv: []string{"rm", "-rf", execbg.DefaultDir}, Cwd: "/"})
	return nil
}

// Stop suspends a devbox and returns once it is suspended; a suspended
// devbox is left as it is.
func (p *Provider) Stop(ctx context.Context, id string) error {
	op := "stop " + id
	dbx, err := p.get1(ctx, id)
	if err != nil {
		return err
	}
	switch dbx.Status {
	case wire.StatusSuspended:
		return nil
	case wire.StatusSuspending:
		_, err := p.awaitStatus(ctx, id, op, wire.StatusSuspended)
		return err
	case wire.StatusResuming:
		if _, err := p.awaitStatus(ctx, id, op, wire.StatusRunning); err != nil {
			return err
		}
	case wire.StatusRunning:
	default:
		return errorf(providers.ErrUnavailable, op, "devbox %s is %s and cannot be stopped", id, dbx.Status)
	}
	return p.Suspend(ctx, id)
}

// resumeIfSuspended is asked when an operation on devbox id failed with
// err. When Runloop refused it (400, 409) because the devbox is
// suspended (or on its way to or from it), the devbox is resumed and
// true returned: the caller tries the operation again.
func (p *Provider) resumeIfSuspended(ctx context.Context, id string, err error) bool {
	if !errors.Is(err, providers.ErrInvalid) && !errors.Is(err, providers.ErrExists) {
		return false
	}
	dbx, gerr := p.get1(ctx, id)
	if gerr != nil {
		return false
	}
	switch dbx.Status {
	case wire.StatusSuspending, wire.StatusSuspended, wire.StatusResuming:
		return p.start(ctx, id, dbx.Status) == nil
	}
	return false
}

// running reports whether the devbox runs, without resuming it.
func (p *Provider) running(ctx context.Context, id string) (bool, error) {
	dbx, err := p.get1(ctx, id)
	if err != nil {
		return false, err
	}
	return dbx.Status == wire.StatusRunning, nil
}

// background starts req detached and returns its pid.
func (p *Provider) background(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	command, err := commandLine(req)
	if err != nil {
		return providers.ExecResult{}, err
	}
	return p.bg.Background(ctx, id, command)
}

// Processes lists what runs in the devbox, read from /proc, with the
// background commands marked and those that ended with their status. A
// suspended devbox runs nothing, and is not resumed to say so.
func (p *Provider) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	if ok, err := p.running(ctx, id); err != nil || !ok {
		return []providers.Process{}, err
	}
	return p.bg.Processes(ctx, id)
}

// Signal sends sig to a process of the devbox with kill; a process that
// does not run (or a suspended devbox) matches ErrNotFound.
func (p *Provider) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	if ok, err := p.running(ctx, id); err != nil {
		return err
	} else if !ok {
		return errorf(providers.ErrNotFound, "signal", "devbox %s is not running: no process %d", id, pid)
	}
	return p.bg.Signal(ctx, id, pid, sig)
}

// Logs copies the output of background command pid into w, following it
// until it ends when follow is set, and returns its exit status once it
// has ended.
func (p *Provider) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	return p.bg.Logs(ctx, id, pid, follow, w)
}

// replay records the first bytes read through it, up to limit, so that a
// request refused before it sent more than them can be sent again.
type replay struct {
	r     io.Reader
	buf   []byte
	limit int
	over  bool
}

func (rp *replay) Read(b []byte) (int, error) {
	n, err := rp.r.Read(b)
	if !rp.over {
		if len(rp.buf)+n <= rp.limit {
			rp.buf = append(rp.buf, b[:n]...)
		} else {
			rp.over, rp.buf = true, nil
		}
	}
	return n, err
}

// again returns a reader of everything from the start, unless more than
// limit bytes were read.
func (rp *replay) again() (io.Reader, bool) {
	if rp.over {
		return nil, false
	}
	return io.MultiReader(bytes.NewReader(rp.buf), rp.r), true
}
