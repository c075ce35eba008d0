package approval

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// execRecorder is a provider without sessions of its own (it hides the
// fake's providers.SessionKeeper) that records the exec requests it gets.
type execRecorder struct {
	providers.Provider
	mu   sync.Mutex
	reqs []providers.ExecRequest
}

func (r *execRecorder) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return providers.ExecResult{}, nil
}

// TestGateExecSession checks that the approver and the rules see the
// command a person typed, and the provider the session's wrapper.
func TestGateExecSession(t *testing.T) {
	tests := []struct {
		name       string
		req        providers.ExecRequest
		wantTarget string
		wantCmd    string
	}{
		{"shell", providers.ExecRequest{Session: "tui", Shell: "cd /tmp && pwd"}, "cd /tmp && pwd", "cd /tmp && pwd"},
		{"argv", providers.ExecRequest{Session: "tui", Argv: []string{"echo", "a b"}}, "echo 'a b'", "echo 'a b'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execRecorder{Provider: fake.New()}
			var asked []Request
			g := NewGate(rec, GateOptions{
				Policy: mustPolicy(t, "ask: [\"*\"]\n"),
				Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
					asked = append(asked, req)
					return Decision{Allow: true}, nil
				}),
			})
			if _, err := g.Exec(context.Background(), "sb", tt.req); err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0].Target != tt.wantTarget || strings.Contains(asked[0].Target, "__sandbox") {
				t.Fatalf("approver asked %+v, want one request for %q", asked, tt.wantTarget)
			}
			if len(rec.reqs) != 1 {
				t.Fatalf("provider got %d requests, want 1", len(rec.reqs))
			}
			got := rec.reqs[0]
			if got.Session != "" || got.Shell != "" || len(got.Argv) < 6 || got.Argv[0] != "/bin/sh" || got.Argv[4] != tt.wantCmd ||
				got.Argv[5] != providers.SessionDir+"/tui" {
				t.Fatalf("provider got %+v, want the session wrapper running %q", got, tt.wantCmd)
			}
		})
	}
}

// TestGateExecSessionDenied checks that a denied command in a session
// never reaches the provider, and a rule matches the typed command.
func TestGateExecSessionDenied(t *testing.T) {
	rec := &execRecorder{Provider: fake.New()}
	g := NewGate(rec, GateOptions{Policy: mustPolicy(t, "default: allow\ndeny: [\"exec:rm *\"]\n")})
	_, err := g.Exec(context.Background(), "sb", providers.ExecRequest{Session: "tui", Shell: "rm -rf /workspace"})
	if !IsDenied(err) {
		t.Fatalf("exec rm in a session: %v, want denied", err)
	}
	if _, err := g.Exec(context.Background(), "sb", providers.ExecRequest{Session: "tui", Shell: "ls"}); err != nil {
		t.Fatal(err)
	}
	if len(rec.reqs) != 1 || !slices.Contains(rec.reqs[0].Argv, "ls") {
		t.Fatalf("provider got %+v, want only the allowed ls", rec.reqs)
	}
}
