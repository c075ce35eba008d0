//go:build linux

package local

import (
	"cmp"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Exec runs a command in the sandbox and streams its output as produced.
func (p *Provider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	return p.exec(ctx, id, req, nil)
}

// exec runs req; with a terminal (see pty.go) req's streams are its
// slave, which launched closes once the runner holds it.
func (p *Provider) exec(ctx context.Context, id string, req providers.ExecRequest, term *terminalRun) (providers.ExecResult, error) {
	start := time.Now()
	m, dir, err := p.load(id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	cfg, err := p.execConfig(m, req)
	if err != nil {
		return providers.ExecResult{}, err
	}
	shared, err := sharedNetwork(m.Network, req.Network)
	if err != nil {
		return providers.ExecResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, ctxErr("exec in "+id, ctx, 0)
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	stdio := initStdio{stdin: req.Stdin, stdout: req.Stdout, stderr: req.Stderr}
	if req.Background {
		if p.weak {
			return providers.ExecResult{}, providers.Errorf(providers.ErrUnsupported, Name, "exec", "background commands need the sandbox's machine, which the weak mode (%s=1) has not", weakEnvVar)
		}
		cfg.Background = true
		stdio = initStdio{}
	}
	if term != nil {
		cfg.TTY = true
	}
	pr, err := p.launch(dir, id, cfg, machineRequest{Shared: shared, Background: req.Background, User: cfg.User}, stdio)
	if term != nil {
		term.launched()
	}
	if err != nil {
		return providers.ExecResult{}, err
	}
	// The machine the command runs on, to tell a stop from a crash if
	// the command never reports.
	ran, _ := readMachineRecord(dir)
	if p.weak {
		pr.closeCtl(false)
	}
	if pr.stdinW != nil {
		go feed(pr.stdinW, req.Stdin)
	}
	stop := pr.watch(runCtx, nil)
	last, got := pr.finish()
	stop()
	if got && shared && last.Exit != nil {
		if note := landlockNote(last.Landlock); note != "" {
			p.notes.add(id, note)
		}
	}
	res := providers.ExecResult{Duration: time.Since(start)}
	switch {
	case got && last.PID != 0:
		res.PID = last.PID
		return res, nil
	case runCtx.Err() != nil:
		// The command's process group was killed (its status says
		// so); the machine lives on.
		if ctx.Err() == nil {
			return res, ctxErr("exec in "+id, runCtx, req.Timeout)
		}
		return res, ctxErr("exec in "+id, ctx, 0)
	case got && last.Exit != nil:
		res.ExitCode = *last.Exit
		return res, nil
	case got && last.Setup:
		return res, setupErr(id, last)
	case got && last.Err != "":
		return res, errorOf("exec in "+id, last)
	case !p.weak && stoppedSince(dir, ran):
		return res, providers.Errorf(providers.ErrUnavailable, Name, "exec in "+id, "the sandbox was stopped before the command reported its end (or its pid); try again")
	}
	return res, pr.initDied()
}

// stoppedSince reports whether the machine ran was stopped (by Stop, an
// auto-stop or Delete) rather than killed: a stop unlinks the machine's
// record first, while a killed machine leaves it for the next start to
// find (which then marks the crash). No record at all once the command
// started means that the machine was being stopped already.
func stoppedSince(dir string, ran machineRecord) bool {
	if _, err := os.Stat(filepath.Join(dir, crashedFile)); err == nil {
		return false
	}
	now, err := readMachineRecord(dir)
	return ran.pid == 0 || err != nil || now != ran
}

// feed copies the caller's stdin into the command's. It may outlive Exec
// while blocked reading r; its next write then fails and it returns.
func feed(w io.WriteCloser, r io.Reader) {
	copyOut(w, r)
	w.Close()
}

// sharedNetwork resolves the network mode of one command.
func sharedNetwork(sandbox, req providers.Network) (bool, error) {
	mode := req
	if mode == providers.NetworkDefault {
		mode = sandbox
	}
	switch mode {
	case providers.NetworkOn:
		return true, nil
	case providers.NetworkOff, providers.NetworkDefault:
		return false, nil
	}
	return false, providers.Errorf(providers.ErrInvalid, Name, "exec", "unknown network mode %q (want on or off)", mode)
}

// execConfig validates a request and turns it into the init's command.
func (p *Provider) execConfig(m meta, req providers.ExecRequest) (*initConfig, error) {
	var argv []string
	switch {
	case len(req.Argv) > 0 && req.Shell != "":
		return nil, providers.Errorf(providers.ErrInvalid, Name, "exec", "give either argv or a shell command, not both")
	case len(req.Argv) > 0:
		argv = slices.Clone(req.Argv)
	case req.Shell != "":
		argv = []string{"/bin/sh", "-c", req.Shell}
	default:
		return nil, providers.Errorf(providers.ErrInvalid, Name, "exec", "no command given")
	}
	cwd := providers.DefaultWorkdir
	if req.Cwd != "" {
		c, err := providers.CleanPath(req.Cwd, providers.DefaultWorkdir)
		if err != nil {
			return nil, &providers.Error{Kind: providers.ErrInvalid, Provider: Name, Op: "exec", Msg: "working directory: " + err.Error(), Err: err}
		}
		cwd = c
	}
	user := cmp.Or(req.User, m.User)
	if err := p.checkUser("exec", user); err != nil {
		return nil, err
	}
	_, homeSet := req.Env["HOME"]
	if _, ok := m.Env["HOME"]; ok {
		homeSet = true
	}
	return &initConfig{Mode: modeExec, Argv: argv, Cwd: cwd, Env: commandEnv(p.home, m.Env, req.Env), Resources: m.Resources, User: user, KeepHome: homeSet}, nil
}

// commandEnv is the whole environment of a command: PATH and HOME, then the
// sandbox's variables, then the request's. Nothing comes from the host.
func commandEnv(home string, layers ...map[string]string) []string {
	env := map[string]string{"PATH": defaultPath, "HOME": home}
	for _, l := range layers {
		maps.Copy(env, l)
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
