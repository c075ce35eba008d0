package providertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// machineWait bounds how long a machine check waits for something a
// command running beside it does.
const machineWait = 15 * time.Second

// tickerSteps is how many times a ticker writes its counter, one step
// every tickerPeriod: 20 seconds, long past the checks that watch it.
const (
	tickerSteps  = 200
	tickerPeriod = "0.1"
)

// machineVar is the variable the machine checks export in a session.
const machineVar = "PROVIDERTEST_MACHINE"

// machineChecks checks what makes a sandbox a machine: a command started
// in the background outlives the call that started it and keeps working
// while the next calls run; a file written under /tmp by one call is
// there for the next and for a call already running; a session keeps its
// directory and exported variables among the other calls. With
// providers.Machine it also checks Processes, Signal and Logs, the
// methods on a missing sandbox, and Stop and Start.
func (s *suite) machineChecks(t *testing.T) {
	m, isMachine := s.p.(providers.Machine)
	if !isMachine && !s.machine {
		t.Logf("provider neither implements providers.Machine nor declares Options.Machine: its sandboxes need not be machines")
		return
	}
	id := s.create(t, "machine").ID

	// The checks below share the sandbox and run at once; stop-start,
	// which stops it, waits for them.
	t.Run("running", func(t *testing.T) {
		t.Run("background-survives", func(t *testing.T) {
			t.Parallel()
			s.backgroundSurvives(t, id, m)
		})
		t.Run("tmp-persists", func(t *testing.T) {
			t.Parallel()
			s.tmpPersists(t, id)
		})
		t.Run("concurrent-read", func(t *testing.T) {
			t.Parallel()
			s.concurrentRead(t, id)
		})
		t.Run("session-state", func(t *testing.T) {
			t.Parallel()
			s.sessionState(t, id)
		})
		if isMachine {
			t.Run("processes-signal-logs", func(t *testing.T) {
				t.Parallel()
				s.processesSignalLogs(t, id, m)
			})
		}
	})
	if !isMachine {
		t.Logf("provider does not implement providers.Machine: Processes, Signal, Logs, Start and Stop are not checked")
		return
	}
	t.Run("missing-id", func(t *testing.T) { s.machineMissingID(t, m) })
	t.Run("stop-start", func(t *testing.T) { s.stopStart(t, id, m) })
}

// tickerScript is a command in the fake's vocabulary that writes 1, 2, 3…
// into path, one step every tickerPeriod.
func tickerScript(path string) string {
	steps := make([]string, 0, 2*tickerSteps)
	for i := 1; i <= tickerSteps; i++ {
		steps = append(steps, fmt.Sprintf("echo %d > %s", i, path), "sleep "+tickerPeriod)
	}
	return strings.Join(steps, "; ")
}

// tickerShellLoop is the same ticker as a shell loop sent to the
// background with `&`, for providers without ExecRequest.Background.
func tickerShellLoop(path string) string {
	return fmt.Sprintf("(i=0; while [ $i -lt %d ]; do i=$((i+1)); echo $i > %s; sleep %s; done) </dev/null >/dev/null 2>&1 &", tickerSteps, path, tickerPeriod)
}

// startTicker starts a ticker writing into path in the background and
// returns its pid (0 without providers.Machine). The call that starts it
// must return at once.
func (s *suite) startTicker(t *testing.T, id, path string) int {
	t.Helper()
	_, background := s.p.(providers.Machine)
	req := providers.ExecRequest{Shell: tickerShellLoop(path)}
	if background {
		req = providers.ExecRequest{Shell: tickerScript(path), Background: true}
	}
	what := "Exec(a ticker with `&`)"
	if background {
		what = "Exec(a ticker, Background)"
	}
	out := s.exec(t, id, req)
	if out.err != nil || out.res.ExitCode != 0 {
		t.Fatalf("%s writing %s: exit %d, err %v, stderr %q", what, path, out.res.ExitCode, out.err, out.stderr)
	}
	if out.elapsed > 10*time.Second {
		t.Errorf("%s returned after %v: the call must not wait for the command it left running (it runs for %ds)", what, out.elapsed, tickerSteps/10)
	}
	if background && out.res.PID <= 0 {
		t.Fatalf("%s: ExecResult.PID = %d, want the pid of the background command", what, out.res.PID)
	}
	return out.res.PID
}

// counter reads the number a ticker wrote into path.
func (s *suite) counter(t *testing.T, id, path string) (int, error) {
	t.Helper()
	b, err := s.readAll(t, id, path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// counterAdvances waits for the ticker writing into path to write a
// number and then a larger one, and returns the last it read: the ticker
// runs after the call that started it returned.
func (s *suite) counterAdvances(t *testing.T, id, path string) int {
	t.Helper()
	deadline := time.Now().Add(machineWait)
	first := -1
	var last error
	for time.Now().Before(deadline) {
		n, err := s.counter(t, id, path)
		switch {
		case err != nil:
			// Missing yet, or caught between the truncation and the
			// write of `echo N > FILE`.
			last = err
		case first < 0:
			first = n
		case n > first:
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	if first < 0 {
		t.Fatalf("the background command never wrote %s within %v (last read: %v): it did not survive the call that started it", path, machineWait, last)
	}
	t.Fatalf("the counter in %s stayed at %d for %v: the background command stopped when the call that started it returned", path, first, machineWait)
	return 0
}

// counterStill fails t if the counter in path still changes: its ticker
// must have ended.
func (s *suite) counterStill(t *testing.T, id, path, why string) {
	t.Helper()
	before, errBefore := s.counter(t, id, path)
	time.Sleep(600 * time.Millisecond)
	after, errAfter := s.counter(t, id, path)
	if errBefore == nil && errAfter == nil && after != before {
		t.Errorf("the counter in %s went from %d to %d after %s: the command must have ended", path, before, after, why)
	}
}

// backgroundSurvives checks that a command left running by one call
// keeps running and is seen by the next calls.
func (s *suite) backgroundSurvives(t *testing.T, id string, m providers.Machine) {
	path := "/workspace/pt-ticker-" + s.run
	pid := s.startTicker(t, id, path)
	n := s.counterAdvances(t, id, path)

	// The next command sees what the ticker writes.
	out := s.exec(t, id, providers.ExecRequest{Argv: []string{"cat", path}})
	got, err := strconv.Atoi(strings.TrimSpace(out.stdout))
	if out.err != nil || out.res.ExitCode != 0 || err != nil {
		// Caught between truncation and write: once more.
		out = s.exec(t, id, providers.ExecRequest{Argv: []string{"cat", path}})
		got, err = strconv.Atoi(strings.TrimSpace(out.stdout))
	}
	if out.err != nil || err != nil || got < n {
		t.Errorf("Exec(cat %s) after the ticker wrote %d: stdout %q, exit %d, err %v; want a number of at least %d", path, n, out.stdout, out.res.ExitCode, out.err, n)
	}
	if m == nil {
		return
	}
	procs := s.processes(t, id, m)
	i := slices.IndexFunc(procs, func(p providers.Process) bool { return p.PID == pid })
	if i < 0 {
		t.Fatalf("Processes() = %v: the running background command %d is not listed", pids(procs), pid)
	}
	if p := procs[i]; !p.Background || p.ExitCode != nil || p.State == "exited" {
		t.Errorf("Processes(): background command %d listed as %+v; want Background set, no exit code, a running state", pid, p)
	}
	s.signal(t, id, m, pid, syscall.SIGTERM)
	if _, code := s.followLogs(t, id, m, pid); code == nil || *code != 128+int(syscall.SIGTERM) {
		t.Errorf("Logs(%d, follow) after SIGTERM: exit status %s, want %d", pid, codeString(code), 128+int(syscall.SIGTERM))
	}
	s.counterStill(t, id, path, "the background command was sent SIGTERM and Logs reported its end")
}

// tmpPersists checks that a file written under /tmp by one call is read
// by the next, whichever calls write and read it.
func (s *suite) tmpPersists(t *testing.T, id string) {
	writers := []struct {
		name  string
		write func(t *testing.T, path, data string)
	}{
		{"exec", func(t *testing.T, path, data string) {
			req := providers.ExecRequest{Shell: "echo " + data + " > " + path}
			if out := s.exec(t, id, req); out.err != nil || out.res.ExitCode != 0 {
				t.Fatalf("Exec(%s): exit %d, err %v, stderr %q", describe(req), out.res.ExitCode, out.err, out.stderr)
			}
		}},
		{"WriteFile", func(t *testing.T, path, data string) { s.mustWrite(t, id, path, []byte(data+"\n")) }},
	}
	readers := []struct {
		name string
		read func(t *testing.T, path string) (string, error)
	}{
		{"exec", func(t *testing.T, path string) (string, error) {
			out := s.exec(t, id, providers.ExecRequest{Argv: []string{"cat", path}})
			if out.err == nil && out.res.ExitCode != 0 {
				return out.stdout, fmt.Errorf("exit %d, stderr %q", out.res.ExitCode, out.stderr)
			}
			return out.stdout, out.err
		}},
		{"ReadFile", func(t *testing.T, path string) (string, error) {
			b, err := s.readAll(t, id, path)
			return string(b), err
		}},
	}
	for _, w := range writers {
		for _, r := range readers {
			t.Run(w.name+"-then-"+r.name, func(t *testing.T) {
				t.Parallel()
				path := "/tmp/pt-tmp-" + s.run + "-" + w.name + "-" + r.name
				data := "tmp-" + w.name + "-" + r.name
				w.write(t, path, data)
				got, err := r.read(t, path)
				if err != nil || got != data+"\n" {
					t.Errorf("%s of %s after %s wrote it: %q, err %v; want %q (a sandbox's /tmp stays from one call to the next)", r.name, path, w.name, got, err, data+"\n")
				}
			})
		}
	}
}

// readerSteps is how many times the reader of concurrentRead tries the
// file, every readerPeriod: 2 seconds for the write to happen.
const (
	readerSteps  = 10
	readerPeriod = "0.2"
)

// concurrentRead checks that a file written by one call is read by a
// call that was already running: a reader starts, says so, and tries the
// file every readerPeriod; the file is written once it said so.
func (s *suite) concurrentRead(t *testing.T, id string) {
	writers := []struct {
		name  string
		write func(t *testing.T, path, data string) error
	}{
		{"exec", func(t *testing.T, path, data string) error {
			out := s.exec(t, id, providers.ExecRequest{Shell: "echo " + data + " > " + path})
			if out.err == nil && out.res.ExitCode != 0 {
				return fmt.Errorf("exit %d, stderr %q", out.res.ExitCode, out.stderr)
			}
			return out.err
		}},
		{"WriteFile", func(t *testing.T, path, data string) error {
			ctx, cancel := callCtx(t)
			defer cancel()
			return s.p.WriteFile(ctx, id, path, strings.NewReader(data+"\n"), 0o644)
		}},
	}
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			// A write slower than the reader's whole life (a loaded
			// machine) proves nothing either way: the round is tried
			// again with a reader four times as long.
			steps := readerSteps
			for attempt := 1; ; attempt++ {
				if s.concurrentRound(t, id, w.name, w.write, steps, attempt) || attempt == 3 {
					return
				}
				steps *= 4
			}
		})
	}
}

// concurrentRound is one round of concurrentRead: a reader of steps tries
// runs while write writes the file. It returns false when the reader
// ended before the write did, and a last attempt fails then.
func (s *suite) concurrentRound(t *testing.T, id, name string, write func(t *testing.T, path, data string) error, steps, attempt int) bool {
	t.Helper()
	path := fmt.Sprintf("/tmp/pt-concurrent-%s-%s-%d", s.run, name, attempt)
	data := "written-while-read-" + name
	cmds := []string{"echo ready"}
	for range steps {
		cmds = append(cmds, "sleep "+readerPeriod, "cat "+path)
	}
	stdout := newSignalWriter()
	req := providers.ExecRequest{Shell: strings.Join(cmds, "; "), Stdout: stdout, Stderr: &Buffer{}}
	done := make(chan execOut, 1)
	go func() { done <- s.exec(t, id, req) }()
	select {
	case <-stdout.fired:
	case out := <-done:
		t.Fatalf("the reader ended before it printed anything: stdout %q, exit %d, err %v", stdout.String(), out.res.ExitCode, out.err)
	case <-time.After(machineWait):
		t.Fatalf("the reader printed nothing within %v", machineWait)
	}
	start := time.Now()
	werr := write(t, path, data)
	took := time.Since(start)
	select {
	case out := <-done:
		if attempt < 3 {
			t.Logf("the reader ended before %s had written %s (it took %v); trying with a longer reader", name, path, took)
			return false
		}
		t.Fatalf("the reader ended (stdout %q, err %v) before %s had written %s (it took %v): the calls did not overlap", stdout.String(), out.err, name, path, took)
	default:
	}
	if werr != nil {
		t.Fatalf("%s of %s while a reader runs: %v", name, path, werr)
	}
	out := <-done
	if out.err != nil {
		t.Fatalf("the reader: err %v, stdout %q", out.err, stdout.String())
	}
	got := stdout.String()
	if !strings.HasPrefix(got, "ready\n") || !strings.HasSuffix(got, "\n"+data+"\n") {
		t.Errorf("a reader running while %s wrote %s printed %q; want \"ready\" and then the file's %q (a running call sees what another writes)", name, path, got, data)
	}
	if out.res.ExitCode != 0 {
		t.Errorf("the reader's last `cat %s` exited %d (stderr %q), want 0", path, out.res.ExitCode, out.stderr)
	}
	return true
}

// sessionState checks that a session keeps its directory and exported
// variables while other calls write the files it uses.
func (s *suite) sessionState(t *testing.T, id string) {
	name := "providertest-machine-" + s.run
	dir := "/tmp/pt-session-" + s.run + "/d"
	s.mustWrite(t, id, dir+"/f", []byte("written-before\n"))
	run := func(t *testing.T, shell string) execOut {
		t.Helper()
		req, err := providers.ForProvider(s.p, providers.ExecRequest{Session: name, Shell: shell})
		if err != nil {
			t.Fatalf("ForProvider(session %s, %q): %v", name, shell, err)
		}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 {
			t.Fatalf("Exec(session %s, %q): exit %d, err %v, stderr %q", name, shell, out.res.ExitCode, out.err, out.stderr)
		}
		return out
	}
	run(t, "cd "+dir+"; export "+machineVar+"=first")
	// Other calls, outside the session, in between.
	if out := s.exec(t, id, providers.ExecRequest{Shell: "echo written-between > " + dir + "/g"}); out.err != nil || out.res.ExitCode != 0 {
		t.Fatalf("Exec(echo > %s/g) outside the session: exit %d, err %v", dir, out.res.ExitCode, out.err)
	}
	if plain := s.exec(t, id, providers.ExecRequest{Shell: "pwd; env"}); strings.Contains(plain.stdout, machineVar+"=") {
		t.Errorf("Exec(pwd; env) outside session %s: stdout %q has %s, which only the session exported", name, plain.stdout, machineVar)
	}
	out := run(t, "pwd; cat f; cat g; env")
	lines := strings.Split(out.stdout, "\n")
	if len(lines) < 3 || lines[0] != dir || lines[1] != "written-before" || lines[2] != "written-between" {
		t.Errorf("session %s: `pwd; cat f; cat g` printed %q; want %s, then the file written before and the one written between its commands", name, out.stdout, dir)
	}
	if got := envValues(out.stdout, machineVar); len(got) != 1 || got[0] != "first" {
		t.Errorf("session %s: %s = %q, want [\"first\"] as the previous command exported", name, machineVar, got)
	}
	run(t, "export "+machineVar+"=second; cd "+providers.DefaultWorkdir)
	out = run(t, "pwd; env")
	if !strings.HasPrefix(out.stdout, providers.DefaultWorkdir+"\n") {
		t.Errorf("session %s after `cd %s`: `pwd` printed %q", name, providers.DefaultWorkdir, out.stdout)
	}
	if got := envValues(out.stdout, machineVar); len(got) != 1 || got[0] != "second" {
		t.Errorf("session %s: %s = %q after it exported \"second\"", name, machineVar, got)
	}
}

// processesSignalLogs checks Processes, Signal and Logs on commands
// started with ExecRequest.Background.
func (s *suite) processesSignalLogs(t *testing.T, id string, m providers.Machine) {
	marker := "out-" + s.run
	req := providers.ExecRequest{Shell: "echo " + marker + "; sleep 30", Background: true}
	out := s.exec(t, id, req)
	if out.err != nil || out.res.PID <= 0 {
		t.Fatalf("Exec(%s, Background): PID %d, err %v; want a pid", describe(req), out.res.PID, out.err)
	}
	if out.elapsed > 10*time.Second {
		t.Errorf("Exec(%s, Background) returned after %v, want at once", describe(req), out.elapsed)
	}
	pid := out.res.PID

	if procs := s.processes(t, id, m); !slices.ContainsFunc(procs, func(p providers.Process) bool {
		return p.PID == pid && p.Background && p.ExitCode == nil
	}) {
		t.Errorf("Processes() = %+v: no running background command %d", procs, pid)
	}
	// The output is there while the command runs, without an exit status.
	deadline := time.Now().Add(machineWait)
	for {
		ctx, cancel := callCtx(t)
		var b Buffer
		code, err := m.Logs(ctx, id, pid, false, &b)
		cancel()
		if err != nil {
			t.Fatalf("Logs(%d) of a running command: %v", pid, err)
		}
		if code != nil {
			t.Errorf("Logs(%d) of a command that sleeps 30s: exit status %d, want none while it runs", pid, *code)
		}
		if b.String() == marker+"\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Logs(%d) = %q after %v, want %q", pid, b.String(), machineWait, marker+"\n")
		}
		time.Sleep(50 * time.Millisecond)
	}

	s.signal(t, id, m, pid, syscall.SIGTERM)
	logs, code := s.followLogs(t, id, m, pid)
	if code == nil || *code != 128+int(syscall.SIGTERM) {
		t.Errorf("Logs(%d, follow) after SIGTERM: exit status %s, want %d", pid, codeString(code), 128+int(syscall.SIGTERM))
	}
	if logs != marker+"\n" {
		t.Errorf("Logs(%d, follow) = %q, want %q", pid, logs, marker+"\n")
	}
	for _, p := range s.processes(t, id, m) {
		if p.PID == pid && (p.ExitCode == nil || *p.ExitCode != 128+int(syscall.SIGTERM)) {
			t.Errorf("Processes() after the command ended lists it as %+v; want it gone or exited with %d", p, 128+int(syscall.SIGTERM))
		}
	}
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := m.Signal(ctx, id, pid, syscall.SIGTERM); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Signal(%d) of a command that ended: err = %v, want one matching ErrNotFound", pid, err)
	}

	ends := []struct {
		name string
		req  providers.ExecRequest
		logs string
		code int
	}{
		{"exit-7", providers.ExecRequest{Shell: "echo bye; exit 7", Background: true}, "bye\n", 7},
		{"argv", providers.ExecRequest{Argv: []string{"echo", "argv-" + s.run}, Background: true}, "argv-" + s.run + "\n", 0},
	}
	for _, tc := range ends {
		t.Run(tc.name, func(t *testing.T) {
			out := s.exec(t, id, tc.req)
			if out.err != nil || out.res.PID <= 0 {
				t.Fatalf("Exec(%s, Background): PID %d, err %v", describe(tc.req), out.res.PID, out.err)
			}
			logs, code := s.followLogs(t, id, m, out.res.PID)
			if code == nil || *code != tc.code || logs != tc.logs {
				t.Errorf("Logs(%d, follow) of %s: %q, exit status %s; want %q and %d", out.res.PID, describe(tc.req), logs, codeString(code), tc.logs, tc.code)
			}
		})
	}
}

// machineMissingID checks that the methods of providers.Machine report
// ErrNotFound for a sandbox that does not exist.
func (s *suite) machineMissingID(t *testing.T, m providers.Machine) {
	const missing = "providertest-no-such-sandbox"
	ops := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Start", func(ctx context.Context) error { return m.Start(ctx, missing) }},
		{"Stop", func(ctx context.Context) error { return m.Stop(ctx, missing) }},
		{"Processes", func(ctx context.Context) error { _, err := m.Processes(ctx, missing); return err }},
		{"Signal", func(ctx context.Context) error { return m.Signal(ctx, missing, 2, syscall.SIGTERM) }},
		{"Logs", func(ctx context.Context) error { _, err := m.Logs(ctx, missing, 2, false, &Buffer{}); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := callCtx(t)
			defer cancel()
			if err := op.call(ctx); !errors.Is(err, providers.ErrNotFound) {
				t.Errorf("%s on missing sandbox %q: err = %v, want one matching ErrNotFound", op.name, missing, err)
			}
		})
	}
}

// stopStart checks Stop and Start: a stop ends the sandbox's processes
// and empties /tmp (sessions with it, as after a reboot), keeps the other
// files, and the next operation, or Start, starts the sandbox again.
func (s *suite) stopStart(t *testing.T, id string, m providers.Machine) {
	keep := "/workspace/pt-keep-" + s.run
	gone := "/tmp/pt-gone-" + s.run
	ticker := "/workspace/pt-stop-ticker-" + s.run
	session := "providertest-stop-" + s.run
	s.mustWrite(t, id, keep, []byte("kept\n"))
	s.mustWrite(t, id, gone, []byte("gone\n"))
	pid := s.startTicker(t, id, ticker)
	s.counterAdvances(t, id, ticker)
	sreq, err := providers.ForProvider(s.p, providers.ExecRequest{Session: session, Shell: "cd /tmp; export " + machineVar + "=before-stop"})
	if err != nil {
		t.Fatalf("ForProvider(session %s): %v", session, err)
	}
	if out := s.exec(t, id, sreq); out.err != nil || out.res.ExitCode != 0 {
		t.Fatalf("Exec(session %s, cd /tmp; export): exit %d, err %v", session, out.res.ExitCode, out.err)
	}

	s.stop(t, id, m)
	s.wantState(t, id, providers.StateStopped, "after Stop")
	if procs := s.processes(t, id, m); len(procs) != 0 {
		t.Errorf("Processes() of a stopped sandbox = %+v, want none", procs)
	}
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := m.Signal(ctx, id, pid, syscall.SIGTERM); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Signal(%d) in a stopped sandbox: err = %v, want one matching ErrNotFound", pid, err)
	}
	s.stop(t, id, m) // stopping a stopped sandbox does nothing
	s.wantState(t, id, providers.StateStopped, "after a second Stop")

	for range 2 { // starting a running sandbox does nothing
		if err := m.Start(ctx, id); err != nil {
			t.Fatalf("Start(%s): %v", id, err)
		}
		s.wantState(t, id, providers.StateRunning, "after Start")
	}
	s.counterStill(t, id, ticker, "the sandbox stopped")
	for _, p := range s.processes(t, id, m) {
		// Nothing was started in the background since the start.
		if p.Background && p.ExitCode == nil {
			t.Errorf("Processes() after Stop and Start lists %+v as a running background command; the ticker (pid %d) must have ended with the stop", p, pid)
		}
	}
	if got, err := s.readAll(t, id, keep); err != nil || string(got) != "kept\n" {
		t.Errorf("ReadFile(%s) after Stop and Start = %q, %v; want the file kept", keep, got, err)
	}
	if out := s.exec(t, id, providers.ExecRequest{Argv: []string{"cat", keep}}); out.err != nil || out.stdout != "kept\n" {
		t.Errorf("Exec(cat %s) after Stop and Start: stdout %q, err %v; want the file kept", keep, out.stdout, out.err)
	}
	if _, err := s.readAll(t, id, gone); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("ReadFile(%s) after Stop and Start: err = %v, want ErrNotFound (a stop empties /tmp, as `sandbox stop` documents)", gone, err)
	}
	sreq, _ = providers.ForProvider(s.p, providers.ExecRequest{Session: session, Shell: "pwd; env"})
	out := s.exec(t, id, sreq)
	if out.err != nil || !strings.HasPrefix(out.stdout, providers.DefaultWorkdir+"\n") || len(envValues(out.stdout, machineVar)) != 0 {
		t.Errorf("session %s after Stop and Start: stdout %q, err %v; want it to start afresh in %s without %s (its state was in /tmp)", session, out.stdout, out.err, providers.DefaultWorkdir, machineVar)
	}

	// Any operation starts a stopped sandbox.
	s.stop(t, id, m)
	if out := s.exec(t, id, providers.ExecRequest{Argv: []string{"cat", keep}}); out.err != nil || out.res.ExitCode != 0 || out.stdout != "kept\n" {
		t.Errorf("Exec(cat %s) on a stopped sandbox: stdout %q, exit %d, err %v; want it started again with its files", keep, out.stdout, out.res.ExitCode, out.err)
	}
	s.wantState(t, id, providers.StateRunning, "after an Exec on the stopped sandbox")
	s.stop(t, id, m)
	s.mustWrite(t, id, gone, []byte("again\n"))
	s.wantState(t, id, providers.StateRunning, "after a WriteFile on the stopped sandbox")
	if got, err := s.readAll(t, id, gone); err != nil || string(got) != "again\n" {
		t.Errorf("ReadFile(%s) after writing it on the stopped sandbox = %q, %v", gone, got, err)
	}
}

// processes lists the processes of id or fails t.
func (s *suite) processes(t *testing.T, id string, m providers.Machine) []providers.Process {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	procs, err := m.Processes(ctx, id)
	if err != nil {
		t.Fatalf("Processes(%s): %v", id, err)
	}
	return procs
}

// signal sends sig to pid or fails t.
func (s *suite) signal(t *testing.T, id string, m providers.Machine, pid int, sig syscall.Signal) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := m.Signal(ctx, id, pid, sig); err != nil {
		t.Fatalf("Signal(%d, %v): %v", pid, sig, err)
	}
}

// stop stops id or fails t.
func (s *suite) stop(t *testing.T, id string, m providers.Machine) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := m.Stop(ctx, id); err != nil {
		t.Fatalf("Stop(%s): %v", id, err)
	}
}

// followLogs follows the log of pid until its command ends and returns
// the log and the exit status.
func (s *suite) followLogs(t *testing.T, id string, m providers.Machine, pid int) (string, *int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*machineWait)
	defer cancel()
	var b Buffer
	code, err := m.Logs(ctx, id, pid, true, &b)
	if err != nil {
		t.Fatalf("Logs(%d, follow): %v (so far %q)", pid, err, b.String())
	}
	return b.String(), code
}

// wantState fails t unless Get reports id in state want.
func (s *suite) wantState(t *testing.T, id string, want providers.State, when string) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	info, err := s.p.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%s) %s: %v", id, when, err)
	}
	if info.State != want {
		t.Errorf("Get(%s).State %s = %q, want %q", id, when, info.State, want)
	}
}

// pids lists the pids of procs.
func pids(procs []providers.Process) []int {
	out := make([]int, len(procs))
	for i, p := range procs {
		out[i] = p.PID
	}
	return out
}

// codeString shows an exit status that may be missing.
func codeString(code *int) string {
	if code == nil {
		return "none"
	}
	return strconv.Itoa(*code)
}
