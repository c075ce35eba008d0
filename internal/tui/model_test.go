package tui

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/providers"
)

// clock is the injected time of a test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func runes(s string) tea.KeyMsg          { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }
func keyOf(t tea.KeyType) tea.KeyMsg     { return tea.KeyMsg{Type: t} }
func typeText(m *model, s string) {
	for _, r := range s {
		m.Update(runes(string(r)))
	}
}
func ctxBG() context.Context { return context.Background() }
func sendAll(m *model, msgs ...tea.Msg) {
	for _, x := range msgs {
		m.Update(x)
	}
}
func hasLine(m *model, sub string) bool { return m.sb.find(sub) >= 0 }
func (sb *scrollback) find(sub string) int {
	for i := len(sb.lines) - 1; i >= 0; i-- {
		if strings.Contains(sb.lines[i].text, sub) {
			return i
		}
	}
	return -1
}

// testModel is a ready model without a session, at a fixed size and time.
func testModel(t *testing.T, c *clock) *model {
	t.Helper()
	m := newModel(ctxBG(), Options{Now: c.now, Out: io.Discard, Provider: "local", Bridge: NewBridge(io.Discard)})
	m.phase = phaseReady
	m.info = providers.Info{ID: "sb-test", Provider: "local", Network: providers.NetworkOff}
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	return m
}

// ask queues a request in the dialog and returns its reply channel.
func ask(m *model, id int, req approval.Request) chan approval.Decision {
	ch := make(chan approval.Decision, 1)
	m.Update(approvalMsg{id: id, req: req, reply: ch})
	return ch
}

func execReq(cmd string) approval.Request {
	return approval.Request{Source: approval.SourceScript, Kind: approval.KindExec, Provider: "local", Sandbox: "sb-test", Target: cmd}
}

func answered(ch chan approval.Decision) (approval.Decision, bool) {
	select {
	case d := <-ch:
		return d, true
	default:
		return approval.Decision{}, false
	}
}

func TestDialogChoices(t *testing.T) {
	tests := []struct {
		name string
		req  approval.Request
		keys []tea.KeyMsg
		want approval.Decision
	}{
		{"y allows once", execReq("go test ./..."), []tea.KeyMsg{runes("y")}, approval.Decision{Allow: true, By: "user"}},
		{"1 allows once", execReq("go test ./..."), []tea.KeyMsg{runes("1")}, approval.Decision{Allow: true, By: "user"}},
		{"down enter picks the first choice (allow once)", execReq("ls -la"), []tea.KeyMsg{keyOf(tea.KeyDown), keyOf(tea.KeyEnter)}, approval.Decision{Allow: true, By: "user"}},
		{"e allows the exact call for the session", execReq("go test ./..."), []tea.KeyMsg{runes("e")},
			approval.Decision{Allow: true, By: "user", SessionExact: true}},
		{"e allows the exact call of a command no rule can spell", execReq("echo $(whoami)"), []tea.KeyMsg{runes("e")},
			approval.Decision{Allow: true, By: "user", SessionExact: true}},
		{"down down enter is the exact call", execReq("go test ./..."), []tea.KeyMsg{keyOf(tea.KeyDown), keyOf(tea.KeyDown), keyOf(tea.KeyEnter)},
			approval.Decision{Allow: true, By: "user", SessionExact: true}},
		{"up enter from no cursor is the last choice (deny with a reason)", execReq("rm -rf /"),
			append([]tea.KeyMsg{keyOf(tea.KeyUp), keyOf(tea.KeyEnter)}, append(runesOf("no"), keyOf(tea.KeyEnter))...),
			approval.Decision{By: "user", Reason: "no"}},
		{"s allows the prefix rule for the session", execReq("go test ./..."), []tea.KeyMsg{runes("s")},
			approval.Decision{Allow: true, By: "user", SessionRule: "exec:go test *"}},
		{"s on a chain adds a rule per segment", execReq("ls -l && wc -l x"), []tea.KeyMsg{runes("s")},
			approval.Decision{Allow: true, By: "user", SessionRule: "exec:ls *", SessionRules: []string{"exec:wc *"}}},
		{"s on a write adds the directory glob", approval.Request{Source: approval.SourceScript, Kind: approval.KindWrite, Target: "/workspace/a/b.txt"}, []tea.KeyMsg{runes("s")},
			approval.Decision{Allow: true, By: "user", SessionRule: "write:/workspace/a/**"}},
		{"n denies", execReq("rm -rf /"), []tea.KeyMsg{runes("n")}, approval.Decision{By: "user"}},
		{"esc denies", execReq("rm -rf /"), []tea.KeyMsg{keyOf(tea.KeyEsc)}, approval.Decision{By: "user"}},
		{"r then text then enter denies with the reason", execReq("rm -rf /"),
			append(append([]tea.KeyMsg{runes("r")}, runesOf("use git clean")...), keyOf(tea.KeyEnter)),
			approval.Decision{By: "user", Reason: "use git clean"}},
		{"tab opens the reason too", execReq("rm -rf /"),
			append(append([]tea.KeyMsg{keyOf(tea.KeyTab)}, runesOf("no")...), keyOf(tea.KeyEnter)),
			approval.Decision{By: "user", Reason: "no"}},
		{"the reason can contain y without allowing", execReq("rm -rf /"),
			append(append([]tea.KeyMsg{runes("r")}, runesOf("yes? no")...), keyOf(tea.KeyEnter)),
			approval.Decision{By: "user", Reason: "yes? no"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			ch := ask(m, 1, tt.req)
			c.advance(typeAheadGuard)
			for _, k := range tt.keys {
				m.Update(k)
			}
			d, ok := answered(ch)
			if !ok {
				t.Fatalf("no answer after %v", tt.keys)
			}
			if d.Allow != tt.want.Allow || d.By != tt.want.By || d.Reason != tt.want.Reason || d.SessionRule != tt.want.SessionRule || strings.Join(d.SessionRules, ",") != strings.Join(tt.want.SessionRules, ",") || d.SessionExact != tt.want.SessionExact {
				t.Fatalf("decision %+v, want %+v", d, tt.want)
			}
			if m.dlg.open() {
				t.Fatal("the dialog is still open")
			}
		})
	}
}

func runesOf(s string) []tea.KeyMsg {
	var out []tea.KeyMsg
	for _, r := range s {
		out = append(out, runes(string(r)))
	}
	return out
}

func TestDialogReasonEscGoesBack(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ch := ask(m, 1, execReq("rm -rf /"))
	c.advance(typeAheadGuard)
	sendAll(m, runes("r"), runes("x"), keyOf(tea.KeyEsc))
	if _, ok := answered(ch); ok || !m.dlg.open() || m.dlg.asking {
		t.Fatal("esc in the reason field should go back to the choices without answering")
	}
	m.Update(runes("y"))
	if d, ok := answered(ch); !ok || !d.Allow {
		t.Fatalf("y after going back: %+v %v", d, ok)
	}
}

// TestDialogChoiceWithoutRule: a session choice no rule can spell is not
// offered (item 8); its key says why in plain words instead of doing
// nothing silently.
func TestDialogChoiceWithoutRule(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ch := ask(m, 1, execReq("echo $(whoami)"))
	c.advance(typeAheadGuard)
	if v := m.View(); strings.Contains(v, "[s]") || strings.Contains(v, "none fits") {
		t.Fatalf("the unavailable session choice should be hidden:\n%s", v)
	}
	m.Update(runes("s"))
	if _, ok := answered(ch); ok {
		t.Fatal("a command with a substitution has no session rule; s must not answer")
	}
	if v := m.View(); !strings.Contains(v, "no rule for the session fits this call") || !strings.Contains(v, "command substitution") {
		t.Fatalf("the dialog should say why s did nothing:\n%s", v)
	}
}

// TestTypeAheadGuard: keys typed at a person's pace (one every 120 ms)
// never answer the dialog, however long the typing goes on (item 1); once
// the keyboard has been quiet for the guard, a key answers.
func TestTypeAheadGuard(t *testing.T) {
	for _, text := range []string{"hello you there", "yyyyyyyyyyyy", "brown fox", "/quit"} {
		t.Run(text, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			typeText(m, "ab") // typing when the dialog opens
			ch := ask(m, 1, execReq("touch /workspace/DANGER"))
			if !strings.Contains(m.View(), typingNote) {
				t.Fatalf("a dialog that opens while the user types should say it waits:\n%s", m.View())
			}
			for _, r := range text {
				c.advance(120 * time.Millisecond)
				m.Update(runes(string(r)))
			}
			c.advance(120 * time.Millisecond)
			m.Update(keyOf(tea.KeyEnter))
			if d, ok := answered(ch); ok {
				t.Fatalf("typing %q answered the dialog: %+v", text, d)
			}
			c.advance(typeAheadGuard)
			m.Update(runes("n"))
			if d, ok := answered(ch); !ok || d.Allow {
				t.Fatalf("a key after a pause should answer: %+v %v", d, ok)
			}
		})
	}
}

// TestEnterNeverAllowsByDefault: the cursor starts on no choice, so enter
// alone answers nothing (item 1).
func TestEnterNeverAllowsByDefault(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ch := ask(m, 1, execReq("echo one"))
	c.advance(time.Second)
	m.Update(keyOf(tea.KeyEnter))
	if d, ok := answered(ch); ok {
		t.Fatalf("enter answered a fresh dialog: %+v", d)
	}
	if v := m.View(); strings.Contains(v, "> [y]") || !strings.Contains(v, "move with ↑/↓ first") {
		t.Fatalf("no choice should be highlighted, and enter should say why it did nothing:\n%s", v)
	}
}

// TestMultiRuneKeysAreText: input read as one burst of runes is text even
// when it spells a key name (item 7): "enter" does not submit, "esc" does
// not deny, "y" inside a word does not allow.
func TestMultiRuneKeysAreText(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(runes("echo enter"))
	m.Update(runes("enter"))
	if v := m.input.Value(); v != "echo enterenter" {
		t.Fatalf("the input holds %q; the word enter acted as a key", v)
	}
	ch := ask(m, 1, execReq("rm -rf /"))
	c.advance(time.Second)
	for _, s := range []string{"esc", "yes", "enter", "ny"} {
		m.Update(runes(s))
	}
	if d, ok := answered(ch); ok {
		t.Fatalf("a burst of text answered the dialog: %+v", d)
	}
	m.dlg.queue = nil
	m.openBuiltinEditor(editTarget{path: "/workspace/x"})
	m.Update(runes("ctrl+s"))
	m.Update(runes("esc"))
	if m.editing == nil || m.editor.Value() != "ctrl+sesc" {
		t.Fatalf("words in the editor acted as keys: editing %v, %q", m.editing != nil, m.editor.Value())
	}
}

// TestPasteKeepsNewlines: a bracketed paste of several lines is not joined
// into one command: it opens in the editor, and saving runs it as one
// script with its newlines (item 7).
func TestPasteKeepsNewlines(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("echo one\nrm -rf /tmp/x"), Paste: true})
	if m.editing == nil || !m.editing.run {
		t.Fatal("a multi-line paste should open the editor to review it")
	}
	if got := m.editor.Value(); got != "echo one\nrm -rf /tmp/x" {
		t.Fatalf("the editor holds %q", got)
	}
	if !hasLine(m, "pasted 2 lines") {
		t.Fatal("the paste should be announced")
	}
	if m.input.Value() != "" {
		t.Fatalf("the paste leaked into the input line: %q", m.input.Value())
	}
}

func TestTypeAheadGuardRearmsForNextRequest(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	first := ask(m, 1, execReq("echo one"))
	second := ask(m, 2, execReq("echo two"))
	c.advance(time.Second)
	m.Update(runes("y"))
	if _, ok := answered(first); !ok {
		t.Fatal("first not answered")
	}
	c.advance(10 * time.Millisecond)
	m.Update(runes("y"))
	if _, ok := answered(second); ok {
		t.Fatal("a double-tapped y answered the next request too")
	}
	c.advance(typeAheadGuard)
	m.Update(runes("n"))
	if d, ok := answered(second); !ok || d.Allow {
		t.Fatalf("second: %+v %v", d, ok)
	}
}

func TestDialogBatch(t *testing.T) {
	for _, tt := range []struct {
		key   string
		allow bool
	}{{"A", true}, {"D", false}} {
		t.Run(tt.key, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			var chs []chan approval.Decision
			for i, cmd := range []string{"echo a", "echo b", "echo c"} {
				chs = append(chs, ask(m, i+1, execReq(cmd)))
			}
			if v := m.View(); !strings.Contains(v, "1 of 3") || !strings.Contains(v, "all 3 pending") {
				t.Fatalf("the dialog should count the pending requests and offer the batch:\n%s", v)
			}
			c.advance(typeAheadGuard)
			m.Update(runes(tt.key))
			for i, ch := range chs {
				d, ok := answered(ch)
				if !ok || d.Allow != tt.allow || d.By != "user" {
					t.Fatalf("request %d: %+v answered=%v", i+1, d, ok)
				}
			}
			if m.dlg.open() {
				t.Fatal("dialog still open")
			}
		})
	}
}

// TestDialogBatchKeysWithOne: A and D work with a single request too
// (item 19).
func TestDialogBatchKeysWithOne(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ch := ask(m, 1, execReq("echo a"))
	c.advance(typeAheadGuard)
	m.Update(runes("A"))
	if d, ok := answered(ch); !ok || !d.Allow {
		t.Fatalf("A with one pending request allows it: %+v %v", d, ok)
	}
}

func TestDialogOneByOneThenWithdrawn(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	a := ask(m, 1, execReq("echo a"))
	b := ask(m, 2, execReq("echo b"))
	cc := ask(m, 3, execReq("echo c"))
	c.advance(typeAheadGuard)
	m.Update(runes("n"))
	if d, ok := answered(a); !ok || d.Allow {
		t.Fatal("the front request should be denied first")
	}
	if !strings.Contains(m.View(), "echo b") {
		t.Fatal("the next request should show")
	}
	m.Update(approvalGoneMsg{id: 2}) // its operation was cancelled
	if !strings.Contains(m.View(), "echo c") {
		t.Fatal("after withdrawing b, c should show")
	}
	c.advance(typeAheadGuard)
	m.Update(runes("y"))
	if _, ok := answered(b); ok {
		t.Fatal("a withdrawn request was answered")
	}
	if d, ok := answered(cc); !ok || !d.Allow {
		t.Fatal("c not allowed")
	}
}

// TestModeCycleShownInStatus: shift+tab cycles ask → session → all, and
// all is confirmed first (item 18).
func TestModeCycleShownInStatus(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(keyOf(tea.KeyShiftTab))
	if m.mode != approval.ModeSession || m.confirm == nil || !strings.Contains(m.View(), "Switch to mode all") {
		t.Fatalf("session → all must be confirmed first (mode %s):\n%s", m.mode, m.View())
	}
	c.advance(typeAheadGuard)
	m.Update(runes("y"))
	want := []approval.Mode{approval.ModeAll, approval.ModeAsk, approval.ModeSession}
	for i, w := range want {
		if i > 0 {
			m.Update(keyOf(tea.KeyShiftTab))
		}
		if m.mode != w {
			t.Fatalf("mode %s, want %s", m.mode, w)
		}
		if status := strings.Split(m.View(), "\n")[0]; !strings.Contains(status, "mode "+string(w)) {
			t.Fatalf("status line %q does not show mode %s", status, w)
		}
	}
	typeText(m, "/mode all")
	m.Update(keyOf(tea.KeyEnter))
	m.Update(keyOf(tea.KeyCtrlC))
	if m.mode != approval.ModeSession || !hasLine(m, "the approval mode stays session") {
		t.Fatalf("ctrl+c at the confirmation should keep the mode: %s", m.mode)
	}
	typeText(m, "/mode ask")
	m.Update(keyOf(tea.KeyEnter))
	if m.mode != approval.ModeAsk {
		t.Fatalf("/mode ask: mode %s", m.mode)
	}
}

// TestSlashCommandCompletion: tab completes a command's name, a unique
// prefix runs its command, and an ambiguous one says which (item 16).
func TestSlashCommandCompletion(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	typeText(m, "/wr")
	if v := m.View(); !strings.Contains(v, "/write PATH [TEXT] — write TEXT") {
		t.Fatalf("the menu should show the command being typed:\n%s", v)
	}
	m.Update(keyOf(tea.KeyTab))
	if v := m.input.Value(); v != "/write " {
		t.Fatalf("tab after /wr: %q", v)
	}
	m.input.SetValue("/g")
	m.Update(keyOf(tea.KeyTab))
	if !hasLine(m, "/glob  /grep") {
		t.Fatal("an ambiguous prefix should list its commands")
	}
	for in, want := range map[string]string{"/wr x y": "write", "/he": "help", "/mo ask": "mode"} {
		cmd, err := parseInput(in, false)
		if err != nil || cmd.name != want {
			t.Errorf("parseInput(%q) = %q, %v; want %s", in, cmd.name, err, want)
		}
	}
	if _, err := parseInput("/g", false); err == nil || !strings.Contains(err.Error(), "could be") {
		t.Errorf("an ambiguous prefix: %v", err)
	}
}

// TestHelpBarKeepsCtrlC: however narrow, the help bar shows ctrl+c; /help
// lists each key once, main keys apart from dialog keys (item 16).
func TestHelpBarKeepsCtrlC(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	for _, w := range []int{20, 40, 80} {
		m.Update(tea.WindowSizeMsg{Width: w, Height: 12})
		rows := strings.Split(m.View(), "\n")
		if bar := rows[len(rows)-1]; !strings.Contains(bar, "ctrl+c") {
			t.Errorf("at width %d the help bar %q drops ctrl+c", w, bar)
		}
	}
	m.showHelp()
	seen := map[string]int{}
	for _, l := range m.sb.lines {
		if l.text == "in the approval dialog:" {
			seen = map[string]int{} // a section of its own
		}
		if f := strings.Fields(l.text); len(f) > 1 && l.kind == kindStdout && !strings.HasPrefix(f[0], "/") && !strings.HasPrefix(f[0], "!") {
			if seen[f[0]]++; seen[f[0]] > 1 {
				t.Errorf("/help lists %q twice in one section", f[0])
			}
		}
	}
	if !hasLine(m, "in the approval dialog:") || !hasLine(m, "ctrl+d") {
		t.Error("/help should list the dialog's keys apart, and ctrl+d")
	}
}

// TestCtrlDQuitsOnEmptyLine (item 20).
func TestCtrlDQuitsOnEmptyLine(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	typeText(m, "x")
	if _, cmd := m.Update(keyOf(tea.KeyCtrlD)); isQuit(cmd) {
		t.Fatal("ctrl+d with text in the input quit")
	}
	m.input.Reset()
	if _, cmd := m.Update(keyOf(tea.KeyCtrlD)); !isQuit(cmd) {
		t.Fatal("ctrl+d on an empty line should quit")
	}
}

// TestBellWhenBlurred: a request that arrives while the terminal has lost
// the focus rings the bell; with the focus, it does not (item 20).
func TestBellWhenBlurred(t *testing.T) {
	for _, blurred := range []bool{false, true} {
		out := make(chanWriter, 8)
		c := newClock()
		m := newModel(ctxBG(), Options{Now: c.now, Out: out, Provider: "local", Bridge: NewBridge(io.Discard)})
		m.phase = phaseReady
		if blurred {
			m.Update(tea.BlurMsg{})
		}
		_, cmd := m.Update(approvalMsg{id: 1, req: execReq("echo"), reply: make(chan approval.Decision, 1)})
		msg := cmd()
		if batch, ok := msg.(tea.BatchMsg); ok {
			for _, c := range batch {
				if c != nil {
					c()
				}
			}
		}
		rang := false
		select {
		case s := <-out:
			rang = s == "\a"
		default:
		}
		if rang != blurred {
			t.Errorf("blurred %v: bell rang %v", blurred, rang)
		}
	}
}

// chanWriter sends what is written to a channel.
type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// TestInteractiveCommandNote: a command that wants a terminal gets a note
// saying stdin is closed and pointing to sandbox shell (item 14).
func TestInteractiveCommandNote(t *testing.T) {
	for in, want := range map[string]string{"python3": "python3", "top -b": "top", "vim x": "vim", "python3 x.py": "", "cat file": "", "ls": ""} {
		if got := interactiveProgram(in); got != want {
			t.Errorf("interactiveProgram(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHistory(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	for _, s := range []string{"/mode ask", "/mode session"} {
		typeText(m, s)
		m.Update(keyOf(tea.KeyEnter))
	}
	typeText(m, "draft")
	m.Update(keyOf(tea.KeyUp))
	if v := m.input.Value(); v != "/mode session" {
		t.Fatalf("up: %q", v)
	}
	m.Update(keyOf(tea.KeyUp))
	if v := m.input.Value(); v != "/mode ask" {
		t.Fatalf("up up: %q", v)
	}
	m.Update(keyOf(tea.KeyDown))
	m.Update(keyOf(tea.KeyDown))
	if v := m.input.Value(); v != "draft" {
		t.Fatalf("back to the draft: %q", v)
	}
}

func TestParseInput(t *testing.T) {
	tests := []struct {
		in    string
		shell bool
		name  string
		args  []string
		rest  string
		err   string
	}{
		{in: "!ls -la", name: "exec", args: []string{"ls -la"}},
		{in: "ls -la", shell: true, name: "exec", args: []string{"ls -la"}},
		{in: "ls -la", err: "not a command"},
		{in: "!", name: "shell"},
		{in: "/write /workspace/a.txt hello  world", name: "write", args: []string{"/workspace/a.txt"}, rest: "hello  world"},
		{in: "/write /workspace/a.txt", name: "write", args: []string{"/workspace/a.txt"}},
		{in: `/edit a.txt "old text" 'new "x"'`, name: "edit", args: []string{"a.txt", "old text", `new "x"`}},
		{in: `/grep foo\ bar src`, name: "grep", args: []string{"foo bar", "src"}},
		{in: `/edit a.txt "unterminated`, err: "unterminated"},
		{in: "/frobnicate", err: "unknown command"},
		{in: "/ls", shell: true, name: "ls"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := parseInput(tt.in, tt.shell)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.name != tt.name || strings.Join(c.args, "|") != strings.Join(tt.args, "|") || (tt.rest != "" && c.rest != tt.rest) {
				t.Fatalf("got %+v", c)
			}
		})
	}
}

// TestEditArgs checks that /edit takes the arguments of `sandbox edit`.
func TestEditArgs(t *testing.T) {
	tests := []struct {
		args           []string
		p, old, new    string
		all, whole, ok bool
	}{
		{[]string{"a.txt"}, "a.txt", "", "", false, true, true},
		{[]string{"a.txt", "x", "y"}, "a.txt", "x", "y", false, false, true},
		{[]string{"a.txt", "x", "y", "--all"}, "a.txt", "x", "y", true, false, true},
		{[]string{"a.txt", "--old", "x", "--new", "y"}, "a.txt", "x", "y", false, false, true},
		{[]string{"--old=x", "a.txt", "--new=", "--all"}, "a.txt", "x", "", true, false, true},
		{[]string{"a.txt", "x"}, "", "", "", false, false, false},
		{[]string{"a.txt", "x", "y", "--old", "z"}, "", "", "", false, false, false},
		{[]string{"a.txt", "--all"}, "", "", "", false, false, false},
		{[]string{"a.txt", "--new", "y"}, "", "", "", false, false, false},
	}
	for _, tt := range tests {
		p, old, nw, all, whole, err := editArgs(tt.args)
		if (err == nil) != tt.ok || p != tt.p || old != tt.old || nw != tt.new || all != tt.all || whole != tt.whole {
			t.Errorf("editArgs(%q) = %q %q %q %v %v %v", tt.args, p, old, nw, all, whole, err)
		}
	}
}

func TestCompletion(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	typeText(m, "/read /workspace/sr")
	names := []string{"/workspace/src/", "/workspace/srv.txt", "/workspace/other"}
	m.Update(completionMsg{input: "/read /workspace/sr", before: "/read ", names: names})
	if v := m.input.Value(); v != "/read /workspace/sr" {
		t.Fatalf("two matches complete the common prefix only: %q", v)
	}
	if !hasLine(m, "src/  srv.txt") {
		t.Fatal("the candidates should be listed")
	}
	m.input.SetValue("/read src/ma")
	m.Update(completionMsg{input: "/read src/ma", before: "/read ", names: []string{"/workspace/src/main.go", "/workspace/src/lib/"}})
	if v := m.input.Value(); v != "/read src/main.go" {
		t.Fatalf("a relative path completes relative to /workspace: %q", v)
	}
	m.input.SetValue("changed meanwhile")
	m.Update(completionMsg{input: "/read x", before: "/read ", names: []string{"/workspace/xyz"}})
	if v := m.input.Value(); v != "changed meanwhile" {
		t.Fatalf("a stale completion changed the input: %q", v)
	}
}

func TestCtrlCCancelsThenQuits(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ctx, cancel := context.WithCancel(ctxBG())
	m.ops[1] = &opState{id: 1, title: "$ sleep 100", start: c.t, cancel: cancel}
	m.order = []int{1}
	_, cmd := m.Update(keyOf(tea.KeyCtrlC))
	if ctx.Err() == nil {
		t.Fatal("ctrl+c did not cancel the running operation")
	}
	if cmd != nil {
		if _, quit := cmd().(tea.QuitMsg); quit {
			t.Fatal("the first ctrl+c must not leave")
		}
	}
	_, cmd = m.Update(keyOf(tea.KeyCtrlC))
	if cmd == nil {
		t.Fatal("the second ctrl+c should leave")
	}
	if _, quit := cmd().(tea.QuitMsg); !quit {
		t.Fatal("the second ctrl+c should quit")
	}
}

func TestScrollbackStreams(t *testing.T) {
	sb := newScrollback(func(s string) string { return strings.ReplaceAll(s, "s3cret", "***") })
	sb.write(1, streamStdout, kindStdout, "hel")
	sb.write(2, streamStdout, kindStdout, "other\n")
	sb.write(1, streamStdout, kindStdout, "lo wor")
	sb.write(1, streamStdout, kindStdout, "ld\nnext s3")
	sb.write(1, streamStdout, kindStdout, "cret\x1b[31m red\x1b[0m\tx\r\n")
	var got []string
	for _, l := range sb.lines {
		got = append(got, l.text)
	}
	want := []string{"hello world", "other", "next *** red x"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", got, want)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                "plain",
		"\x1b[2J\x1b[Hcleared": "cleared",
		"50%\r100%":            "100%",
		"bell\a":               `bell\a`,
		"a\tb":                 "a       b",
		"zero\u200bwidth":      `zero\u200bwidth`,
		"naïve":                "naïve",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDialogMasksSecrets(t *testing.T) {
	c := newClock()
	m := newModel(ctxBG(), Options{Now: c.now, Out: io.Discard, Bridge: NewBridge(io.Discard),
		Mask: func(s string) string { return strings.ReplaceAll(s, "hunter2", "***") }})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	ask(m, 1, execReq("curl -H 'token: hunter2' example.com"))
	if v := m.View(); strings.Contains(v, "hunter2") || !strings.Contains(v, "token: ***") {
		t.Fatalf("the dialog shows a secret:\n%s", v)
	}
}

// backgroundTrouble says what makes style s depend on the terminal's
// background, which the program never asks for (package quiet): an
// adaptive colour, or white or black drawn on the terminal's own
// background (each vanishes on one of the two); "" when nothing does.
func backgroundTrouble(s lipgloss.Style) string {
	vanishing := map[lipgloss.Color]bool{"0": true, "7": true, "15": true, "16": true, "231": true, "255": true}
	for _, c := range []lipgloss.TerminalColor{s.GetForeground(), s.GetBackground()} {
		if _, ok := c.(lipgloss.AdaptiveColor); ok {
			return fmt.Sprintf("adaptive colour %v", c)
		}
	}
	if _, ok := s.GetBackground().(lipgloss.NoColor); !ok {
		return "" // on a background of its own
	}
	if c, ok := s.GetForeground().(lipgloss.Color); ok && vanishing[c] {
		return fmt.Sprintf("colour %s on the terminal's background", c)
	}
	return ""
}

// TestEditorStylesNameFixedColours: the built-in editor's styles (the
// textarea's own defaults are adaptive) depend on no background.
func TestEditorStylesNameFixedColours(t *testing.T) {
	t.Parallel()
	focused, blurred := editorStyles(NewStyles(io.Discard, true))
	m := newModel(context.Background(), Options{Out: io.Discard, Color: true})
	for name, s := range map[string]textarea.Style{
		"focused": focused, "blurred": blurred,
		"model's focused": m.editor.FocusedStyle, "model's blurred": m.editor.BlurredStyle,
	} {
		for field, st := range map[string]lipgloss.Style{
			"Base": s.Base, "CursorLine": s.CursorLine, "CursorLineNumber": s.CursorLineNumber,
			"EndOfBuffer": s.EndOfBuffer, "LineNumber": s.LineNumber, "Placeholder": s.Placeholder,
			"Prompt": s.Prompt, "Text": s.Text,
		} {
			if why := backgroundTrouble(st); why != "" {
				t.Errorf("%s %s: %s", name, field, why)
			}
		}
	}
}

// TestStylesReadOnAnyBackground: no style of the TUI depends on the
// terminal's background.
func TestStylesReadOnAnyBackground(t *testing.T) {
	t.Parallel()
	v := reflect.ValueOf(NewStyles(io.Discard, true))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		var styles []lipgloss.Style
		switch f := v.Field(i).Interface().(type) {
		case lipgloss.Style:
			styles = append(styles, f)
		case map[string]lipgloss.Style:
			for _, s := range f {
				styles = append(styles, s)
			}
		}
		for _, s := range styles {
			if why := backgroundTrouble(s); why != "" {
				t.Errorf("%s: %s", name, why)
			}
		}
	}
}
