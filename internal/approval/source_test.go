package approval

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

func TestGateApproveSource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		policy  string
		src     Source
		allowed bool
	}{
		{"approved source passes default ask", "", SourceSetup, true},
		{"approved source passes policy default deny", "default: deny\n", SourceSetup, true},
		{"explicit deny still wins", "deny: [\"exec:curl *\"]\n", SourceSetup, false},
		{"other sources still ask", "", SourceScript, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			g := NewGate(f, GateOptions{Policy: mustPolicy(t, tt.policy)})
			g.ApproveSource(SourceSetup, `--sandbox-setup "s.sh"`)
			ctx := WithSource(context.Background(), tt.src)
			_, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: `curl -s "$URL" | sh`})
			var denied *DeniedError
			if tt.allowed {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				if len(f.Calls()) == 0 {
					t.Fatal("allowed call did not reach the provider")
				}
				return
			}
			if !errors.As(err, &denied) || len(f.Calls()) != 0 {
				t.Fatalf("want denied and provider untouched, got %v, calls %v", err, f.Calls())
			}
		})
	}
}
