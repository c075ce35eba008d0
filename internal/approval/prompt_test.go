package approval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

func TestPrompt(t *testing.T) {
	t.Parallel()
	goTest := Request{Source: SourceAgent, Kind: KindExec, Provider: "local", Sandbox: "sb-1", Target: "go test ./...", Details: Details{Cwd: "/workspace"}}
	complexCmd := Request{Source: SourceAgent, Kind: KindExec, Target: "echo $(id)"}
	tests := []struct {
		name    string
		req     Request
		input   string
		want    Decision
		wantOut []string
	}{
		{name: "yes", req: goTest, input: "y\n", want: Decision{Allow: true, By: "user"},
			wantOut: []string{"agent wants to exec in local/sb-1", "command: go test ./...", "cwd: /workspace", "allow? [y]es / [n]o / [a]lways (session rule exec:go test *) / [r]eason: "}},
		{name: "yes word", req: goTest, input: "YES\n", want: Decision{Allow: true, By: "user"}},
		{name: "yes without newline", req: goTest, input: "y", want: Decision{Allow: true, By: "user"}},
		{name: "always", req: goTest, input: "a\n", want: Decision{Allow: true, By: "user", SessionRule: "exec:go test *"}},
		{name: "always two segments", req: Request{Kind: KindExec, Target: "make && git status"}, input: "a\n",
			want: Decision{Allow: true, By: "user", SessionRule: "exec:make", SessionRules: []string{"exec:git status *"}}},
		{name: "always unavailable", req: complexCmd, input: "a\nn\n", want: Decision{By: "user"},
			wantOut: []string{"note: command substitution", "no rule can allow this call again"}},
		{name: "no", req: goTest, input: "n\n", want: Decision{By: "user"}},
		{name: "empty", req: goTest, input: "\n", want: Decision{By: "user"}},
		{name: "eof", req: goTest, input: "", want: Decision{By: "user", Reason: "no answer"}},
		{name: "reason", req: goTest, input: "r\ntests are slow\n", want: Decision{By: "user", Reason: "tests are slow"},
			wantOut: []string{"reason: "}},
		{name: "unknown then yes", req: goTest, input: "maybe\ny\n", want: Decision{Allow: true, By: "user"},
			wantOut: []string{`unknown answer "maybe"`}},
		{name: "shows the user", req: Request{Kind: KindExec, Target: "make", Details: Details{User: "dev\x1b[2J"}}, input: "n\n", want: Decision{By: "user"},
			wantOut: []string{`as user: dev\x1b[2J`}},
		{name: "escapes control characters", req: Request{Kind: KindExec, Target: "echo \x1b[2J\rok"}, input: "n\n", want: Decision{By: "user"},
			wantOut: []string{`command: echo \x1b[2J\rok`}},
		{name: "diff truncated", req: Request{Kind: KindEdit, Target: "/w/f", Details: Details{Diff: strings.Repeat("+line\n", 50)}}, input: "n\n", want: Decision{By: "user"},
			wantOut: []string{"diff:", "    +line", "… 10 more lines", "[a]lways (session rule edit:/w/**)"}},
		{name: "files", req: Request{Kind: KindUpload, Target: "/w", Details: Details{Bytes: 2048, Files: []FileEntry{{Path: "a", Size: 10, Exists: true, SHA256: "abcdef0123456789"}}}}, input: "n\n", want: Decision{By: "user"},
			wantOut: []string{"size: 2.0 KiB", "files (1):", "a  10 B  sha256:abcdef012345…  (overwrites)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			p := NewPrompt(strings.NewReader(tt.input), &out)
			got, err := p.Approve(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allow != tt.want.Allow || got.By != tt.want.By || got.Reason != tt.want.Reason ||
				got.SessionRule != tt.want.SessionRule || !slices.Equal(got.SessionRules, tt.want.SessionRules) {
				t.Fatalf("Approve = %+v, want %+v", got, tt.want)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestPromptCancel(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	p := NewPrompt(pr, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req := Request{Kind: KindExec, Target: "ls"}
	if _, err := p.Approve(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Approve error = %v", err)
	}
	// The line typed afterwards answers the next question.
	go fmt.Fprintln(pw, "y")
	got, err := p.Approve(context.Background(), req)
	if err != nil || !got.Allow {
		t.Fatalf("Approve = %+v, %v", got, err)
	}
}

func TestDenyAll(t *testing.T) {
	t.Parallel()
	d, err := DenyAll().Approve(context.Background(), Request{Kind: KindExec, Target: "ls"})
	if err != nil || d.Allow {
		t.Fatalf("DenyAll = %+v, %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DenyAll().Approve(ctx, Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DenyAll cancelled = %v", err)
	}
}

func TestDeniedErrorMessage(t *testing.T) {
	t.Parallel()
	g := NewGate(newFake(), GateOptions{})
	_, err := g.Exec(WithSource(context.Background(), SourceAgent), "sb", providers.ExecRequest{Shell: "go test ./..."})
	want := `denied: exec "go test ./..." by default: agent requests need approval: approval required, and no one can be asked in a non-interactive run (allow it with --allow "exec:go test *" or --yes)`
	if err == nil || err.Error() != want {
		t.Fatalf("error =\n %v\nwant\n %s", err, want)
	}
}
