package engine

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// machineEngine is an engine on one fake provider with the given policy;
// it records the gate's events.
func machineEngine(t *testing.T, p providers.Provider, policy *approval.Policy, events *[]approval.Event) *Engine {
	t.Helper()
	reg := fake.Registration()
	reg.New = func(providers.Config) (providers.Provider, error) { return p, nil }
	return New(Options{
		Registry:        providers.NewRegistry(reg),
		StateDir:        t.TempDir(),
		DefaultProvider: "fake",
		Policy:          policy,
		Events: func(ev Event) {
			if ev.Gate != nil && events != nil {
				*events = append(*events, *ev.Gate)
			}
		},
	})
}

func TestMachineBackgroundPsLogsKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := fake.New()
	var events []approval.Event
	e := machineEngine(t, f, nil, &events)
	s, err := e.Open(ctx, OpenOptions{Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	res, err := s.Exec(ctx, providers.ExecRequest{Shell: "echo started; sleep 30", Background: true})
	if err != nil || res.PID < 2 {
		t.Fatalf("background exec: %+v, %v", res, err)
	}
	var bg *approval.Event
	for i := range events {
		if events[i].Request.Kind == approval.KindExec {
			bg = &events[i]
		}
	}
	if bg == nil || !bg.Request.Details.Background || bg.ExitCode != nil {
		t.Fatalf("the exec's gate event does not say it is a background command: %+v", bg)
	}

	procs, err := s.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		found = found || p.PID == res.PID && p.Background && p.ExitCode == nil
	}
	if !found {
		t.Fatalf("ps does not list the running command %d: %+v", res.PID, procs)
	}

	var out bytes.Buffer
	code, err := waitLogs(ctx, s, res.PID, "started\n", &out)
	if err != nil || code != nil {
		t.Fatalf("logs of a running command: %q, %v, %v", out.String(), code, err)
	}

	if err := s.Signal(ctx, res.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code, err = s.Logs(ctx, res.PID, true, &out)
	if err != nil || code == nil || *code != 128+int(syscall.SIGTERM) || out.String() != "started\n" {
		t.Fatalf("logs --follow after kill: %q, %v, %v", out.String(), code, err)
	}

	err = s.Signal(ctx, 999, syscall.SIGTERM)
	if !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("kill of an unknown pid: %v", err)
	}
	_, err = s.Logs(ctx, 999, false, &out)
	if !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("logs of an unknown pid: %v", err)
	}
}

// waitLogs reads the logs of pid until they are want (bounded).
func waitLogs(ctx context.Context, s *Session, pid int, want string, out *bytes.Buffer) (*int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out.Reset()
		code, err := s.Logs(ctx, pid, false, out)
		if err != nil || out.String() == want || time.Now().After(deadline) {
			return code, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMachineStopStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := fake.New()
	e := machineEngine(t, f, nil, nil)
	s, err := e.Open(ctx, OpenOptions{Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	id := s.ID()
	if err := s.Write(ctx, "/tmp/gone", bytes.NewReader([]byte("x")), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "/workspace/kept", bytes.NewReader([]byte("x")), false); err != nil {
		t.Fatal(err)
	}
	res, err := s.Exec(ctx, providers.ExecRequest{Argv: []string{"sleep", "30"}, Background: true})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		op   func() error
		want providers.State
	}{
		{"stop", func() error { return e.Stop(ctx, "", id) }, providers.StateStopped},
		{"stop again", func() error { return e.Stop(ctx, "", id) }, providers.StateStopped},
		{"start", func() error { return e.Start(ctx, "", id) }, providers.StateRunning},
		{"start again", func() error { return e.Start(ctx, "", id) }, providers.StateRunning},
	}
	for _, tt := range tests {
		if err := tt.op(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		info, err := e.Get(ctx, "", id)
		if err != nil || info.State != tt.want {
			t.Fatalf("%s: state %q, %v; want %q", tt.name, info.State, err, tt.want)
		}
	}
	// The stop ended the command and emptied /tmp; other files stay.
	if err := s.Signal(ctx, res.PID, syscall.SIGTERM); !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("kill after a stop: %v", err)
	}
	if _, err := s.gate.Stat(ctx, id, "/tmp/gone"); !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("/tmp survived the stop: %v", err)
	}
	if _, err := s.gate.Stat(ctx, id, "/workspace/kept"); err != nil {
		t.Fatalf("/workspace did not survive the stop: %v", err)
	}

	// An operation on a stopped sandbox starts it.
	if err := e.Stop(ctx, "", id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, providers.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Get(ctx, "", id); info.State != providers.StateRunning {
		t.Fatalf("exec did not start the stopped sandbox: %q", info.State)
	}
}

// TestLabelReusesStoppedMachine checks that a sandbox found by label is
// reused when its machine is stopped (the first operation starts it),
// instead of a new one being created beside it.
func TestLabelReusesStoppedMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := machineEngine(t, fake.New(), nil, nil)
	label := map[string]string{"project": "kept"}
	first, err := e.Open(ctx, OpenOptions{Label: label})
	if err != nil {
		t.Fatal(err)
	}
	id := first.ID()
	first.Close(ctx)
	if err := e.Stop(ctx, "", id); err != nil {
		t.Fatal(err)
	}
	again, err := e.Open(ctx, OpenOptions{Label: label})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if again.ID() != id {
		t.Fatalf("label found %s, want the stopped sandbox %s reused", again.ID(), id)
	}
	if _, err := again.Exec(ctx, providers.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Get(ctx, "", id); info.State != providers.StateRunning {
		t.Fatalf("the reused sandbox is %q after an exec, want running", info.State)
	}
}

func TestMachineUnknownSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := machineEngine(t, fake.New(), nil, nil)
	for name, op := range map[string]func() error{
		"stop":  func() error { return e.Stop(ctx, "", "fake-404") },
		"start": func() error { return e.Start(ctx, "", "fake-404") },
	} {
		var nf *NotFoundError
		if err := op(); !errors.As(err, &nf) || nf.ID != "fake-404" {
			t.Errorf("%s of an unknown sandbox: %v", name, err)
		}
	}
}

// plainProvider hides the fake's optional interfaces: a provider without
// machines.
type plainProvider struct{ providers.Provider }

func TestMachineUnsupported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := machineEngine(t, plainProvider{fake.New()}, nil, nil)
	if ok, err := e.Machines("", ""); ok || !errors.Is(err, providers.ErrUnsupported) {
		t.Fatalf("Machines: %v, %v", ok, err)
	}
	s, err := e.Open(ctx, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tests := []struct {
		name string
		op   func() error
	}{
		{"stop", func() error { return e.Stop(ctx, "", s.ID()) }},
		{"start", func() error { return e.Start(ctx, "", s.ID()) }},
		{"ps", func() error { _, err := s.Processes(ctx); return err }},
		{"kill", func() error { return s.Signal(ctx, 2, syscall.SIGTERM) }},
		{"logs", func() error { _, err := s.Logs(ctx, 2, false, &bytes.Buffer{}); return err }},
		{"exec --background", func() error {
			_, err := s.Exec(ctx, providers.ExecRequest{Argv: []string{"true"}, Background: true})
			return err
		}},
	}
	for _, tt := range tests {
		err := tt.op()
		if !errors.Is(err, providers.ErrUnsupported) || !bytes.Contains([]byte(err.Error()), []byte("provider fake has no machines")) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestMachineOperationsGated(t *testing.T) {
	t.Parallel()
	script := func(ctx context.Context) context.Context { return approval.WithSource(ctx, approval.SourceScript) }
	user := func(ctx context.Context) context.Context { return ctx }
	tests := []struct {
		name     string
		allow    []string
		deny     []string
		source   func(context.Context) context.Context
		op       string
		denied   bool
		wantKind approval.Kind
		target   string
	}{
		{name: "ps from a script is a list, allowed", source: script, op: "ps", wantKind: approval.KindList, target: "/proc"},
		{name: "logs from a script is a read, allowed", source: script, op: "logs", wantKind: approval.KindRead, target: "/proc/2"},
		{name: "kill from a script asks", source: script, op: "kill", denied: true, wantKind: approval.KindExec, target: "kill -s TERM 2"},
		{name: "kill allowed by exec:kill *", allow: []string{"exec:kill *"}, source: script, op: "kill", wantKind: approval.KindExec, target: "kill -s TERM 2"},
		{name: "kill denied by exec:kill *", deny: []string{"exec:kill *"}, source: user, op: "kill", denied: true, wantKind: approval.KindExec, target: "kill -s TERM 2"},
		{name: "kill from the user", source: user, op: "kill", wantKind: approval.KindExec, target: "kill -s TERM 2"},
		{name: "ps denied by a list rule", deny: []string{"list:/proc"}, source: user, op: "ps", denied: true, wantKind: approval.KindList, target: "/proc"},
		{name: "background exec from a script asks", source: script, op: "bg", denied: true, wantKind: approval.KindExec, target: "sleep 30"},
		{name: "background exec allowed by its rule", allow: []string{"exec:sleep *"}, source: script, op: "bg", wantKind: approval.KindExec, target: "sleep 30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			policy := &approval.Policy{}
			for _, r := range tt.allow {
				if err := policy.AddAllow(r, r); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tt.deny {
				if err := policy.AddDeny(r, r); err != nil {
					t.Fatal(err)
				}
			}
			f := fake.New()
			var events []approval.Event
			e := machineEngine(t, f, policy, &events)
			s, err := e.Open(ctx, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			// A command with pid 2 for kill and logs, started unasked.
			if _, err := f.Exec(ctx, s.ID(), providers.ExecRequest{Argv: []string{"sleep", "30"}, Background: true}); err != nil {
				t.Fatal(err)
			}
			f.ResetCalls()
			events = nil
			octx := tt.source(ctx)
			var method string
			switch tt.op {
			case "ps":
				method = "Processes"
				_, err = s.Processes(octx)
			case "logs":
				method = "Logs"
				_, err = s.Logs(octx, 2, false, &bytes.Buffer{})
			case "kill":
				method = "Signal"
				err = s.Signal(octx, 2, syscall.SIGTERM)
			case "bg":
				method = "Exec"
				_, err = s.Exec(octx, providers.ExecRequest{Argv: []string{"sleep", "30"}, Background: true})
			}
			if approval.IsDenied(err) != tt.denied || !tt.denied && err != nil {
				t.Fatalf("err = %v, want denied %v", err, tt.denied)
			}
			called := false
			for _, c := range f.Calls() {
				called = called || c == method
			}
			if called == tt.denied {
				t.Fatalf("provider calls %v: a denied request must not reach it, an allowed one must", f.Calls())
			}
			if len(events) == 0 {
				t.Fatal("no gate event")
			}
			req := events[0].Request
			if req.Kind != tt.wantKind || req.Target != tt.target {
				t.Fatalf("request %s %q, want %s %q", req.Kind, req.Target, tt.wantKind, tt.target)
			}
			if tt.op == "bg" && !req.Details.Background {
				t.Fatal("a background exec's request does not say so")
			}
		})
	}
}
