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
			dec := lastDecision(g)
			ctx := WithSource(context.Background(), SourceScript)
			_, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "echo hi"})
			if asked != tt.asked {
				t.Fatalf("approver asked = %v, want %v", asked, tt.asked)
			}
			if (err == nil) != tt.allowed {
				t.Fatalf("err = %v, want allowed=%v", err, tt.allowed)
			}
			if tt.decideBy != "" && dec().By != tt.decideBy {
				t.Fatalf("decided by %q (%+v), want %q", dec().By, dec(), tt.decideBy)
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

// TestGateYesIsModeAll checks that --yes is the "all" mode: the gate starts
// in it, and switching to another mode turns --yes off until "all" again.
func TestGateYesIsModeAll(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode // "" keeps the starting mode
		asked   bool
		allowed bool
		rule    string
	}{
		{name: "starts in all, by --yes", allowed: true, rule: "--yes"},
		{name: "ask turns --yes off", mode: ModeAsk, asked: true},
		{name: "session turns --yes off", mode: ModeSession, asked: true},
		{name: "all turns it on again", mode: ModeAll, allowed: true, rule: "--yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			g := NewGate(newFake(), GateOptions{Policy: &Policy{Yes: true}, Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
				asked = true
				return Decision{By: "user"}, nil
			})})
			if g.Mode() != ModeAll || !g.Yes() {
				t.Fatalf("a --yes gate starts in mode %q (yes %v), want all", g.Mode(), g.Yes())
			}
			if tt.mode != "" {
				g.SetMode(tt.mode)
			}
			dec := lastDecision(g)
			_, err := g.Exec(WithSource(context.Background(), SourceScript), "sb", providers.ExecRequest{Shell: "touch /workspace/DANGER"})
			if asked != tt.asked || (err == nil) != tt.allowed {
				t.Fatalf("asked %v, err %v; want asked %v, allowed %v", asked, err, tt.asked, tt.allowed)
			}
			if dec().Rule != tt.rule && tt.rule != "" {
				t.Fatalf("decided by %q, want %q", dec().Rule, tt.rule)
			}
		})
	}
}

// TestGateExactCall checks that "allow this exact call for the session"
// covers the identical request only: the same kind, target and content.
func TestGateExactCall(t *testing.T) {
	write := func(content string) Request {
		return Request{Source: SourceScript, Kind: KindWrite, Target: "/workspace/a.txt", Details: Details{Diff: "+" + content, Bytes: int64(len(content))}}
	}
	tests := []struct {
		name  string
		again Request
		asked bool
	}{
		{"the same write passes", write("hello"), false},
		{"other content asks", write("bye"), true},
		{"an edit of the same file asks", Request{Source: SourceScript, Kind: KindEdit, Target: "/workspace/a.txt", Details: Details{Diff: "+hello", Bytes: 5}}, true},
		{"another file asks", Request{Source: SourceScript, Kind: KindWrite, Target: "/workspace/b.txt", Details: Details{Diff: "+hello", Bytes: 5}}, true},
		{"another source asks", Request{Source: SourceAgent, Kind: KindWrite, Target: "/workspace/a.txt", Details: Details{Diff: "+hello", Bytes: 5}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asks := 0
			g := NewGate(newFake(), GateOptions{Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
				asks++
				return Decision{Allow: true, By: "user", SessionExact: true}, nil
			})})
			if _, err := g.decide(context.Background(), write("hello")); err != nil || asks != 1 {
				t.Fatalf("first write: err %v, asked %d times", err, asks)
			}
			dec, err := g.decide(context.Background(), tt.again)
			if err != nil {
				t.Fatal(err)
			}
			if got := asks == 2; got != tt.asked {
				t.Fatalf("asked again = %v, want %v (decision %+v)", got, tt.asked, dec)
			}
			if !tt.asked && dec.Rule != ExactOrigin {
				t.Fatalf("decision %+v, want the exact call's rule %q", dec, ExactOrigin)
			}
			g.SetMode(ModeAsk)
			if _, err := g.decide(context.Background(), write("hello")); err != nil || asks != map[bool]int{true: 3, false: 2}[tt.asked] {
				t.Fatalf("mode ask must ignore the exact call: asked %d times", asks)
			}
		})
	}
}

// lastDecision records the gate's decisions and returns the last one.
func lastDecision(g *Gate) func() Decision {
	var dec Decision
	g.onEvent = func(ev Event) {
		if ev.Type == EventDecision {
			dec = ev.Decision
		}
	}
	return func() Decision { return dec }
}

// TestModeAskAsksOwnCommands checks that in ModeAsk the user's own
// operations ask too, except reading and listing.
func TestModeAskAsksOwnCommands(t *testing.T) {
	tests := []struct {
		mode  Mode
		kind  Kind
		asked bool
	}{
		{ModeAsk, KindExec, true},
		{ModeAsk, KindWrite, true},
		{ModeAsk, KindRead, false},
		{ModeSession, KindExec, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+string(tt.kind), func(t *testing.T) {
			asked := false
			g := NewGate(newFake(), GateOptions{Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
				asked = true
				return Decision{Allow: true, By: "user"}, nil
			})})
			g.SetMode(tt.mode)
			if _, err := g.decide(context.Background(), Request{Source: SourceUser, Kind: tt.kind, Target: "/workspace/x"}); err != nil {
				t.Fatal(err)
			}
			if asked != tt.asked {
				t.Fatalf("asked %v, want %v", asked, tt.asked)
			}
		})
	}
}
