package fake

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"syscall"

	"github.com/agentbox/sandbox/providers"
)

// proc is one background command of a sandbox. out, code and signal are
// guarded by the provider's mutex; done is closed when it ended.
type proc struct {
	info   providers.Process
	out    bytes.Buffer
	cancel context.CancelFunc
	signal syscall.Signal
	done   chan struct{}
}

// procWriter appends a background command's output to its log.
type procWriter struct {
	p  *Provider
	pr *proc
}

// Write appends b to the log under the provider's lock.
func (w procWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.pr.out.Write(b)
}

// wake starts a stopped sandbox, as any operation on it does. The caller
// holds p.mu.
func (p *Provider) wake(b *box) {
	if b.info.State != providers.StateStopped {
		return
	}
	b.info.State = providers.StateRunning
	b.procs = nil
	b.lastPID = 0
}

// background starts req detached and returns its pid at once.
func (p *Provider) background(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, err
	}
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return providers.ExecResult{}, invalid("exec", "exactly one of Argv and Shell must be set")
	}
	p.mu.Lock()
	b, err := p.box(id, "exec")
	if err != nil {
		p.mu.Unlock()
		return providers.ExecResult{}, err
	}
	p.wake(b)
	if b.procs == nil {
		b.procs = map[int]*proc{}
		b.lastPID = 1
	}
	b.lastPID++
	argv := req.Argv
	if argv == nil {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	// The command outlives the call: it ends on its own, by Signal,
	// Stop or Delete, not with the caller's context.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pr := &proc{
		info: providers.Process{
			PID: b.lastPID, PPID: 1, Name: argv[0], Argv: slices.Clone(argv),
			State: "S", Started: p.now(), Background: true,
		},
		cancel: cancel,
		done:   make(chan struct{}),
	}
	b.procs[pr.info.PID] = pr
	p.mu.Unlock()

	fg := req
	fg.Background, fg.Stdin = false, nil
	fg.Stdout, fg.Stderr = procWriter{p, pr}, procWriter{p, pr}
	go func() {
		defer cancel()
		res, err := p.exec(rctx, id, fg, pr)
		p.mu.Lock()
		defer p.mu.Unlock()
		code := res.ExitCode
		switch {
		case pr.signal != 0:
			code = 128 + int(pr.signal)
		case err != nil && code == 0:
			code = 1
		}
		pr.info.State, pr.info.ExitCode = "exited", &code
		close(pr.done)
	}()
	return providers.ExecResult{PID: pr.info.PID}, nil
}

// Start starts a stopped sandbox; a running one is left alone.
func (p *Provider) Start(ctx context.Context, id string) error {
	if err := p.enter("Start"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "start")
	if err != nil {
		return err
	}
	p.wake(b)
	return nil
}

// Stop ends the background commands, empties /tmp, forgets the sessions
// (whose state a real sandbox keeps under /tmp, providers.SessionDir) and
// marks the sandbox stopped. Stopping a stopped sandbox does nothing.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := p.enter("Stop"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	b, err := p.box(id, "stop")
	if err != nil {
		p.mu.Unlock()
		return err
	}
	if b.info.State == providers.StateStopped {
		p.mu.Unlock()
		return nil
	}
	dones := p.killAll(b)
	for name := range b.files {
		if strings.HasPrefix(name, "/tmp/") {
			delete(b.files, name)
		}
	}
	b.sessions = nil
	b.info.State = providers.StateStopped
	p.mu.Unlock()
	for _, d := range dones {
		<-d
	}
	return nil
}

// killAll cancels every running background command of b with SIGKILL and
// returns the channels closed when they ended. The caller holds p.mu.
func (p *Provider) killAll(b *box) []chan struct{} {
	if b == nil {
		return nil
	}
	var dones []chan struct{}
	for _, pr := range b.procs {
		if pr.info.ExitCode == nil {
			if pr.signal == 0 {
				pr.signal = syscall.SIGKILL
			}
			pr.cancel()
			dones = append(dones, pr.done)
		}
	}
	return dones
}

// Processes lists the machine's init (PID 1) and the background commands,
// by pid; a stopped sandbox has none.
func (p *Provider) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	if err := p.enter("Processes"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "ps")
	if err != nil {
		return nil, err
	}
	if b.info.State == providers.StateStopped {
		return nil, nil
	}
	out := []providers.Process{{PID: 1, Name: "init", Argv: []string{"init"}, State: "S", Started: b.info.CreatedAt}}
	for _, pr := range b.procs {
		info := pr.info
		info.Argv = slices.Clone(info.Argv)
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b providers.Process) int { return a.PID - b.PID })
	return out, nil
}

// Signal cancels the running background command pid, which then exits
// with 128+sig. Signal 0 only checks that it runs.
func (p *Provider) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	if err := p.enter("Signal"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "kill")
	if err != nil {
		return err
	}
	pr, ok := b.procs[pid]
	if !ok || pr.info.ExitCode != nil || b.info.State == providers.StateStopped {
		return providers.Errorf(providers.ErrNotFound, Name, "kill", "no process with pid %d in sandbox %s", pid, id)
	}
	if sig != 0 && pr.signal == 0 {
		pr.signal = sig
		pr.cancel()
	}
	return nil
}

// Logs copies what the background command pid wrote into w; with follow
// it first waits for the command to end (or ctx). It returns the exit
// status once the command has ended.
func (p *Provider) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	if err := p.enter("Logs"); err != nil {
		return nil, err
	}
	p.mu.Lock()
	b, err := p.box(id, "logs")
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	pr, ok := b.procs[pid]
	p.mu.Unlock()
	if !ok {
		return nil, providers.Errorf(providers.ErrNotFound, Name, "logs", "no background command with pid %d in sandbox %s", pid, id)
	}
	if follow {
		select {
		case <-pr.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	data := bytes.Clone(pr.out.Bytes())
	var code *int
	if pr.info.ExitCode != nil {
		c := *pr.info.ExitCode
		code = &c
	}
	p.mu.Unlock()
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	return code, nil
}
