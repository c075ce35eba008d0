package approval

import (
	"context"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestGateModes checks what each run-time mode does with a request from a
// script that the policy alone would ask about.
func TestGateModes(t *testing.T) {
	tests := []struct {
		name     string
		mode     Mode
		policy   string
		session  string // a session rule added before the call
		asked    bool   // the approver is consulted
		allowed  bool
		decideBy string
	}{
		{name: "session applies session rules", mode: ModeSession, session: "exec:echo *", allowed: true, decideBy: "session"},
		{name: "ask ignores session rules", mode: ModeAsk, session: "exec:echo *", asked: true},
		{name: "ask without rules asks", mode: ModeAsk, asked: true},
		{name: "all allows what would ask", mode: ModeAll, allowed: true, decideBy: "user"},
		{name: "all keeps deny rules", mode: ModeAll, policy: "deny: [\"exec:echo *\"]\n", decideBy: "policy"},
		{name: "all keeps ask rules", mode: ModeAll, policy: "ask: [\"exec:echo *\"]\n", asked: true},
		{name: "zero mode is session", mode: "", session: "exec:echo *", allowed: true, decideBy: "session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *Policy
			if tt.policy != "" {
				p = mustPolicy(t, tt.policy)
			}
			asked := false
			g := NewGate(newFake(), GateOptions{Policy: p, Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
				asked = true
				return Decision{By: "user", Reason: "asked"}, nil
			})})
			if tt.session != "" {
				if err := g.AllowForSession(tt.session); err != nil {
					t.Fatal(err)
				}
			}
			if tt.mode != "" {
				g.SetMode(tt.mode)
			}
			var dec Decision
			g.onEvent = func(ev Event) {
				if ev.Type == EventDecision {
					dec = ev.Decision
				}
			}
			ctx := WithSource(context.Background(), SourceScript)
			_, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "echo hi"})
			if asked != tt.asked {
				t.Fatalf("approver asked = %v, want %v", asked, tt.asked)
			}
			if (err == nil) != tt.allowed {
				t.Fatalf("err = %v, want allowed=%v", err, tt.allowed)
			}
			if tt.decideBy != "" && dec.By != tt.decideBy {
				t.Fatalf("decided by %q (%+v), want %q", dec.By, dec, tt.decideBy)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"ask": ModeAsk, " Session ": ModeSession, "ALL": ModeAll} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseMode("yolo"); err == nil {
		t.Error("ParseMode(yolo) should fail")
	}
}
