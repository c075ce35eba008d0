package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
)

// isQuit reports whether cmd ends the program.
func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

// openQuitPrompt opens the quit prompt as quit does for a created sandbox.
func openQuitPrompt(m *model) {
	m.phase = phaseQuit
	m.quitGuard.arm(m.now(), m.lastKey)
}

// TestQuitPromptGuarded: only an explicit d after a pause deletes; enter,
// ctrl+c, esc and text typed at a person's pace never do (item 2).
func TestQuitPromptGuarded(t *testing.T) {
	tests := []struct {
		name   string
		keys   []tea.KeyMsg
		pause  bool // wait out the guard before the keys
		quits  bool
		phase  phase
		stayed bool
	}{
		{name: "d right away is dropped", keys: []tea.KeyMsg{runes("d")}, phase: phaseQuit},
		{name: "typing with d in it is dropped", keys: runesOf("added a diff"), phase: phaseQuit},
		{name: "a burst with d is text", keys: []tea.KeyMsg{runes("dd")}, pause: true, phase: phaseQuit},
		{name: "enter does not delete", keys: []tea.KeyMsg{keyOf(tea.KeyEnter)}, pause: true, phase: phaseQuit},
		{name: "ctrl+c stays", keys: []tea.KeyMsg{keyOf(tea.KeyCtrlC)}, phase: phaseReady, stayed: true},
		{name: "esc stays", keys: []tea.KeyMsg{keyOf(tea.KeyEsc)}, pause: true, phase: phaseReady, stayed: true},
		{name: "d after a pause deletes", keys: []tea.KeyMsg{runes("d")}, pause: true, quits: true, phase: phaseQuit},
		{name: "k after a pause keeps", keys: []tea.KeyMsg{runes("k")}, pause: true, quits: true, phase: phaseQuit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			openQuitPrompt(m)
			if tt.pause {
				c.advance(typeAheadGuard)
			}
			quits := false
			for _, k := range tt.keys {
				_, cmd := m.Update(k)
				quits = quits || isQuit(cmd)
				c.advance(120 * time.Millisecond)
			}
			if quits != tt.quits || m.phase != tt.phase {
				t.Fatalf("quit %v, phase %v; want quit %v, phase %v", quits, m.phase, tt.quits, tt.phase)
			}
			if tt.stayed != hasLine(m, "staying; the sandbox is still here") {
				t.Fatalf("staying should be said (%v)", tt.stayed)
			}
		})
	}
}

// TestQuitPromptNamesKeys: the prompt offers d, k and stay, and the help
// bar says ctrl+c stays.
func TestQuitPromptNamesKeys(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	openQuitPrompt(m)
	v := m.View()
	for _, want := range []string{"[d] delete it", "[k] keep it", "stay", "esc/ctrl+c stay"} {
		if !strings.Contains(v, want) {
			t.Fatalf("the quit prompt lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "d/enter") {
		t.Fatalf("enter must not be a key of deletion:\n%s", v)
	}
}

// openSession opens a session of a fake engine built with policy p into m.
func openSession(t *testing.T, m *model, p *approval.Policy) *engine.Session {
	t.Helper()
	e, _ := fakeEngine(t, m.bridge, p)
	s, err := e.Open(context.Background(), engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	m.Update(openedMsg{s: s})
	return s
}

// TestYesShownAndSwitchable: --yes shows in the status line as mode all,
// and shift+tab away from it really turns it off (item 3).
func TestYesShownAndSwitchable(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 24})
	s := openSession(t, m, &approval.Policy{Yes: true})
	status := func() string { return strings.Split(m.View(), "\n")[0] }
	if !strings.Contains(status(), "mode all (--yes)") {
		t.Fatalf("the status line should show --yes: %q", status())
	}
	m.Update(keyOf(tea.KeyShiftTab)) // all → ask
	if s.Gate().Mode() != approval.ModeAsk || !strings.Contains(status(), "mode ask") || strings.Contains(status(), "--yes") {
		t.Fatalf("gate mode %s, status %q: want ask without --yes", s.Gate().Mode(), status())
	}
	if !hasLine(m, "--yes is off until mode all") {
		t.Fatal("switching away from --yes should say it is off")
	}
}

// TestStatusShowsPolicy: a policy file's default and the number of session
// rules show in the status line (item 3).
func TestStatusShowsPolicy(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 24})
	s := openSession(t, m, &approval.Policy{Default: approval.Ask, DefaultOrigin: "policy.yaml:1: default ask"})
	if err := s.Gate().AllowForSession("exec:echo *"); err != nil {
		t.Fatal(err)
	}
	status := strings.Split(m.View(), "\n")[0]
	for _, want := range []string{"mode session", "default ask", "1 session rule"} {
		if !strings.Contains(status, want) {
			t.Fatalf("status line %q lacks %q", status, want)
		}
	}
}

// TestAutomaticApprovalsSaid: every approval no one was asked about says
// the flag or rule that gave it; the built-in defaults stay quiet (item 3).
func TestAutomaticApprovalsSaid(t *testing.T) {
	tests := []struct {
		dec  approval.Decision
		want string // "" means no line
	}{
		{approval.Decision{Allow: true, By: "flag", Rule: "--yes"}, "allowed exec touch x (--yes)"},
		{approval.Decision{Allow: true, By: "flag", Rule: `--allow "exec:touch *"`}, `allowed exec touch x (--allow "exec:touch *")`},
		{approval.Decision{Allow: true, By: "policy", Rule: "policy.yaml:3: allow exec:touch *"}, "allowed exec touch x (policy.yaml:3: allow exec:touch *)"},
		{approval.Decision{Allow: true, By: "session", Rule: approval.ExactOrigin}, "allowed exec touch x (" + approval.ExactOrigin + ")"},
		{approval.Decision{Allow: true, By: "default", Rule: "default: allowed when the user asks directly"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.dec.Rule, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			n := len(m.sb.lines)
			m.Update(eventMsg{engine.Event{Gate: &approval.Event{Type: approval.EventDecision, Request: execReq("touch x"), Decision: tt.dec}}})
			switch {
			case tt.want == "" && len(m.sb.lines) != n:
				t.Fatalf("a default approval printed %q", m.sb.lines[n].text)
			case tt.want != "" && !hasLine(m, tt.want):
				t.Fatalf("no line %q", tt.want)
			}
		})
	}
}

// TestDialogFitsTheScreen: a dialog for a 3 KB command never has more
// rows than the terminal, and its title, the start of the command and
// the first choice always show (item 6).
func TestDialogFitsTheScreen(t *testing.T) {
	long := "echo " + strings.Repeat("a-very-long-argument ", 150)
	for _, size := range [][2]int{{120, 36}, {80, 24}, {40, 12}, {30, 8}, {24, 6}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			ask(m, 1, execReq(long))
			ask(m, 2, approval.Request{Source: approval.SourceScript, Kind: approval.KindExec, Target: strings.Repeat("x ", 400)})
			v := m.View()
			rows := strings.Split(v, "\n")
			if len(rows) != size[1] {
				t.Fatalf("%d rows on a %d-row screen:\n%s", len(rows), size[1], v)
			}
			for _, want := range []string{"wants to", "$ echo a-", "[y]"} {
				if !strings.Contains(v, want) {
					t.Fatalf("the dialog lacks %q:\n%s", want, v)
				}
			}
		})
	}
}

// TestDownloadDialogShowsHost: a download names each host destination and
// warns about the host files it replaces (item 9).
func TestDownloadDialogShowsHost(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := approval.Request{Source: approval.SourceUser, Kind: approval.KindDownload, Target: "/workspace/d", Details: approval.Details{
		Dest:  dir,
		Files: []approval.FileEntry{{Path: "/workspace/d/a.txt", Size: 3}, {Path: "/workspace/d/sub/b.txt", Size: 4}},
		Bytes: 7,
	}}
	shown, hosts := hostDestinations(req)
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 30})
	m.Update(approvalMsg{id: 1, req: shown, reply: make(chan approval.Decision, 1), hosts: hosts})
	v := m.View()
	for _, want := range []string{
		"to the host at " + dir,
		"replaces 1 existing file(s) on the host",
		"/workspace/d/a.txt → " + filepath.Join(dir, "a.txt"),
		"/workspace/d/sub/b.txt → " + filepath.Join(dir, "sub", "b.txt"),
	} {
		if !strings.Contains(v, want) {
			t.Fatalf("the download dialog lacks %q:\n%s", want, v)
		}
	}
	if !strings.Contains(v, filepath.Join(dir, "a.txt")+"  3 B  (overwrites)") || strings.Contains(v, "b.txt  4 B  (overwrites)") {
		t.Fatalf("only the existing host file is marked:\n%s", v)
	}
	if req.Details.Files[0].Exists {
		t.Fatal("hostDestinations changed the gate's request")
	}
}

// TestTransferRateFromFirstSample: a first sample holding a burst of bytes
// shows no absurd rate; the rate counts from it (item 11).
func TestTransferRateFromFirstSample(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	_, cancel := context.WithCancel(ctxBG())
	defer cancel()
	m.ops[1] = &opState{id: 1, title: "download x", start: c.t, cancel: cancel}
	m.order = []int{1}
	m.Update(transferMsg{op: 1, done: 100 << 20, total: 200 << 20})
	if v := m.View(); strings.Contains(v, "/s") || !strings.Contains(v, "50%") {
		t.Fatalf("the first sample should show progress without a rate:\n%s", v)
	}
	c.advance(2 * time.Second)
	m.Update(transferMsg{op: 1, done: 120 << 20, total: 200 << 20})
	if v := m.View(); !strings.Contains(v, "10.0 MiB/s") || !strings.Contains(v, "8s left") {
		t.Fatalf("want 10.0 MiB/s and 8s left:\n%s", v)
	}
}

// TestConfirmGuarded: the confirmation before writing is guarded like the
// dialog, and ctrl+c answers no.
func TestConfirmGuarded(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	ran := false
	m.confirm = &confirmPrompt{question: "write it?", yes: "write it", no: "nothing written", run: func() tea.Cmd { ran = true; return nil }}
	m.confirm.guard.arm(c.t, c.t)
	m.Update(runes("y"))
	if ran || m.confirm == nil {
		t.Fatal("a y typed as the question opened answered it")
	}
	m.Update(keyOf(tea.KeyCtrlC))
	if ran || m.confirm != nil || !hasLine(m, "nothing written") {
		t.Fatal("ctrl+c should answer no")
	}
}

// openFlow opens a model on a fake engine with policy p through the
// harness and returns both and the session.
func openFlow(t *testing.T, c *clock, p *approval.Policy) (*model, *harness, *engine.Session) {
	t.Helper()
	b := NewBridge(io.Discard)
	e, _ := fakeEngine(t, b, p)
	m := newModel(context.Background(), Options{Now: c.now, Out: io.Discard, Bridge: b, Provider: "fake",
		Open: func(ctx context.Context) (*engine.Session, error) { return e.Open(ctx, engine.OpenOptions{}) }})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	h := newHarness(t, m)
	h.until("the session to open", func() bool { return m.phase == phaseReady })
	t.Cleanup(func() { m.session.Close(context.Background()) })
	return m, h, m.session
}

// put writes a file into the session's sandbox.
func put(t *testing.T, s *engine.Session, p, content string) {
	t.Helper()
	if err := s.Write(context.Background(), p, strings.NewReader(content), true); err != nil {
		t.Fatal(err)
	}
}

// get reads a file of the session's sandbox.
func get(t *testing.T, s *engine.Session, p string) string {
	t.Helper()
	var b strings.Builder
	if err := s.Read(context.Background(), p, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteOpensCurrentContent: /write on an existing file opens what it
// holds; saving it unchanged or empty asks first, and "no" writes nothing
// (item 10).
func TestWriteOpensCurrentContent(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(string) string
		question string // "" means no question
		answer   tea.KeyMsg
		want     string
	}{
		{"unchanged asks; n keeps the file", func(s string) string { return s }, "is unchanged", runes("n"), "keep me\n"},
		{"empty asks; n keeps the file", func(string) string { return "" }, "is empty", runes("n"), "keep me\n"},
		{"empty asks; y writes it", func(string) string { return "" }, "is empty", runes("y"), ""},
		{"a change writes without asking", func(s string) string { return s + "more\n" }, "", tea.KeyMsg{}, "keep me\nmore\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			m, h, s := openFlow(t, c, &approval.Policy{})
			put(t, s, "/workspace/k.txt", "keep me\n")
			h.line("/write /workspace/k.txt")
			h.until("the editor", func() bool { return m.editing != nil })
			if got := m.editor.Value(); got != "keep me\n" {
				t.Fatalf("the editor opened with %q, not the file's content", got)
			}
			m.editor.SetValue(tt.edit(m.editor.Value()))
			h.key(tea.KeyMsg{Type: tea.KeyCtrlS})
			if tt.question != "" {
				h.until("the question", func() bool { return m.confirm != nil })
				if v := m.View(); !strings.Contains(v, tt.question) {
					t.Fatalf("the question should say %q:\n%s", tt.question, v)
				}
				c.advance(typeAheadGuard)
				h.key(tt.answer)
			}
			h.until("the end", func() bool {
				return m.confirm == nil && len(m.ops) == 0 && (hasLine(m, "nothing written") || hasLine(m, "wrote /workspace/k.txt"))
			})
			if got := get(t, s, "/workspace/k.txt"); got != tt.want {
				t.Fatalf("the file holds %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReadPagesAndSummarises: /read shows one page of a large file and
// says how to see more; binary content is summarised, not shown (item 12).
func TestReadPagesAndSummarises(t *testing.T) {
	var big strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	tests := []struct {
		name, content, cmd string
		shows, hides       []string
		summary            string
	}{
		{"first page", big.String(), "/read /workspace/f", []string{"line 1", fmt.Sprintf("line %d", readPageLines)}, []string{fmt.Sprintf("line %d", readPageLines+1)},
			fmt.Sprintf("showed lines 1–%d of /workspace/f; /read /workspace/f %d shows the next page", readPageLines, readPageLines+1)},
		{"last page", big.String(), fmt.Sprintf("/read /workspace/f %d", 5001-readPageLines/2), []string{fmt.Sprintf("line %d", 5001-readPageLines/2), "line 5000"}, []string{fmt.Sprintf("line %d", 5000-readPageLines/2)}, ""},
		{"binary", "ELF\x00\x01\x02" + strings.Repeat("\x00", 20000), "/read /workspace/f", nil, []string{"ELF"}, "/workspace/f is binary"},
		{"short text", "just this\n", "/read /workspace/f", []string{"just this"}, nil, ""},
		{"past the end", "a\nb\n", "/read /workspace/f 9", nil, []string{"a"}, "/workspace/f has only 2 lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			m, h, s := openFlow(t, c, &approval.Policy{})
			put(t, s, "/workspace/f", tt.content)
			n := len(m.sb.lines)
			h.line(tt.cmd)
			h.until("the read", func() bool { return len(m.ops) == 0 && len(m.sb.lines) > n+1 })
			for _, want := range tt.shows {
				if !hasExactLine(m, want) {
					t.Errorf("%q is not shown", want)
				}
			}
			for _, not := range tt.hides {
				if hasExactLine(m, not) || (not == "ELF" && hasLine(m, "ELF")) {
					t.Errorf("%q is shown", not)
				}
			}
			if tt.summary != "" && !hasLine(m, tt.summary) {
				t.Errorf("no summary %q", tt.summary)
			}
			if hasLine(m, `\x00`) {
				t.Error("NUL bytes flooded the scrollback")
			}
		})
	}
}

// TestInteractiveCommandSaysWhy: running a program that wants a terminal
// says that stdin is closed and points to sandbox shell (item 14).
func TestInteractiveCommandSaysWhy(t *testing.T) {
	c := newClock()
	m, h, s := openFlow(t, c, &approval.Policy{})
	h.line("!python3")
	h.until("the note", func() bool { return hasLine(m, "stdin is closed") })
	if !hasLine(m, "sandbox shell --sandbox-id "+s.ID()) {
		t.Fatal("the note should point to sandbox shell")
	}
	n := len(m.sb.lines)
	h.line("!python3 -c 1")
	h.until("the command", func() bool { return len(m.sb.lines) > n })
	if m.sb.find("stdin is closed") >= n {
		t.Fatal("a command with a script needs no note")
	}
}

// TestConcurrentOpsLabelled: output of operations running at once says
// whose it is, their ends name them, and a duration leaves out the time
// spent waiting for approval; the status line says it waits (item 21).
func TestConcurrentOpsLabelled(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	noop := func(context.Context, int) opResult { return opResult{} }
	m.start("$ make a", noop)
	m.start("$ make b", noop)
	m.Update(textMsg{op: 1, stream: streamStdout, data: "from a\n"})
	m.Update(textMsg{op: 2, stream: streamStdout, data: "from b\n"})
	if m.sb.find("── $ make a") < 0 || m.sb.find("── $ make b") < m.sb.find("from a") {
		t.Fatal("interleaved output should be labelled with its command")
	}
	ask(m, 1, execReq("make a")) // what op 1 asks, through the bridge it carries op
	m.dlg.queue[0].op = 1
	if status := strings.Split(m.View(), "\n")[0]; !strings.Contains(status, "waiting for approval") {
		t.Fatalf("the status line should say it waits: %q", status)
	}
	c.advance(5 * time.Second)
	m.Update(runes("y"))
	c.advance(time.Second)
	code := 0
	m.Update(opDoneMsg{id: 1, res: opResult{code: &code}})
	if !hasLine(m, "exit 0 (1s) · $ make a") {
		t.Fatalf("want the end named and 1s without the wait; lines:\n%v", m.sb.lines[len(m.sb.lines)-1])
	}
}

// TestLongOutputFolds: an operation's long output folds when it ends,
// ctrl+o shows it again, and scrolling back says how many new lines came
// meanwhile; the mouse wheel scrolls too (item 17).
func TestLongOutputFolds(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	noop := func(context.Context, int) opResult { return opResult{} }
	m.start("$ seq", noop)
	n := foldOver + 500
	for i := 1; i <= n; i++ {
		m.Update(textMsg{op: 1, stream: streamStdout, data: fmt.Sprintf("n%d\n", i)})
	}
	code := 0
	m.Update(opDoneMsg{id: 1, res: opResult{code: &code}})
	marker := fmt.Sprintf("… %s more lines, ctrl+o to expand", groupDigits(n-foldKeep))
	if !hasLine(m, marker) || hasExactLine(m, "n1") || !hasExactLine(m, fmt.Sprintf("n%d", n)) {
		t.Fatalf("the output should fold to its last %d lines behind %q", foldKeep, marker)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlO})
	if hasLine(m, marker) || !hasExactLine(m, "n1") {
		t.Fatal("ctrl+o should show the folded lines")
	}
	m.Update(tea.MouseMsg{Button: tea.MouseButtonWheelUp, Action: tea.MouseActionPress})
	if m.sb.offset != wheelLines {
		t.Fatalf("the wheel scrolled to %d, want %d", m.sb.offset, wheelLines)
	}
	m.sb.add(kindStdout, "late")
	if v := m.View(); !strings.Contains(v, "scrolled: 1 new line below") {
		t.Fatalf("scrolled back, the view should count new lines:\n%s", v)
	}
}

// TestRulesListRevokeSave: /rules lists the session rules with where each
// came from, saves one to a policy file the user names, and revokes one,
// after which the request asks again (item 15).
func TestRulesListRevokeSave(t *testing.T) {
	c := newClock()
	m, h, _ := openFlow(t, c, &approval.Policy{Default: approval.Ask})
	h.line("!echo hi")
	h.until("the dialog", m.dlg.open)
	c.advance(typeAheadGuard)
	h.key(runes("s"))
	h.until("the exec", func() bool { return hasLine(m, "exit 0") })
	h.line("/rules")
	if !hasLine(m, "1. allow exec:echo hi * — your answer to exec echo hi") {
		t.Fatalf("/rules should list the rule and where it came from: %v", m.sb.lines)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("default: ask\nallow: \"exec:ls\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.line("/rules save 1 " + file)
	h.until("the save", func() bool { return hasLine(m, "added allow exec:echo hi * to "+file) })
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := approval.ParsePolicy(file, data)
	if err != nil || len(p.Allow) != 2 || p.Allow[1].Rule.String() != "exec:echo hi *" || p.Default != approval.Ask {
		t.Fatalf("the policy file now holds %q (%v)", data, err)
	}
	h.line("/rules revoke 1")
	if !hasLine(m, "revoked the session rule allow exec:echo hi *") {
		t.Fatal("revoke should say so")
	}
	h.line("!echo hi there")
	h.until("the dialog again", m.dlg.open)
}

// TestMessagesPlain: an error reads as one sentence: no Go sentinel after
// it says the same in words, and "cancelled" for "context canceled"
// (item 22).
func TestMessagesPlain(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("/w/a already exists; pass --force to overwrite it: %w", providers.ErrExists), "/w/a already exists; pass --force to overwrite it"},
		{fmt.Errorf("edit /w/a: the text to replace was not found: %w", providers.ErrInvalid), "edit /w/a: the text to replace was not found"},
		{fmt.Errorf("approval: %w", context.Canceled), "approval: cancelled"},
		{errors.New("plain"), "plain"},
	}
	for _, tt := range tests {
		if got := message(tt.err); got != tt.want {
			t.Errorf("message(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestHistoryPersists: the input history is saved and read back, newest
// entries kept, readable by its owner only (item 20).
func TestHistoryPersists(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state", "tui-history")
	var h history
	for i := range historyKeep + 5 {
		h.push(fmt.Sprintf("!echo %d", i))
	}
	h.push(`!printf 'a\tb "q"'`)
	if err := h.save(file); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v %v", fi, err)
	}
	var back history
	back.load(file)
	if len(back.items) != historyKeep || back.items[len(back.items)-1] != `!printf 'a\tb "q"'` || back.items[0] != "!echo 6" {
		t.Fatalf("read back %d entries, first %q, last %q", len(back.items), back.items[0], back.items[len(back.items)-1])
	}
	if got := back.prev(""); got != `!printf 'a\tb "q"'` {
		t.Fatalf("up after loading: %q", got)
	}
}

// TestAllowRestOfPlan: a plan's request names the plan and its step, and
// "allow the rest of this plan" answers its later requests without a
// dialog, not those of other operations (item 19).
func TestAllowRestOfPlan(t *testing.T) {
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	noop := func(context.Context, int) opResult { return opResult{} }
	m.start("run plan.yaml", noop)
	m.ops[1].plan = true
	m.start("$ other", noop)
	m.Update(textMsg{op: 1, stream: streamInfo, data: "step 2/5: exec make\n"})
	first := make(chan approval.Decision, 1)
	m.Update(approvalMsg{id: 1, req: execReq("make"), reply: first, op: 1})
	if v := m.View(); !strings.Contains(v, "run plan.yaml · step 2/5: exec make") || !strings.Contains(v, "[p] allow the rest of this plan") {
		t.Fatalf("the dialog should name the plan, the step and offer the rest:\n%s", v)
	}
	c.advance(typeAheadGuard)
	m.Update(runes("p"))
	if d, ok := answered(first); !ok || !d.Allow {
		t.Fatalf("p should allow: %+v %v", d, ok)
	}
	later := make(chan approval.Decision, 1)
	m.Update(approvalMsg{id: 2, req: execReq("make install"), reply: later, op: 1})
	if d, ok := answered(later); !ok || !d.Allow || m.dlg.open() {
		t.Fatalf("a later step of the plan should pass without a dialog: %+v %v", d, ok)
	}
	other := make(chan approval.Decision, 1)
	m.Update(approvalMsg{id: 3, req: execReq("rm x"), reply: other, op: 2})
	if _, ok := answered(other); ok || !m.dlg.open() || strings.Contains(m.View(), "[p]") {
		t.Fatal("another operation's request must still ask, without the plan choice")
	}
}

// TestDenialSaidOnce: an operation stopped by a denial ends with one short
// line, not the request and the rule again; the hint stays for a rule's
// denial (item 22).
func TestDenialSaidOnce(t *testing.T) {
	tests := []struct {
		by, want string
		hint     bool
	}{
		{"user", "stopped: run plan.yaml was denied", false},
		{"policy", `stopped: run plan.yaml was denied (allow it with --allow "exec:touch *")`, true},
	}
	for _, tt := range tests {
		t.Run(tt.by, func(t *testing.T) {
			c := newClock()
			m := testModel(t, c)
			m.start("run plan.yaml", func(context.Context, int) opResult { return opResult{} })
			err := fmt.Errorf("step 2 (line 3, exec %q): %w", "touch x", &approval.DeniedError{
				Request: execReq("touch x"), Decision: approval.Decision{By: tt.by}, Hint: `allow it with --allow "exec:touch *"`})
			m.Update(opDoneMsg{id: 1, res: opResult{err: err}})
			last := m.sb.lines[len(m.sb.lines)-1].text
			if last != tt.want || strings.Contains(last, "step 2") {
				t.Fatalf("the end says %q, want %q", last, tt.want)
			}
		})
	}
}
