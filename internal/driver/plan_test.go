package driver

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePlan(t *testing.T) {
	t.Parallel()
	src := `steps:
  - exec: "go test ./..."
  - write: {path: /workspace/notes.txt, content: "hello\n"}
  - edit: {path: /workspace/notes.txt, old: "hello", new: "bye"}
  - read: /workspace/notes.txt
  - upload: {from: ./src, to: /workspace/src}
  - download: {from: /workspace/out, to: ./out, force: true}
  - exec: [ls, -l]
    continue_on_error: true
  - exec: {command: "sleep 1", cwd: /tmp, timeout: 5s}
  - grep: {pattern: TODO, path: /workspace}
`
	p, err := ParsePlan("plan.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op, target string
		line       int
		cont       bool
	}{
		{"exec", "go test ./...", 2, false},
		{"write", "/workspace/notes.txt", 3, false},
		{"edit", "/workspace/notes.txt", 4, false},
		{"read", "/workspace/notes.txt", 5, false},
		{"upload", "./src -> /workspace/src", 6, false},
		{"download", "/workspace/out -> ./out", 7, false},
		{"exec", "ls -l", 8, true},
		{"exec", "sleep 1", 10, false},
		{"grep", "TODO", 11, false},
	}
	if len(p.Steps) != len(want) {
		t.Fatalf("%d steps", len(p.Steps))
	}
	for i, w := range want {
		st := p.Steps[i]
		if st.Op != w.op || st.Target() != w.target || st.Line != w.line || st.ContinueOnError != w.cont {
			t.Errorf("step %d = %+v; want %+v", i, st, w)
		}
	}
	if p.Steps[1].Content != "hello\n" || p.Steps[5].Force != true || p.Steps[7].Cwd != "/tmp" || p.Steps[7].Timeout.String() != "5s" {
		t.Errorf("fields not decoded: %+v", p.Steps)
	}
}

func TestParsePlanErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src, want string }{
		{"not yaml", "steps: [\n", "plan.yaml:1: did not find expected node content"},
		{"not yaml further down", "steps:\n  - exec: ls\n  - exec: [\n", "plan.yaml:3: did not find expected node content"},
		{"empty", "", "plan.yaml:1: empty plan"},
		{"no list", "steps: 3\n", "plan.yaml:1:8: steps must be a list"},
		{"unknown top", "stepz: []\n", "plan.yaml:1:1: unknown field \"stepz\""},
		{"unknown op", "steps:\n  - exec: ls\n  - rm: /x\n", "plan.yaml:3:5: unknown field \"rm\""},
		{"two ops", "steps:\n  - exec: ls\n    read: /x\n", "a step has one operation"},
		{"missing arg", "steps:\n  - write: {content: x}\n", "plan.yaml:2:5: write needs a path"},
		{"bad field", "steps:\n  - write: {path: /a, contnt: x}\n", "plan.yaml:2:23: unknown field \"contnt\""},
		{"bad timeout", "steps:\n  - exec: {command: ls, timeout: soon}\n", "not a positive duration"},
		{"bad continue", "steps:\n  - exec: ls\n    continue_on_error: maybe\n", "plan.yaml:3:5: continue_on_error must be true or false"},
		{"no steps", "steps: []\n", "the plan has no steps"},
		{"scalar step", "steps:\n  - ls\n", "plan.yaml:2:5: a step must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePlan("plan.yaml", []byte(tt.src))
			var pe *PlanError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want a PlanError containing %q", err, tt.want)
			}
		})
	}
}

func TestParseJSONL(t *testing.T) {
	t.Parallel()
	p, err := ParseJSONL("stdin", strings.NewReader("{\"exec\":\"echo hi\"}\n\n{\"write\":{\"path\":\"/workspace/a\",\"content\":\"x\"},\"continue_on_error\":true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 2 || p.Steps[0].Command != "echo hi" || p.Steps[1].Line != 3 || !p.Steps[1].ContinueOnError {
		t.Fatalf("steps = %+v", p.Steps)
	}
	tests := []struct{ src, want string }{
		{"{\"exec\":\"ls\"}\n{\"exec\": }\n", "stdin:2:10: invalid JSON"},
		{"{\"exec\":\"ls\"} {\"exec\":\"ls\"}\n", "stdin:1: one step per line"},
		{"{\"nope\":1}\n", "stdin:1: unknown field"},
		{"\n\n", "the plan has no steps"},
	}
	for _, tt := range tests {
		_, err := ParseJSONL("stdin", strings.NewReader(tt.src))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseJSONL(%q) = %v; want %q", tt.src, err, tt.want)
		}
	}
}

func FuzzParsePlan(f *testing.F) {
	f.Add("steps:\n  - exec: ls\n")
	f.Add("steps:\n  - write: {path: /a, content: x}\n    continue_on_error: true\n")
	f.Add("steps: [{exec: [a, b]}]")
	f.Fuzz(func(t *testing.T, src string) {
		p, err := ParsePlan("f.yaml", []byte(src))
		if err != nil {
			var pe *PlanError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error without a location: %v", err)
			}
			return
		}
		for _, st := range p.Steps {
			if !ops[st.Op] {
				t.Fatalf("invalid op %q accepted", st.Op)
			}
		}
	})
}
