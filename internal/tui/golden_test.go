package tui

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/agentbox/sandbox/internal/approval"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs (go test -run %s -update rewrites it)\n--- want\n%s\n--- got\n%s", file, t.Name(), want, got)
	}
}

// frame renders the view with a visible frame and checks its size.
func frame(t *testing.T, m *model) string {
	t.Helper()
	v := m.View()
	rows := strings.Split(v, "\n")
	if len(rows) != m.height && m.width >= minWidth && m.height >= minHeight {
		t.Errorf("view has %d rows, want the terminal height %d", len(rows), m.height)
	}
	for i, r := range rows {
		if w := len([]rune(r)); w > m.width && m.width >= minWidth {
			t.Errorf("row %d is %d cells wide, more than %d: %q", i, w, m.width, r)
		}
		if strings.Contains(r, "\x1b") {
			t.Errorf("row %d has an escape sequence with colour off: %q", i, r)
		}
	}
	return v + "\n"
}

func sized(t *testing.T, w, h int) (*model, *clock) {
	c := newClock()
	m := testModel(t, c)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.info.ExpiresAt = c.t.Add(59*time.Minute + 30*time.Second)
	m.sb.add(kindOK, "ready: local sandbox sb-test. Type !command to run it, /help for more.")
	m.sb.add(kindOp, "› $ make test")
	m.sb.write(1, streamStdout, kindStdout, "ok  \tgithub.com/agentbox/sandbox/internal/tui\t0.021s\n")
	m.sb.write(1, streamStderr, kindStderr, "warning: a very long line that is longer than the terminal is wide so it has to wrap onto the next rows\n")
	m.sb.add(kindOK, "exit 0 (1.2s)")
	return m, c
}

func TestGoldenViews(t *testing.T) {
	writeReq := approval.Request{Source: approval.SourceUser, Kind: approval.KindWrite, Provider: "local", Sandbox: "sb-test", Target: "/workspace/notes.txt",
		Details: approval.Details{Bytes: 4, Diff: "--- a/workspace/notes.txt\n+++ b/workspace/notes.txt\n@@ -1 +1 @@\n-hello\n+bye\n"}}
	uploadReq := approval.Request{Source: approval.SourceScript, Kind: approval.KindUpload, Provider: "local", Sandbox: "sb-test", Target: "/workspace/src",
		Details: approval.Details{Dest: "/workspace/src", From: "/home/me/project/src", Bytes: 3 << 20, Files: []approval.FileEntry{
			{Path: "/workspace/src/main.go", Size: 1 << 20, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
			{Path: "/workspace/src/go.mod", Size: 2 << 20, SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", Exists: true},
		}}}
	tests := []struct {
		name  string
		w, h  int
		setup func(m *model, c *clock)
	}{
		{"ready_80x24", 80, 24, func(m *model, c *clock) {}},
		{"shell_mode_80x10", 80, 10, func(m *model, c *clock) { m.toggleShell(); typeText(m, "ls -la") }},
		{"dialog_exec_80x24", 80, 24, func(m *model, c *clock) {
			r := execReq("go test ./...")
			r.Details.Cwd = "/workspace/app"
			ask(m, 1, r)
		}},
		{"dialog_write_diff_80x24", 80, 24, func(m *model, c *clock) { ask(m, 1, writeReq) }},
		{"dialog_upload_batch_100x30", 100, 30, func(m *model, c *clock) {
			ask(m, 1, uploadReq)
			ask(m, 2, execReq("echo next"))
		}},
		{"dialog_reason_80x24", 80, 24, func(m *model, c *clock) {
			ask(m, 1, execReq("rm -rf build"))
			c.advance(typeAheadGuard)
			sendAll(m, runes("r"))
			typeText(m, "use make clean")
		}},
		{"dialog_narrow_28x14", 28, 14, func(m *model, c *clock) { ask(m, 1, writeReq) }},
		{"transfer_80x12", 80, 12, func(m *model, c *clock) {
			m.ops[7] = &opState{id: 7, title: "upload ./big → /workspace/big", start: c.t}
			m.order = []int{7}
			m.Update(transferMsg{op: 7, done: 0, total: 100 << 20})
			c.advance(4 * time.Second)
			m.Update(transferMsg{op: 7, done: 40 << 20, total: 100 << 20})
		}},
		{"quit_prompt_80x12", 80, 12, func(m *model, c *clock) { m.phase = phaseQuit }},
		{"editor_60x16", 60, 16, func(m *model, c *clock) {
			m.openEditor(editTarget{path: "/workspace/notes.txt"})
			typeText(m, "first line")
		}},
		{"failed_60x10", 60, 10, func(m *model, c *clock) {
			m.Update(openedMsg{err: fmt.Errorf("setup failed: exit 3")})
		}},
		{"too_small_12x4", 12, 4, func(m *model, c *clock) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, c := sized(t, tt.w, tt.h)
			tt.setup(m, c)
			golden(t, tt.name, frame(t, m))
		})
	}
}

func TestResizeKeepsFrame(t *testing.T) {
	m, _ := sized(t, 80, 24)
	ask(m, 1, execReq("echo hi"))
	for _, size := range [][2]int{{120, 40}, {40, 12}, {20, 6}, {200, 60}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		frame(t, m)
	}
}

// BenchmarkViewMillionLines measures one frame with a million lines of
// output in the scrollback: the cost must not depend on that number.
func BenchmarkViewMillionLines(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := newClock()
			m := newModel(ctxBG(), Options{Now: c.now, Provider: "local", Bridge: NewBridge(nil)})
			m.phase = phaseReady
			m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
			var chunk strings.Builder
			for i := range n {
				fmt.Fprintf(&chunk, "line %d of the output of a busy command\n", i)
				if chunk.Len() > 32<<10 {
					m.Update(textMsg{op: 1, stream: streamStdout, data: chunk.String()})
					chunk.Reset()
				}
			}
			m.Update(textMsg{op: 1, stream: streamStdout, data: chunk.String()})
			if len(m.sb.lines) < n {
				b.Fatalf("%d lines, want %d", len(m.sb.lines), n)
			}
			b.ResetTimer()
			for b.Loop() {
				_ = m.View()
			}
		})
	}
}

// BenchmarkAppendOutput measures taking in streamed output.
func BenchmarkAppendOutput(b *testing.B) {
	data := strings.Repeat("a line of output of moderate length, like a compiler's\n", 600)
	b.SetBytes(int64(len(data)))
	m := newModel(ctxBG(), Options{Provider: "local", Bridge: NewBridge(nil)})
	for b.Loop() {
		m.Update(textMsg{op: 1, stream: streamStdout, data: data})
	}
}

// TestColourOnlyAddsEscapes renders the same screens with colour: the text
// and layout are those of the colour-off goldens.
func TestColourOnlyAddsEscapes(t *testing.T) {
	for _, setup := range []func(m *model){
		func(m *model) {},
		func(m *model) { ask(m, 1, execReq("go test ./...")) },
	} {
		plain, _ := sized(t, 80, 24)
		setup(plain)
		coloured, _ := sized(t, 80, 24)
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(termenv.ANSI256)
		coloured.st = stylesFor(r, true)
		setup(coloured)
		cv := coloured.View()
		if !strings.Contains(cv, "\x1b[") {
			t.Fatal("colour on, but no escape sequences")
		}
		if got, want := ansi.Strip(cv), plain.View(); got != want {
			t.Fatalf("colour changed the text:\n--- plain\n%s\n--- coloured, stripped\n%s", want, got)
		}
	}
}
