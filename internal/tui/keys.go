package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
)

// keyMap is every key binding; the help bar is generated from it.
type keyMap struct {
	// Main view.
	Submit     key.Binding
	Complete   key.Binding
	HistPrev   key.Binding
	HistNext   key.Binding
	PageUp     key.Binding
	PageDown   key.Binding
	Bottom     key.Binding
	CycleMode  key.Binding
	Interrupt  key.Binding
	ShellMode  key.Binding
	ClearInput key.Binding
	QuitEmpty  key.Binding
	Expand     key.Binding

	// Approval dialog.
	AllowOnce    key.Binding
	AllowExact   key.Binding
	AllowSession key.Binding
	AllowPlan    key.Binding
	Deny         key.Binding
	DenyReason   key.Binding
	AllowAll     key.Binding
	DenyAll      key.Binding
	Up           key.Binding
	Down         key.Binding
	Choose       key.Binding
	ScrollUp     key.Binding
	ScrollDown   key.Binding

	// Multi-line editor and prompts.
	Save   key.Binding
	Cancel key.Binding
	Delete key.Binding
	Keep   key.Binding
	Yes    key.Binding
	No     key.Binding
}

func newKeyMap() keyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return keyMap{
		Submit:     b("enter", "run", "enter"),
		Complete:   b("tab", "complete path", "tab"),
		HistPrev:   b("↑/↓", "history", "up"),
		HistNext:   b("↓", "history", "down"),
		PageUp:     b("pgup/pgdn", "scroll", "pgup", "shift+up"),
		PageDown:   b("pgdn", "scroll", "pgdown", "shift+down"),
		Bottom:     b("end", "follow", "end"),
		CycleMode:  b("shift+tab", "mode", "shift+tab"),
		Interrupt:  b("ctrl+c", "cancel/quit", "ctrl+c"),
		ShellMode:  b("ctrl+t", "shell mode", "ctrl+t"),
		ClearInput: b("esc", "clear", "esc"),
		QuitEmpty:  b("ctrl+d", "quit (empty line)", "ctrl+d"),
		Expand:     b("ctrl+o", "expand folded output", "ctrl+o"),

		AllowOnce:    b("y", "allow once", "y", "1"),
		AllowExact:   b("e", "allow exact call for session", "e", "2"),
		AllowSession: b("s", "allow rule for session", "s", "3"),
		AllowPlan:    b("p", "allow the rest of the plan", "p"),
		Deny:         b("n/esc", "deny", "n", "4", "esc"),
		DenyReason:   b("r/tab", "deny with reason", "r", "5", "tab"),
		AllowAll:     b("A", "allow all pending", "A"),
		DenyAll:      b("D", "deny all pending", "D"),
		Up:           b("↑/↓", "move", "up", "k"),
		Down:         b("↓", "move", "down", "j"),
		Choose:       b("enter", "choose", "enter"),
		ScrollUp:     b("pgup/pgdn", "scroll details", "pgup", "shift+up"),
		ScrollDown:   b("pgdn", "scroll details", "pgdown", "shift+down"),

		Save:   b("ctrl+s", "save", "ctrl+s", "ctrl+d"),
		Cancel: b("esc", "cancel", "esc"),
		Delete: b("d", "delete sandbox", "d"),
		Keep:   b("k", "keep sandbox", "k"),
		Yes:    b("y", "yes", "y"),
		No:     b("n/esc", "no", "n"),
	}
}

// mainHelp is the help bar of the main view: ctrl+c first, so that a
// narrow terminal never cuts it off.
func (k keyMap) mainHelp() []key.Binding {
	return []key.Binding{k.Interrupt, k.Submit, k.Complete, k.HistPrev, k.PageUp, k.CycleMode, k.ShellMode}
}

// mainKeys are all the keys of the main view, for /help: each once.
func (k keyMap) mainKeys() []key.Binding {
	return []key.Binding{k.Submit, k.Complete, k.HistPrev, k.PageUp, k.Bottom, k.Expand, k.CycleMode, k.ShellMode, k.ClearInput, k.Interrupt, k.QuitEmpty}
}

// dialogKeys are all the keys of the approval dialog, for /help.
func (k keyMap) dialogKeys() []key.Binding {
	return []key.Binding{k.AllowOnce, k.AllowExact, k.AllowSession, k.AllowPlan, k.Deny, k.DenyReason, k.AllowAll, k.DenyAll, k.Up, k.Choose, k.ScrollUp}
}

// dialogHelp is the help of the approval dialog.
func (k keyMap) dialogHelp(batch bool) []key.Binding {
	out := []key.Binding{k.Up, k.Choose, k.AllowOnce, k.AllowExact, k.AllowSession, k.Deny, k.DenyReason}
	if batch {
		out = append(out, k.AllowAll, k.DenyAll)
	}
	return append(out, k.ScrollUp)
}

// editorHelp is the help of the multi-line editor.
func (k keyMap) editorHelp() []key.Binding { return []key.Binding{k.Save, k.Cancel} }

// quitHelp is the help of the quit prompt.
func (k keyMap) quitHelp() []key.Binding {
	stay := key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc/ctrl+c", "stay"))
	return []key.Binding{k.Delete, k.Keep, stay}
}

// confirmHelp is the help of a yes/no question.
func (k keyMap) confirmHelp() []key.Binding { return []key.Binding{k.Yes, k.No} }

// firstKey is the first help key of b, e.g. "y" of "y/1".
func firstKey(b key.Binding) string {
	h := b.Help().Key
	if i := strings.IndexByte(h, '/'); i > 0 {
		return h[:i]
	}
	return h
}
