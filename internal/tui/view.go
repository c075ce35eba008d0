package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/output"
)

// Smallest terminal the layout works in.
const (
	minWidth  = 20
	minHeight = 6
)

// View draws the screen: status line, scrollback, the bottom panel (input,
// running operations, dialog, editor or quit prompt) and the help bar.
func (m *model) View() string {
	if m.width < minWidth || m.height < minHeight {
		return ansi.Truncate(fmt.Sprintf("terminal too small (%dx%d); need %dx%d", m.width, m.height, minWidth, minHeight), max(m.width, 1), "")
	}
	if m.dlg.open() && m.phase != phaseQuit && m.confirm == nil && m.height < fullScreenBelow {
		// A small terminal gives the whole screen to the request.
		rows := strings.Split(m.dlg.render(m.width, m.height-1, &m.st, m.now()), "\n")
		for i, r := range rows {
			rows[i] = ansi.Truncate(r, m.width, "")
		}
		for len(rows) < m.height-1 {
			rows = append(rows, "")
		}
		return strings.Join(append(rows, m.helpBar()), "\n")
	}
	bottom, mid, _ := m.layout()
	rows := make([]string, 0, m.height)
	rows = append(rows, m.statusLine())
	rows = append(rows, m.sb.render(m.width, mid, &m.st)...)
	rows = append(rows, bottom...)
	rows = append(rows, m.helpBar())
	return strings.Join(rows, "\n")
}

// fullScreenBelow is the terminal height below which the approval dialog
// takes the whole screen.
const fullScreenBelow = 20

// layout computes the bottom panel's rows and the scrollback's height.
func (m *model) layout() (bottom []string, mid int, helpRows int) {
	avail := m.height - 2 // status line, help bar
	var panel string
	switch {
	case m.phase == phaseQuit:
		panel = m.quitPrompt()
	case m.confirm != nil:
		panel = m.confirmPrompt()
	case m.dlg.open():
		h := avail * 2 / 3
		if avail < 24 {
			h = avail - 1 // a small terminal gives the dialog all it can
		}
		panel = m.dlg.render(m.width, h, &m.st, m.now())
	case m.editing != nil:
		h := max(3, min(12, avail/2))
		m.editor.SetWidth(m.width)
		m.editor.SetHeight(h)
		head := fmt.Sprintf("new content of %s — %s save · %s cancel", m.editing.path, m.keys.Save.Help().Key, m.keys.Cancel.Help().Key)
		if m.editing.run {
			head = fmt.Sprintf("pasted script — %s runs it in the sandbox · %s cancel", m.keys.Save.Help().Key, m.keys.Cancel.Help().Key)
		}
		panel = m.st.Info.Render(ansi.Truncate(head, m.width, "…")) + "\n" + m.editor.View()
	default:
		panel = strings.Join(append(append(m.opRows(), m.commandMenu()...), m.inputRow()), "\n")
	}
	bottom = strings.Split(panel, "\n")
	if len(bottom) > avail-1 {
		bottom = bottom[len(bottom)-(avail-1):]
	}
	for i, r := range bottom {
		bottom[i] = ansi.Truncate(r, m.width, "")
	}
	return bottom, avail - len(bottom), 1
}

// commandMenu lists, while a slash command's name is typed, the commands
// it may become: the usage of the only one, or their names.
func (m *model) commandMenu() []string {
	text := m.input.Value()
	if !strings.HasPrefix(text, "/") || strings.Contains(text, " ") {
		return nil
	}
	names := commandsFor(text[1:])
	if text == "/" {
		names = nil
		for _, c := range commands {
			names = append(names, c.name)
		}
	}
	var row string
	switch len(names) {
	case 0:
		row = "no such command; /help lists them"
	case 1:
		for _, c := range commands {
			if c.name == names[0] {
				row = c.usage + " — " + c.help + " (tab completes)"
			}
		}
	default:
		row = "/" + strings.Join(names, "  /")
	}
	return []string{m.st.Info.Render(ansi.Truncate(row, m.width, "…"))}
}

func (m *model) inputRow() string {
	m.input.Width = max(1, m.width-len(m.input.Prompt)-1)
	return m.input.View()
}

// opRows shows what is running: a spinner and, for transfers, a progress
// bar with bytes, rate and time left.
func (m *model) opRows() []string {
	var rows []string
	now := m.now()
	for _, id := range m.order {
		op := m.ops[id]
		took := now.Sub(op.start).Truncate(time.Second)
		head := fmt.Sprintf("%s %s (%s)", m.spin.View(), op.title, took)
		if t := op.transfer; t != nil {
			rows = append(rows, ansi.Truncate(head, m.width, "…"))
			rows = append(rows, m.transferRow(t, now))
			continue
		}
		rows = append(rows, ansi.Truncate(head, m.width, "…"))
	}
	if len(rows) > 0 {
		rows = append(rows, m.st.Info.Render(ansi.Truncate("ctrl+c cancels · you can keep typing", m.width, "")))
	}
	return rows
}

func (m *model) transferRow(t *transferState, now time.Time) string {
	// The rate counts from the first sample, not from the start of the
	// operation (which includes the approval) nor from zero bytes (the
	// first sample may already hold a burst).
	elapsed := now.Sub(t.start).Seconds()
	rate := 0.0
	if elapsed >= minRateWindow.Seconds() {
		rate = float64(t.done-t.first) / elapsed
	}
	text := output.Bytes(t.done)
	pct := 0.0
	if t.total > 0 {
		pct = min(1, float64(t.done)/float64(t.total))
		text += " / " + output.Bytes(t.total)
	}
	if rate > 0 {
		text += fmt.Sprintf("  %s/s", output.Bytes(int64(rate)))
	}
	if t.total > 0 && rate > 0 {
		left := time.Duration(float64(t.total-t.done) / rate * float64(time.Second)).Round(time.Second)
		text += "  " + left.String() + " left"
	}
	text = fmt.Sprintf("%3.0f%%  %s", pct*100, text)
	m.bar.Width = max(10, min(40, m.width-lipgloss.Width(text)-3))
	return ansi.Truncate(m.bar.ViewAs(pct)+"  "+text, m.width, "…")
}

// minRateWindow is how long a transfer is sampled before a rate shows.
const minRateWindow = 500 * time.Millisecond

// statusLine shows provider, sandbox, state, TTL left, network and the
// approval mode; on a narrow terminal the later fields are cut.
func (m *model) statusLine() string {
	st := m.st
	provider := m.info.Provider
	if provider == "" {
		provider = m.o.Provider
	}
	id := m.info.ID
	if id == "" {
		id = "…"
	}
	state := m.state
	stateStyle := st.Status
	switch {
	case m.phase == phaseFailed:
		state, stateStyle = "failed", st.StatusWarn
	case m.phase == phaseOpening:
		state = m.spin.View() + " " + state
	case m.phase == phaseQuit:
		state = "leaving"
	case m.dlg.open():
		state, stateStyle = "waiting for approval", st.StatusWarn
	case len(m.ops) > 0:
		state = fmt.Sprintf("running %d", len(m.ops))
	default:
		state = "ready"
	}
	ttl := "no ttl"
	ttlStyle := st.Status
	if !m.info.ExpiresAt.IsZero() {
		left := m.info.ExpiresAt.Sub(m.now())
		switch {
		case left <= 0:
			ttl, ttlStyle = "expired", st.StatusWarn
		default:
			ttl = "ttl " + shortDuration(left) + " left"
			if left < 5*time.Minute {
				ttlStyle = st.StatusWarn
			}
		}
	}
	net := string(m.info.Network)
	if net == "" {
		net = "default"
	}
	mode := string(m.mode)
	modeStyle, ok := st.Mode[mode]
	if !ok {
		modeStyle = st.Status
	}
	// The effective policy: --yes, a policy file's default, session rules.
	var policy []string
	if m.session != nil {
		g := m.session.Gate()
		if g.Yes() && m.mode == approval.ModeAll {
			mode += " (--yes)"
		}
		if eff, _ := g.Default(); eff != "" {
			policy = append(policy, "default "+string(eff))
		}
		if n := len(g.SessionRules()); n > 0 {
			policy = append(policy, plural(n, "session rule"))
		}
	}
	sep := st.StatusKey.Render(" · ")
	// Fields in the order they are dropped on a narrow terminal (last
	// first): the sandbox id and the approval mode always stay.
	type field struct {
		text string
		prio int // higher is dropped later
	}
	fields := []field{
		{st.Status.Render(provider), 3},
		{st.Status.Render(id), 9},
		{stateStyle.Render(state), 4},
		{ttlStyle.Render(ttl), 2},
		{st.StatusKey.Render("net ") + st.Status.Render(net), 1},
		{st.StatusKey.Render("mode ") + modeStyle.Render(mode), 9},
	}
	if len(policy) > 0 {
		fields = append(fields, field{st.Status.Render(strings.Join(policy, ", ")), 5})
	}
	if m.shell {
		fields = append(fields, field{st.Status.Render("shell"), 0})
	}
	join := func() string {
		var parts []string
		for _, f := range fields {
			parts = append(parts, f.text)
		}
		return strings.Join(parts, sep)
	}
	lead := st.Status.Render(" ")
	join0 := join
	join = func() string { return lead + join0() }
	line := join()
	for lipgloss.Width(line) > m.width {
		low := -1
		for i, f := range fields {
			if f.prio < 9 && (low < 0 || f.prio < fields[low].prio) {
				low = i
			}
		}
		if low < 0 {
			break
		}
		fields = append(fields[:low], fields[low+1:]...)
		line = join()
	}
	line = ansi.Truncate(line, m.width, "…")
	if pad := m.width - lipgloss.Width(line); pad > 0 {
		line += st.Status.Render(strings.Repeat(" ", pad))
	}
	return line
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// helpBar is generated from the key bindings of what has the focus.
func (m *model) helpBar() string {
	var b []key.Binding
	switch {
	case m.phase == phaseQuit:
		b = m.keys.quitHelp()
	case m.confirm != nil:
		b = m.keys.confirmHelp()
	case m.dlg.open():
		b = m.keys.dialogHelp(len(m.dlg.queue) > 1)
	case m.editing != nil:
		b = m.keys.editorHelp()
	default:
		b = m.keys.mainHelp()
	}
	m.help.Width = m.width
	return ansi.Truncate(m.help.ShortHelpView(b), m.width, "")
}

func (m *model) quitPrompt() string {
	id := m.info.ID
	keep := "keep it (prints the reattach command)"
	if !m.info.ExpiresAt.IsZero() {
		keep = fmt.Sprintf("keep it (until its ttl ends in %s; prints the reattach command)", shortDuration(m.info.ExpiresAt.Sub(m.now())))
	}
	lines := []string{
		m.st.Warn.Render(ansi.Truncate("This run created sandbox "+id+". Delete it?", m.width, "…")),
		ansi.Truncate(fmt.Sprintf("[%s] delete it   [%s] %s   [esc/ctrl+c] stay", firstKey(m.keys.Delete), firstKey(m.keys.Keep), keep), m.width, "…"),
	}
	return m.withTypingNote(lines, &m.quitGuard)
}

// confirmPrompt is the open yes/no question.
func (m *model) confirmPrompt() string {
	c := m.confirm
	var lines []string
	for row := range strings.SplitSeq(ansi.Wrap(c.question, m.width, " "), "\n") {
		lines = append(lines, m.st.Warn.Render(row))
	}
	lines = append(lines, ansi.Truncate(fmt.Sprintf("[%s] %s   [%s] don't", firstKey(m.keys.Yes), c.yes, firstKey(m.keys.No)), m.width, "…"))
	return m.withTypingNote(lines, &c.guard)
}

// withTypingNote adds the "you are typing" note of a prompt's guard.
func (m *model) withTypingNote(lines []string, g *guard) string {
	if g.waiting(m.now()) {
		lines = append(lines, m.st.Info.Render(ansi.Truncate(typingNote, m.width, "…")))
	}
	return strings.Join(lines, "\n")
}
