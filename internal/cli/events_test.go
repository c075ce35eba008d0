package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
)

// eventLine is the part of an event a test compares.
func eventLine(ev events.Event) string {
	s := ev.Type
	switch {
	case ev.Sandbox != nil:
		s += " " + ev.Sandbox.State
		if _, ok := ev.Sandbox.Labels["sandbox-run"]; ok {
			s += " with the run label"
		}
	case ev.Type == events.CallRequested:
		s += " " + ev.CallID + " " + ev.Kind + " " + ev.Target
	case ev.Type == events.CallDecided:
		s += " " + ev.CallID + " " + ev.Rule
	case ev.Type == events.CallOutput:
		s += " " + ev.CallID + " " + ev.Stream + " " + strings.TrimSpace(ev.Data)
	case ev.Type == events.CallCompleted:
		s += " " + ev.CallID + " " + ev.Status
	}
	if ev.ExitCode != nil && ev.Type != events.CallCompleted {
		s += " " + string(rune('0'+*ev.ExitCode))
	}
	return s
}

func TestJSONEventStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("steps:\n  - exec: echo hi\n  - exec: rm -rf /workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, "files.yaml")
	if err := os.WriteFile(files, []byte(`steps:
  - write: {path: /workspace/a.txt, content: "hello\n"}
  - write: {path: /workspace/a.txt, content: "bye\n", force: true}
  - read: /workspace/a.txt
  - ls: /workspace
  - glob: {pattern: "*.txt"}
  - grep: {pattern: bye}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		// A write's look at the file it replaces, and an ls's at what
		// it lists, are no calls of their own, and the output of a read
		// or a listing comes before its call is completed.
		{"run: file steps", []string{"--yes", "run", files}, 0, []string{
			"run.started", "sandbox.created running",
			"call.requested c1 write /workspace/a.txt", "call.decided c1 --yes", "call.completed c1 ok",
			"call.requested c2 write /workspace/a.txt", "call.decided c2 --yes", "call.completed c2 ok",
			"call.requested c3 read /workspace/a.txt", "call.decided c3 --yes", "call.output c3 stdout bye", "call.completed c3 ok",
			"call.requested c4 list /workspace", "call.decided c4 --yes", "call.output c4 stdout /workspace/a.txt", "call.completed c4 ok",
			"call.requested c5 list /workspace", "call.decided c5 --yes", "call.output c5 stdout /workspace/a.txt", "call.completed c5 ok",
			"call.requested c6 list /workspace", "call.decided c6 --yes", "call.output c6 stdout /workspace/a.txt:1:bye", "call.completed c6 ok",
			"sandbox.deleted deleted", "run.completed 0",
		}},
		{"exec", []string{"--yes", "exec", "--", "echo", "hi"}, 0, []string{
			"run.started", "sandbox.created running",
			"call.requested c1 exec echo hi", "call.decided c1 --yes", "call.output c1 stdout hi", "call.completed c1 ok",
			"sandbox.deleted deleted", "run.completed 0",
		}},
		{"exec that fails", []string{"--yes", "exec", "--", "false"}, 1, []string{
			"run.started", "sandbox.created running",
			"call.requested c1 exec false", "call.decided c1 --yes", "call.completed c1 failed",
			"sandbox.deleted deleted", "run.completed 1",
		}},
		{"run: two steps, one denied", []string{"--allow", "exec:echo *", "run", plan}, ExitDenied, []string{
			"run.started", "sandbox.created running",
			"call.requested c1 exec echo hi", `call.decided c1 --allow "exec:echo *"`, "call.output c1 stdout hi", "call.completed c1 ok",
			"call.requested c2 exec rm -rf /workspace", "call.decided c2 default: script requests need approval", "call.completed c2 denied",
			"sandbox.deleted deleted", "run.failed 3",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, append([]string{"--sandbox", "fake", "--json"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("code %d, want %d; stderr %q", code, tt.code, stderr)
			}
			var got []string
			for _, ev := range eventstest.New(t).Lines(t, []byte(out)) {
				got = append(got, eventLine(ev))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("events:\n%s\nwant:\n%s\nraw:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), out)
			}
			if strings.Contains(out, `\u003c`) || strings.Contains(out, `\u003e`) || strings.Contains(out, `\u0026`) {
				t.Fatalf("HTML escaping:\n%s", out)
			}
		})
	}
}

// TestVerbsWithoutStateDirectory checks that the verbs that need no
// sandbox run whatever the state directory, and that one that does says
// what is wrong with it.
func TestVerbsWithoutStateDirectory(t *testing.T) {
	t.Parallel()
	env := map[string]string{"XDG_STATE_HOME": "/proc/x"}
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"version", []string{"version"}, 0, ""},
		{"exit-codes", []string{"exit-codes"}, 0, ""},
		{"completion", []string{"completion", "bash"}, 0, ""},
		{"providers", []string{"providers"}, 0, ""},
		{"providers --json", []string{"providers", "--json"}, 0, ""},
		{"help", []string{"--help"}, 0, ""},
		{"verb help", []string{"exec", "--help"}, 0, ""},
		{"a verb that needs the state", []string{"--sandbox", "fake", "exec", "--", "true"}, ExitError, "open audit log: mkdir /proc/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runMain(t, env, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.err) {
				t.Fatalf("code %d, want %d; stderr %q, want %q in it", code, tt.code, stderr, tt.err)
			}
			if tt.err == "" && stderr != "" {
				t.Fatalf("stderr %q", stderr)
			}
		})
	}
}

// TestDocumentVerbsPrintNoEvents checks that a verb printing one JSON
// document prints only that: `| jq` sees one value.
func TestDocumentVerbsPrintNoEvents(t *testing.T) {
	t.Parallel()
	tests := [][]string{
		{"--json", "version"},
		{"--json", "providers"},
		{"--json", "exit-codes"},
		{"--sandbox", "fake", "--json", "list"},
		{"--sandbox", "fake", "--yes", "--json", "ls"},
		{"--sandbox", "fake", "--json", "create"},
	}
	for _, args := range tests {
		code, out, stderr := runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, args...)
		var doc any
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || strings.Contains(out, "run.started") {
			t.Errorf("%q: code %d, stdout not one document:\n%s\nstderr %q", args, code, out, stderr)
		}
	}
}
