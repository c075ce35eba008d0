package tui

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// sessionRecorder is the fake provider, recording the session of every
// exec request it gets.
type sessionRecorder struct {
	*fake.Provider
	mu       sync.Mutex
	sessions []string
}

func (r *sessionRecorder) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	r.mu.Lock()
	r.sessions = append(r.sessions, req.Session)
	r.mu.Unlock()
	return r.Provider.Exec(ctx, id, req)
}

// TestShellSession checks that every command typed in the TUI runs in the
// TUI's one shell session, so that cd and export carry over.
func TestShellSession(t *testing.T) {
	tests := []struct {
		name   string
		shell  bool // shell mode on
		inputs []string
		want   string // a line the last command prints
	}{
		{"cd in shell mode", true, []string{"cd /tmp", "pwd"}, "/tmp"},
		{"export in shell mode", true, []string{"export FOO=1", "env"}, "FOO=1"},
		{"cd with !", false, []string{"!cd /tmp", "!pwd"}, "/tmp"},
		{"several commands in one line", true, []string{"cd /tmp; export BAR=2", "pwd", "env"}, "BAR=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &sessionRecorder{Provider: fake.New()}
			reg := fake.Registration()
			reg.New = func(providers.Config) (providers.Provider, error) { return rec, nil }
			b := NewBridge(io.Discard)
			e := engine.New(engine.Options{
				Registry: providers.NewRegistry(reg), StateDir: t.TempDir(), DefaultProvider: "fake",
				Policy: &approval.Policy{Yes: true}, Approver: b, Events: b.Event, Progress: b.Progress(),
			})
			m := newModel(context.Background(), Options{Now: newClock().now, Out: io.Discard, Bridge: b, Provider: "fake",
				Open: func(ctx context.Context) (*engine.Session, error) { return e.Open(ctx, engine.OpenOptions{}) }})
			m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
			h := newHarness(t, m)
			h.until("the session to open", func() bool { return m.phase == phaseReady })
			if tt.shell {
				h.line("/shell")
			}
			for i, in := range tt.inputs {
				h.line(in)
				h.until(in, func() bool { return countLines(m, "exit 0") > i })
				if m.dlg.open() {
					t.Fatalf("%s asked for approval", in)
				}
			}
			if !hasExactLine(m, tt.want) {
				t.Errorf("after %q the scrollback lacks the line %q:\n%s", tt.inputs, tt.want, m.View())
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.sessions) != len(tt.inputs) {
				t.Fatalf("the provider got %d execs, want %d", len(rec.sessions), len(tt.inputs))
			}
			for i, s := range rec.sessions {
				if s != shellSession {
					t.Errorf("exec %d (%q) ran in session %q, want %q", i+1, tt.inputs[i], s, shellSession)
				}
			}
		})
	}
}

// countLines counts the scrollback lines containing sub.
func countLines(m *model, sub string) int {
	n := 0
	for _, l := range m.sb.lines {
		if strings.Contains(l.text, sub) {
			n++
		}
	}
	return n
}

// hasExactLine reports whether a scrollback line is text, spaces aside.
func hasExactLine(m *model, text string) bool {
	for _, l := range m.sb.lines {
		if strings.TrimSpace(l.text) == text {
			return true
		}
	}
	return false
}
