package daytona

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
	"github.com/agentbox/sandbox/providers/httpapi"
)

// Exec runs a command in a session of its own: its stdin, when there is
// one, is read to its end and uploaded first; the command starts
// asynchronously, its output is followed over the toolbox's websocket as
// it is produced, and its exit code is read when the stream ends. The
// session is deleted afterwards, which ends the command when the timeout
// passed or ctx ended first. A command's start is never repeated after a
// lost reply. Commands run as the sandbox's user: another req.User is
// refused with ErrUnsupported. A background command is started as
// machine.go says.
func (p *Provider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	if req.User != "" {
		k, err := p.toolbox(ctx, id)
		if err != nil {
			return providers.ExecResult{}, err
		}
		if req.User != k.user {
			return providers.ExecResult{}, providers.Errorf(providers.ErrUnsupported, Name, "exec", "Daytona runs commands as the sandbox's user %q, not %q (choose it when the sandbox is created)", k.user, req.User)
		}
	}
	if req.Background {
		return p.background(ctx, id, req)
	}
	start := time.Now()
	stdin := "/dev/null"
	if req.Stdin != nil {
		// Daytona's toolbox has no stdin stream that ends: the input is
		// uploaded to a file the command reads, removed afterwards.
		stdin = "/tmp/.sandbox-stdin-" + randomHex(8)
		if err := p.WriteFile(ctx, id, stdin, req.Stdin, 0o600); err != nil {
			return providers.ExecResult{}, fmt.Errorf("daytona: exec: send stdin: %w", err)
		}
		defer p.removeQuietly(ctx, id, stdin)
	}
	command, err := shellCommand(req, stdin, "")
	if err != nil {
		return providers.ExecResult{}, err
	}
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	session := "sandbox-exec-" + randomHex(8)
	sessURL := base + "/process/session/" + url.PathEscape(session)
	if err := p.call(runCtx, "exec: create session", http.MethodPost, base+"/process/session", wire.CreateSession{SessionID: session}, nil, false); err != nil {
		return providers.ExecResult{}, p.execErr(ctx, req, err)
	}
	// Deleting the session ends its shell and what runs in it.
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = p.call(dctx, "exec: delete session", http.MethodDelete, sessURL, nil, nil, true)
	}()
	var started wire.SessionExecuteResponse
	if err := p.call(runCtx, "exec", http.MethodPost, sessURL+"/exec", wire.SessionExecuteRequest{Command: command, RunAsync: true}, &started, false); err != nil {
		return providers.ExecResult{}, p.execErr(ctx, req, err)
	}
	if started.CmdID == "" {
		return providers.ExecResult{}, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the reply names no command")
	}
	cmdURL := sessURL + "/command/" + url.PathEscape(started.CmdID)
	if err := p.followLogs(runCtx, cmdURL, orDiscard(req.Stdout), orDiscard(req.Stderr)); err != nil {
		return providers.ExecResult{}, p.execErr(ctx, req, err)
	}
	code, err := p.exitCode(runCtx, cmdURL)
	if err != nil {
		return providers.ExecResult{}, p.execErr(ctx, req, err)
	}
	return providers.ExecResult{ExitCode: code, Duration: time.Since(start)}, nil
}

// execErr turns the end of the run's context into the contract's errors:
// the caller's cancellation as it is, the timeout as ErrTimeout.
func (p *Provider) execErr(ctx context.Context, req providers.ExecRequest, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if req.Timeout > 0 && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return &providers.Error{Kind: providers.ErrTimeout, Provider: Name, Op: "exec", Msg: fmt.Sprintf("the command ran longer than %v and was ended", req.Timeout)}
	}
	return err
}

// exitCode reads the command's exit code, which the toolbox records as the
// log stream ends; it asks again for a short while if it is not there yet.
func (p *Provider) exitCode(ctx context.Context, cmdURL string) (int, error) {
	delay := 20 * time.Millisecond
	for range 50 {
		var cmd wire.Command
		if err := p.call(ctx, "exec: exit code", http.MethodGet, cmdURL, nil, &cmd, true); err != nil {
			return 0, err
		}
		if cmd.ExitCode != nil {
			return *cmd.ExitCode, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
	return 0, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the output ended but the command reports no exit code")
}

// followLogs copies a session command's output, demultiplexed, until the
// toolbox closes the stream at the command's end.
func (p *Provider) followLogs(ctx context.Context, cmdURL string, stdout, stderr io.Writer) error {
	wsURL := "ws" + strings.TrimPrefix(cmdURL, "http") + "/logs?follow=true"
	conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: p.client, HTTPHeader: p.headers()})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return p.statusError(&httpapi.Request{Op: "exec: follow output"}, resp)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "exec: follow output", Err: err, Msg: err.Error()}
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	d := &wire.Demuxer{Stdout: stdout, Stderr: stderr}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return d.Flush()
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "exec: follow output", Err: err, Msg: "output stream cut: " + err.Error()}
		}
		if _, err := d.Write(data); err != nil {
			return err
		}
	}
}

// shellCommand is the line the session's shell runs: the working
// directory, the environment and the command (an argv, or a shell string
// through /bin/sh -c), its stdin read from the file stdin. The command
// runs through a small /bin/sh that first runs prelude (when not empty)
// and then becomes the command; it gets the session's stderr as fd 3 and
// moves it back to fd 2, while the session shell's own stderr is
// /dev/null meanwhile, so that the shell's note about a command killed by
// a signal ("Terminated") is not taken for the command's output.
func shellCommand(req providers.ExecRequest, stdin, prelude string) (string, error) {
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return "", fmt.Errorf("daytona: exec: exactly one of Argv and Shell must be set: %w", providers.ErrInvalid)
	}
	var b strings.Builder
	cwd := req.Cwd
	if cwd == "" {
		cwd = providers.DefaultWorkdir
	}
	b.WriteString("exec 3>&2; cd " + shellQuote(cwd) + " && { ")
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		if !validEnvName(k) {
			return "", fmt.Errorf("daytona: exec: environment name %q: %w", k, providers.ErrInvalid)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + shellQuote(req.Env[k]) + " ")
	}
	// The command is written out, not passed as "$@", so that an
	// approval gate in front of the sandbox (an emulator's) reads it.
	quoted := make([]string, 0, 4)
	for _, a := range commandArgv(req) {
		quoted = append(quoted, shellQuote(a))
	}
	b.WriteString("/bin/sh -c " + shellQuote("exec 2>&3 3>&-; "+prelude+"exec "+strings.Join(quoted, " ")))
	b.WriteString(" < " + shellQuote(stdin) + "; } 2>/dev/null")
	return b.String(), nil
}

// commandArgv is the argv that runs req: its Argv, or its Shell through
// /bin/sh -c.
func commandArgv(req providers.ExecRequest) []string {
	if req.Shell != "" {
		return []string{"/bin/sh", "-c", req.Shell}
	}
	return req.Argv
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validEnvName reports a shell variable name.
func validEnvName(k string) bool {
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
