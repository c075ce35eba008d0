package events_test

import (
	"bytes"
	"io/fs"
	"testing"
	"time"

	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

func TestFileModeAndType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode       fs.FileMode
		typ, octal string
	}{
		{0o644, "file", "0644"},
		{fs.ModeDir | 0o755, "dir", "0755"},
		{fs.ModeSymlink | 0o777, "symlink", "0777"},
		{fs.ModeNamedPipe | 0o600, "other", "0600"},
		{fs.ModeSetuid | 0o755, "file", "4755"},
		{fs.ModeDir | fs.ModeSticky | 0o777, "dir", "1777"},
	}
	for _, tt := range tests {
		if typ, octal := events.FileType(tt.mode), events.FileMode(tt.mode); typ != tt.typ || octal != tt.octal {
			t.Errorf("%v: %s %s, want %s %s", tt.mode, typ, octal, tt.typ, tt.octal)
		}
	}
}

func TestNewSandboxHidesLabels(t *testing.T) {
	t.Parallel()
	info := providers.Info{ID: "sb-1", Provider: "local", State: providers.StateRunning, Labels: map[string]string{"team": "a", "sandbox-run": "r1"}}
	sb := events.NewSandbox(info, "deleted", "sandbox-run")
	if sb.State != "deleted" || len(sb.Labels) != 1 || sb.Labels["team"] != "a" || info.Labels["sandbox-run"] != "r1" {
		t.Fatalf("sandbox %+v (info labels %v)", sb, info.Labels)
	}
	if sb := events.NewSandbox(providers.Info{ID: "sb-2", Provider: "e2b"}, ""); sb.Labels == nil || sb.State != "unknown" {
		t.Fatalf("sandbox %+v", sb)
	}
}

// TestSchema checks that the schema takes the events of each type as
// they are written and refuses what breaks its rules.
func TestSchema(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sb := events.NewSandbox(providers.Info{ID: "sb-1", Provider: "local", Labels: map[string]string{"k": "v"}}, providers.StateRunning)
	tests := []struct {
		name string
		ev   events.Event
		ok   bool
	}{
		{"run.started", events.Event{Type: events.RunStarted, Time: now, RunID: "ab12", Version: events.Version}, true},
		{"run.started without an id", events.Event{Type: events.RunStarted, Time: now, Version: events.Version}, false},
		{"run.completed", events.Event{Type: events.RunCompleted, Time: now, ExitCode: events.Ptr(0)}, true},
		{"run.completed without an exit code", events.Event{Type: events.RunCompleted, Time: now}, false},
		{"run.failed", events.Event{Type: events.RunFailed, Time: now, ExitCode: events.Ptr(3), Error: "denied"}, true},
		{"sandbox.created", events.Event{Type: events.SandboxCreated, Time: now, Sandbox: sb}, true},
		{"sandbox.kept", events.Event{Type: events.SandboxKept, Time: now, Sandbox: sb, Reattach: "sandbox --sandbox-id sb-1"}, true},
		{"the run label", events.Event{Type: events.SandboxCreated, Time: now, Sandbox: &events.Sandbox{ID: "x", Provider: "p", State: "running", Labels: map[string]string{"sandbox-run": "r"}}}, false},
		{"call.requested", events.Event{Type: events.CallRequested, Time: now, CallID: "c1", Source: "script", Kind: "write", Target: "/w/f",
			Details: &events.Details{Diff: "+x\n", Files: []events.File{{Path: "/w/f", Type: "file", Mode: "0644", Size: 2}}}, Step: 1, Line: 2}, true},
		{"a mode as a number", events.Event{Type: events.CallRequested, Time: now, CallID: "c1", Source: "user", Kind: "read", Target: "/w",
			Details: &events.Details{Files: []events.File{{Path: "/w", Mode: "420"}}}}, false},
		{"an unknown kind", events.Event{Type: events.CallRequested, Time: now, CallID: "c1", Source: "user", Kind: "ls", Target: "/w", Details: &events.Details{}}, false},
		{"call.decided", events.Event{Type: events.CallDecided, Time: now, CallID: "c1", Allow: events.Ptr(false), By: "policy", Rule: "deny", Reason: "no"}, true},
		{"call.output", events.Event{Type: events.CallOutput, Time: now, CallID: "c1", Stream: "stderr", Data: "\ufffd", DataB64: "/w=="}, true},
		{"call.completed", events.Event{Type: events.CallCompleted, Time: now, CallID: "c1", Status: "failed", ExitCode: events.Ptr(2), DurationMS: events.Ptr(int64(5)), Step: 1, Line: 2}, true},
		{"call.completed with an unknown status", events.Event{Type: events.CallCompleted, Time: now, CallID: "c1", Status: "done", DurationMS: events.Ptr(int64(5))}, false},
		{"a field of another type", events.Event{Type: events.CallDecided, Time: now, CallID: "c1", Allow: events.Ptr(true), By: "flag", Stream: "stdout"}, false},
		{"an unknown type", events.Event{Type: "step", Time: now}, false},
	}
	v := eventstest.New(t)
	for _, tt := range tests {
		line, err := output.Marshal(tt.ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Line(line); (err == nil) != tt.ok {
			t.Errorf("%s: %s: error %v, want ok %v", tt.name, line, err, tt.ok)
		}
	}
}

// viaEncodingJSON hides an event's AppendJSON from output.Marshal, which
// then encodes it through encoding/json (and the event's MarshalJSON).
type viaEncodingJSON struct{ e events.Event }

func (v viaEncodingJSON) MarshalJSON() ([]byte, error) { return v.e.MarshalJSON() }

// TestMarshalWritesEventsItself: output.Marshal writes an event through
// its AppendJSON what it wrote through encoding/json, escapes included.
func TestMarshalWritesEventsItself(t *testing.T) {
	t.Parallel()
	for _, e := range []events.Event{
		{},
		{Type: events.CallRequested, Time: time.Unix(1700000000, 5).UTC(), Kind: "exec", Target: "a <b> & c", Argv: []string{"echo", "\x1b[31mred\u202e", "é"}},
		{Type: events.CallCompleted, Sandbox: &events.Sandbox{ID: "sb-1", Labels: map[string]string{"k": "v\u2028"}}},
	} {
		want, err := output.Marshal(viaEncodingJSON{e})
		if err != nil {
			t.Fatal(err)
		}
		got, err := output.Marshal(e)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("output.Marshal(%+v):\n got %s (%v)\nwant %s", e, got, err, want)
		}
	}
}
