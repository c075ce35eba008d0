package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
	"github.com/agentbox/sandbox/providers/execbg"
)

// A Daytona sandbox is a machine: Stop and Start (control.go) stop and
// start it, and the toolbox's sessions run background commands. A
// background command runs in a session of its own, which is kept: a small
// wrapper records its pid in execbg's directory (<session>.pid, and the
// execbg record <pid>.bg naming the session back) before it becomes the
// command, so that Logs finds the session of a pid. The process list and
// signals are execbg's, shared with the other providers that run them as
// commands; the exit status and output of an ended command come from its
// session.

// bgDir holds the records of background commands; it is in /tmp, which
// a stop empties, as the commands end.
const bgDir = execbg.DefaultDir

var _ providers.Machine = (*Provider)(nil)

// background starts req detached and returns its pid.
func (p *Provider) background(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	session := "sandbox-bg-" + randomHex(8)
	record := fmt.Sprintf(`d=%s; mkdir -p "$d" && echo %s > "$d/$$.bg" && echo $$ > "$d/%s.pid.tmp" && mv "$d/%s.pid.tmp" "$d/%s.pid"; `,
		bgDir, session, session, session, session)
	command, err := shellCommand(req, "/dev/null", record)
	if err != nil {
		return providers.ExecResult{}, err
	}
	sessURL := base + "/process/session/" + url.PathEscape(session)
	if err := p.call(ctx, "exec: create session", http.MethodPost, base+"/process/session", wire.CreateSession{SessionID: session}, nil, false); err != nil {
		return providers.ExecResult{}, err
	}
	var started wire.SessionExecuteResponse
	if err := p.call(ctx, "exec", http.MethodPost, sessURL+"/exec", wire.SessionExecuteRequest{Command: command, RunAsync: true}, &started, false); err != nil {
		return providers.ExecResult{}, err
	}
	// The wrapper writes the pid file as its first act.
	pidFile := bgDir + "/" + session + ".pid"
	delay := 10 * time.Millisecond
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, err := p.readSmall(ctx, id, pidFile)
		if err == nil {
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if perr != nil || pid <= 0 {
				return providers.ExecResult{}, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the background command's pid file holds %q", b)
			}
			return providers.ExecResult{PID: pid}, nil
		}
		if !errors.Is(err, providers.ErrNotFound) {
			return providers.ExecResult{}, err
		}
		if time.Now().After(deadline) {
			return providers.ExecResult{}, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the background command did not start within 30s")
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return providers.ExecResult{}, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// readSmall reads a small file of the sandbox.
func (p *Provider) readSmall(ctx context.Context, id, file string) ([]byte, error) {
	rc, err := p.ReadFile(ctx, id, file)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 4096))
}

// started reports whether the sandbox runs, without starting it.
func (p *Provider) started(ctx context.Context, id string) (bool, error) {
	sb, err := p.detail(ctx, id)
	if err != nil {
		return false, err
	}
	return sb.State == wire.StateStarted, nil
}

// machine lists processes, sends signals and finds the session of a
// background command with commands run in the sandbox.
func (p *Provider) machine() *execbg.Machine {
	return &execbg.Machine{Provider: Name, Runner: p, Dir: bgDir, ExitCode: p.sessionExitCode}
}

// sessionExitCode is the exit status of the background command that ran
// in session, nil while it runs.
func (p *Provider) sessionExitCode(ctx context.Context, id string, _ int, session string) (*int, error) {
	cmd, err := p.bgCommand(ctx, id, session)
	if err != nil {
		return nil, err
	}
	return cmd.ExitCode, nil
}

// Processes lists what runs in the sandbox: its processes, read from
// /proc, with the background commands marked, and the background commands
// that ended with their exit status. A stopped sandbox runs nothing.
func (p *Provider) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	if ok, err := p.started(ctx, id); err != nil || !ok {
		return []providers.Process{}, err
	}
	return p.machine().Processes(ctx, id)
}

// bgCommand describes the command of a background session.
func (p *Provider) bgCommand(ctx context.Context, id, session string) (wire.Command, error) {
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return wire.Command{}, err
	}
	var s wire.Session
	if err := p.call(ctx, "logs: session", http.MethodGet, base+"/process/session/"+url.PathEscape(session), nil, &s, true); err != nil {
		return wire.Command{}, err
	}
	if len(s.Commands) == 0 {
		return wire.Command{}, providers.Errorf(providers.ErrNotFound, Name, "logs", "session %s has no command", session)
	}
	c := s.Commands[len(s.Commands)-1]
	return c, nil
}

// Signal sends sig to a process of the sandbox with kill; a process that
// does not run (or a stopped sandbox) matches ErrNotFound.
func (p *Provider) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	if ok, err := p.started(ctx, id); err != nil {
		return err
	} else if !ok {
		return providers.Errorf(providers.ErrNotFound, Name, fmt.Sprintf("signal %d", pid), "the sandbox is stopped: no process %d", pid)
	}
	return p.machine().Signal(ctx, id, pid, sig)
}

// Logs copies the output of background command pid into w (stdout and
// stderr in the order they came), following it until it ends when follow
// is set, and returns its exit status once it has ended.
func (p *Provider) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	session, err := p.machine().Token(ctx, id, pid)
	if err != nil {
		return nil, err
	}
	cmd, err := p.bgCommand(ctx, id, session)
	if err != nil {
		return nil, err
	}
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return nil, err
	}
	cmdURL := base + "/process/session/" + url.PathEscape(session) + "/command/" + url.PathEscape(cmd.ID)
	if follow {
		if err := p.followLogs(ctx, cmdURL, w, w); err != nil {
			return nil, err
		}
		code, err := p.exitCode(ctx, cmdURL)
		if err != nil {
			return nil, err
		}
		return &code, nil
	}
	var logs wire.SessionLogs
	if err := p.call(ctx, fmt.Sprintf("logs %d", pid), http.MethodGet, cmdURL+"/logs", nil, &logs, true); err != nil {
		return nil, err
	}
	d := &wire.Demuxer{Stdout: w, Stderr: w}
	if _, err := d.Write([]byte(logs.Output)); err != nil {
		return nil, err
	}
	if err := d.Flush(); err != nil {
		return nil, err
	}
	// The status read before the output may predate the command's end.
	return cmd.ExitCode, nil
}
