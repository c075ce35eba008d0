package tui

import (
	"context"
	"errors"
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
	"github.com/agentbox/sandbox/providers/fake"
)

// harness is a minimal event loop for the model: it runs the commands
// Update returns in goroutines and feeds their messages back, one at a
// time, like Bubble Tea does, but without a terminal. Clock and spinner
// ticks are dropped so that tests end.
type harness struct {
	t    *testing.T
	m    *model
	msgs chan tea.Msg
	quit bool // a tea.Quit came back
}

func newHarness(t *testing.T, m *model) *harness {
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 64)}
	h.run(m.Init())
	return h
}

func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() { h.msgs <- cmd() }()
}

func (h *harness) process(msg tea.Msg) {
	switch msg := msg.(type) {
	case tea.QuitMsg:
		h.quit = true
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case batchMsg, openedMsg, opDoneMsg, completionMsg, loadedMsg, editorDoneMsg, savedRuleMsg:
		_, cmd := h.m.Update(msg)
		h.run(cmd)
	}
}

// until processes messages until cond holds.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case msg := <-h.msgs:
			h.process(msg)
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s; screen:\n%s", what, h.m.View())
		}
	}
}

// key sends a key press and runs what it starts.
func (h *harness) key(k tea.KeyMsg) {
	_, cmd := h.m.Update(k)
	h.run(cmd)
}

func (h *harness) line(text string) {
	h.m.input.SetValue(text)
	h.key(keyOf(tea.KeyEnter))
}

// fakeEngine is an engine on the in-memory provider whose approver, events
// and progress go through b.
func fakeEngine(t *testing.T, b *Bridge, p *approval.Policy) (*engine.Engine, *fake.Provider) {
	fk := fake.New()
	reg := fake.Registration()
	reg.New = func(providers.Config) (providers.Provider, error) { return fk, nil }
	e := engine.New(engine.Options{
		Registry: providers.NewRegistry(reg), StateDir: t.TempDir(), DefaultProvider: "fake",
		Policy: p, Approver: b, Events: b.Event, Progress: b.Progress(),
	})
	return e, fk
}

// TestFlowInProcess drives the model against a real engine and gate on the
// fake provider: a write shown with its diff and allowed, a command allowed
// for the session (the next identical one is not asked), tab completion of
// a remote path, and quitting a created sandbox.
func TestFlowInProcess(t *testing.T) {
	c := newClock()
	b := NewBridge(io.Discard)
	e, fk := fakeEngine(t, b, &approval.Policy{Default: approval.Ask})
	ctx := context.Background()
	m := newModel(ctx, Options{Now: c.now, Out: io.Discard, Bridge: b, Provider: "fake",
		Open: func(ctx context.Context) (*engine.Session, error) { return e.Open(ctx, engine.OpenOptions{}) }})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	h := newHarness(t, m)
	h.until("the session to open", func() bool { return m.phase == phaseReady })
	if !strings.Contains(m.View(), "fake-1") {
		t.Fatalf("status line lacks the sandbox id:\n%s", m.View())
	}

	h.line("/write /workspace/a.txt hi there")
	h.until("the write's dialog", m.dlg.open)
	if v := m.View(); !strings.Contains(v, "+hi there") || !strings.Contains(v, "user wants to write") {
		t.Fatalf("the dialog should show the diff:\n%s", v)
	}
	c.advance(typeAheadGuard)
	h.key(runes("y"))
	h.until("the write to finish", func() bool { return hasLine(m, "wrote /workspace/a.txt") })

	h.line("!echo hello")
	h.until("the exec's dialog", m.dlg.open)
	c.advance(typeAheadGuard)
	h.key(runes("e"))
	h.until("the exec to finish", func() bool { return hasLine(m, "exit 0") })
	if !hasLine(m, "hello") || !hasLine(m, "allowed again for the session when identical") {
		t.Fatal("the output or the added rule is missing")
	}
	exits := m.sb.find("exit 0")
	h.line("!echo hello")
	h.until("the second exec", func() bool { return m.sb.find("exit 0") > exits || m.dlg.open() })
	if m.dlg.open() {
		t.Fatal("the exact call allowed for the session was asked again")
	}

	// Edit with OLD NEW: the dialog shows the change.
	h.line(`/edit /workspace/a.txt there "the world"`)
	h.until("the edit's dialog", m.dlg.open)
	if v := m.View(); !strings.Contains(v, "-hi there") || !strings.Contains(v, "+hi the world") {
		t.Fatalf("the edit's dialog should show the diff:\n%s", v)
	}
	c.advance(typeAheadGuard)
	h.key(runes("y"))
	h.until("the edit", func() bool { return hasLine(m, "edited /workspace/a.txt") })

	// Edit the whole file in the multi-line input.
	h.line("/edit /workspace/a.txt")
	h.until("the editor with the file's content", func() bool { return m.editing != nil })
	if m.editor.Value() != "hi the world\n" {
		t.Fatalf("the editor holds %q", m.editor.Value())
	}
	m.editor.SetValue("hi the world\nand more\n")
	h.key(tea.KeyMsg{Type: tea.KeyCtrlS})
	h.until("the whole-file edit's dialog", m.dlg.open)
	if v := m.View(); !strings.Contains(v, "+and more") || !strings.Contains(v, "user wants to edit") {
		t.Fatalf("the edit's dialog should show the added line:\n%s", v)
	}
	c.advance(typeAheadGuard)
	h.key(runes("n"))
	h.until("the denial", func() bool {
		return hasLine(m, "✘ denied edit /workspace/a.txt") && hasLine(m, "stopped: edit /workspace/a.txt was denied")
	})

	// Reads and lists are allowed without asking.
	for _, tc := range []struct{ in, want string }{
		{"/read /workspace/a.txt", "hi the world"},
		{"/ls", "/workspace/a.txt"},
		{"/glob *.txt", "1 matches"},
		{"/grep world", "/workspace/a.txt:1: hi the world"},
	} {
		n := len(m.sb.lines)
		h.line(tc.in)
		h.until(tc.in, func() bool { return m.sb.find(tc.want) >= n })
		if m.dlg.open() {
			t.Fatalf("%s asked for approval", tc.in)
		}
	}

	// A download asks (it writes on the host) and lands the file.
	local := filepath.Join(t.TempDir(), "a-copy.txt")
	h.line("/download /workspace/a.txt " + local)
	h.until("the download's dialog", m.dlg.open)
	if v := m.View(); !strings.Contains(v, "download /workspace/a.txt from the sandbox") || !strings.Contains(v, "to the host at "+local) {
		t.Fatalf("the download dialog should name both ends:\n%s", v)
	}
	c.advance(typeAheadGuard)
	h.key(runes("y"))
	h.until("the download", func() bool { return hasLine(m, "download done") })
	if data, err := os.ReadFile(local); err != nil || string(data) != "hi the world\n" {
		t.Fatalf("downloaded %q, %v", data, err)
	}

	m.input.SetValue("/read /workspace/a")
	h.key(keyOf(tea.KeyTab))
	h.until("the completion", func() bool { return m.input.Value() == "/read /workspace/a.txt" })

	h.line("/quit")
	if m.phase != phaseQuit || !strings.Contains(m.View(), "Delete it?") {
		t.Fatalf("quitting a created sandbox should ask:\n%s", m.View())
	}
	c.advance(typeAheadGuard)
	_, cmd := m.Update(runes("d"))
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("d should quit")
	}
	if m.session.Keep() {
		t.Fatal("d chose delete, but the session keeps the sandbox")
	}
	if err := m.session.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := fk.List(ctx, providers.Filter{}); len(list) != 0 {
		t.Fatalf("sandboxes left: %v", list)
	}
}

// TestFlowCancelWithdrawsRequest cancels an operation while its request
// waits in the dialog: the request leaves the dialog and the operation
// reports it was cancelled.
func TestFlowCancelWithdrawsRequest(t *testing.T) {
	c := newClock()
	b := NewBridge(io.Discard)
	e, _ := fakeEngine(t, b, &approval.Policy{Default: approval.Ask})
	m := newModel(context.Background(), Options{Now: c.now, Out: io.Discard, Bridge: b, Provider: "fake",
		Open: func(ctx context.Context) (*engine.Session, error) { return e.Open(ctx, engine.OpenOptions{}) }})
	h := newHarness(t, m)
	h.until("the session to open", func() bool { return m.phase == phaseReady })
	h.line("!sleep 100")
	h.until("the dialog", m.dlg.open)
	h.key(keyOf(tea.KeyCtrlC))
	h.until("the request to be withdrawn and the op to end", func() bool { return !m.dlg.open() && len(m.ops) == 0 })
	if !hasLine(m, "cancelled: $ sleep 100") {
		t.Fatal("the cancelled operation is not reported")
	}
}

// TestFlowOpenFails shows why the session did not open; any key leaves and
// Run returns the error.
func TestFlowOpenFails(t *testing.T) {
	b := NewBridge(io.Discard)
	boom := errors.New("setup failed: exit 3")
	m := newModel(context.Background(), Options{Out: io.Discard, Bridge: b, Provider: "fake",
		Open: func(ctx context.Context) (*engine.Session, error) { return nil, boom }})
	h := newHarness(t, m)
	h.until("the failure", func() bool { return m.phase == phaseFailed })
	if !hasLine(m, "could not open the sandbox: setup failed: exit 3") {
		t.Fatal("the error is not shown")
	}
	_, cmd := m.Update(runes("x"))
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("a key should leave")
	}
}

func TestBridgeDetached(t *testing.T) {
	var fallback strings.Builder
	b := NewBridge(&fallback)
	b.Detach()
	d, err := b.Approve(context.Background(), execReq("echo hi"))
	if err != nil || d.Allow || d.Reason == "" {
		t.Fatalf("after Detach, Approve = %+v, %v; want a denial with a reason", d, err)
	}
	io.WriteString(b.Progress(), "kept sandbox x\n")
	if fallback.String() != "kept sandbox x\n" {
		t.Fatalf("progress after Detach went nowhere: %q", fallback.String())
	}
}

// TestFlowInterruptWhileOpening leaves once the interrupted open is undone.
func TestFlowInterruptWhileOpening(t *testing.T) {
	b := NewBridge(io.Discard)
	started := make(chan struct{})
	m := newModel(context.Background(), Options{Out: io.Discard, Bridge: b, Provider: "fake",
		Open: func(ctx context.Context) (*engine.Session, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}})
	h := newHarness(t, m)
	h.until("the open to start", func() bool {
		select {
		case <-started:
			return true
		default:
			return false
		}
	})
	h.key(keyOf(tea.KeyCtrlC))
	h.until("the program to quit", func() bool { return h.quit })
	if !errors.Is(m.opener.err, context.Canceled) {
		t.Fatalf("open error %v", m.opener.err)
	}
}
