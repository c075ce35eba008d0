package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/output"
)

// typeAheadGuard is how long after a request appears keys are ignored, so
// that typing that was meant for the input line cannot answer it.
const typeAheadGuard = 300 * time.Millisecond

// pending is one request waiting in the dialog.
type pending struct {
	id    int
	req   approval.Request
	reply chan<- approval.Decision
	// exact and prefix are the session rules the two "for the session"
	// choices would add; nil when no rule short of the bare kind can.
	exact, prefix []string
}

// choice is one answer the dialog offers.
type choice int

const (
	choiceAllowOnce choice = iota
	choiceAllowExact
	choiceAllowSession
	choiceDeny
	choiceDenyReason
	choiceAllowAll
	choiceDenyAll
)

// answer is a decision for one pending request.
type answer struct {
	p   pending
	dec approval.Decision
}

// dialogAction is what the dialog asks the root model to do: deliver
// answers. It is empty when a key only moved the cursor or was ignored.
type dialogAction struct {
	answers []answer
}

// dialog is the approval dialog: a queue of pending requests, the first
// of which is shown.
type dialog struct {
	keys    *keyMap
	queue   []pending
	cursor  int
	armedAt time.Time // keys before this instant are ignored
	reason  textinput.Model
	asking  bool // typing a reason
	scroll  int  // first detail line shown
	mask    func(string) string
}

func newDialog(keys *keyMap) *dialog {
	ti := textinput.New()
	ti.Prompt = "reason: "
	ti.Placeholder = "what to do instead (enter sends, esc goes back)"
	ti.CharLimit = 500
	return &dialog{keys: keys, reason: ti, mask: func(s string) string { return s }}
}

func (d *dialog) open() bool { return len(d.queue) > 0 }

// add queues a request; the dialog arms its type-ahead guard when the
// request is the one shown.
func (d *dialog) add(p pending, now time.Time) {
	p.exact = approval.ExactRules(p.req)
	p.prefix = approval.SuggestRules(p.req)
	d.queue = append(d.queue, p)
	if len(d.queue) == 1 {
		d.show(now)
	}
}

// remove drops a withdrawn request.
func (d *dialog) remove(id int, now time.Time) {
	for i, p := range d.queue {
		if p.id == id {
			d.queue = append(d.queue[:i], d.queue[i+1:]...)
			if i == 0 && len(d.queue) > 0 {
				d.show(now)
			}
			return
		}
	}
}

// show resets the dialog for the request now at the front.
func (d *dialog) show(now time.Time) {
	d.cursor = 0
	d.scroll = 0
	d.asking = false
	d.reason.Reset()
	d.reason.Blur()
	d.armedAt = now.Add(typeAheadGuard)
}

// choices lists what the dialog offers for the front request.
func (d *dialog) choices() []choice {
	c := []choice{choiceAllowOnce, choiceAllowExact, choiceAllowSession, choiceDeny, choiceDenyReason}
	if len(d.queue) > 1 {
		c = append(c, choiceAllowAll, choiceDenyAll)
	}
	return c
}

// enabled reports whether a choice can apply to the front request.
func (d *dialog) enabled(c choice) bool {
	switch c {
	case choiceAllowExact:
		return len(d.queue[0].exact) > 0
	case choiceAllowSession:
		return len(d.queue[0].prefix) > 0
	}
	return true
}

// handleKey answers, moves or ignores. now is the injected clock, so the
// type-ahead guard is testable.
func (d *dialog) handleKey(msg tea.KeyMsg, now time.Time) dialogAction {
	if !d.open() || now.Before(d.armedAt) {
		return dialogAction{}
	}
	k := d.keys
	if d.asking {
		switch msg.Type {
		case tea.KeyEnter:
			return d.pick(choiceDenyReason, now)
		case tea.KeyEsc:
			d.asking = false
			d.reason.Blur()
			return dialogAction{}
		}
		d.reason, _ = d.reason.Update(msg)
		return dialogAction{}
	}
	cs := d.choices()
	switch {
	case key.Matches(msg, k.Up):
		d.cursor = (d.cursor + len(cs) - 1) % len(cs)
	case key.Matches(msg, k.Down):
		d.cursor = (d.cursor + 1) % len(cs)
	case key.Matches(msg, k.ScrollUp):
		d.scroll = max(0, d.scroll-5)
	case key.Matches(msg, k.ScrollDown):
		d.scroll += 5
	case key.Matches(msg, k.Choose):
		return d.pick(cs[d.cursor], now)
	case key.Matches(msg, k.AllowOnce):
		return d.pick(choiceAllowOnce, now)
	case key.Matches(msg, k.AllowExact):
		return d.pick(choiceAllowExact, now)
	case key.Matches(msg, k.AllowSession):
		return d.pick(choiceAllowSession, now)
	case key.Matches(msg, k.Deny):
		return d.pick(choiceDeny, now)
	case key.Matches(msg, k.DenyReason):
		return d.pick(choiceDenyReason, now)
	case key.Matches(msg, k.AllowAll) && len(d.queue) > 1:
		return d.pick(choiceAllowAll, now)
	case key.Matches(msg, k.DenyAll) && len(d.queue) > 1:
		return d.pick(choiceDenyAll, now)
	}
	return dialogAction{}
}

// pick applies a choice to the front request (or to all of them).
func (d *dialog) pick(c choice, now time.Time) dialogAction {
	if !d.enabled(c) {
		return dialogAction{}
	}
	front := d.queue[0]
	var act dialogAction
	switch c {
	case choiceAllowOnce:
		act.answers = []answer{{front, approval.Decision{Allow: true, By: "user"}}}
	case choiceAllowExact:
		act.answers = []answer{{front, sessionDecision(front.exact)}}
	case choiceAllowSession:
		act.answers = []answer{{front, sessionDecision(front.prefix)}}
	case choiceDeny:
		act.answers = []answer{{front, approval.Decision{By: "user"}}}
	case choiceDenyReason:
		if !d.asking {
			d.asking = true
			d.reason.Focus()
			return dialogAction{}
		}
		act.answers = []answer{{front, approval.Decision{By: "user", Reason: strings.TrimSpace(d.reason.Value())}}}
	case choiceAllowAll, choiceDenyAll:
		for _, p := range d.queue {
			act.answers = append(act.answers, answer{p, approval.Decision{Allow: c == choiceAllowAll, By: "user"}})
		}
	}
	d.queue = d.queue[len(act.answers):]
	if len(d.queue) > 0 {
		d.show(now)
	}
	return act
}

func sessionDecision(rules []string) approval.Decision {
	d := approval.Decision{Allow: true, By: "user", SessionRule: rules[0]}
	if len(rules) > 1 {
		d.SessionRules = rules[1:]
	}
	return d
}

// label is the text of a choice for the front request.
func (d *dialog) label(c choice) string {
	p := d.queue[0]
	switch c {
	case choiceAllowOnce:
		return "allow once"
	case choiceAllowExact:
		if len(p.exact) == 0 {
			return "allow this exact call for the session (no rule can spell it)"
		}
		return "allow this exact call for the session: " + strings.Join(p.exact, ", ")
	case choiceAllowSession:
		if len(p.prefix) == 0 {
			return "allow a prefix or glob for the session (none fits this call)"
		}
		return "allow for the session: " + strings.Join(p.prefix, ", ")
	case choiceDeny:
		return "deny"
	case choiceDenyReason:
		return "deny with a reason"
	case choiceAllowAll:
		return fmt.Sprintf("allow all %d pending, once", len(d.queue))
	case choiceDenyAll:
		return fmt.Sprintf("deny all %d pending", len(d.queue))
	}
	return ""
}

// shortLabel is the label on a narrow terminal; it still names the rule.
func (d *dialog) shortLabel(c choice) string {
	p := d.queue[0]
	switch c {
	case choiceAllowExact:
		if len(p.exact) == 0 {
			return "exact: none"
		}
		return "exact: " + strings.Join(p.exact, ", ")
	case choiceAllowSession:
		if len(p.prefix) == 0 {
			return "session: none"
		}
		return "session: " + strings.Join(p.prefix, ", ")
	case choiceDenyReason:
		return "deny, reason"
	case choiceAllowAll:
		return fmt.Sprintf("allow all %d", len(d.queue))
	case choiceDenyAll:
		return fmt.Sprintf("deny all %d", len(d.queue))
	}
	return d.label(c)
}

func (d *dialog) choiceKey(c choice) string {
	k := d.keys
	return firstKey([]key.Binding{k.AllowOnce, k.AllowExact, k.AllowSession, k.Deny, k.DenyReason, k.AllowAll, k.DenyAll}[c])
}

// render draws the dialog in at most width × height cells.
func (d *dialog) render(width, height int, st *Styles) string {
	if !d.open() {
		return ""
	}
	p := d.queue[0]
	bordered := width >= 30 && height >= 8
	inner := width
	if bordered {
		inner = width - 4
	}
	// Choices and their keys.
	var choices []string
	for i, c := range d.choices() {
		style := st.Choice
		cursor := "  "
		if i == d.cursor {
			style, cursor = st.ChoiceOn, "> "
		}
		if !d.enabled(c) {
			style = st.ChoiceOff
		}
		// Wrapped, not cut: the rule a choice adds must be readable.
		label := d.label(c)
		if inner < 50 {
			label = d.shortLabel(c)
		}
		text := fmt.Sprintf("%s[%s] %s", cursor, d.choiceKey(c), output.Escape(d.mask(label)))
		indent := strings.Repeat(" ", 6)
		if inner < 20 {
			indent = ""
		}
		for i, row := range strings.Split(ansi.Wrap(text, max(1, inner-len(indent)), " "), "\n") {
			if i > 0 {
				row = indent + row
			}
			choices = append(choices, style.Render(ansi.Truncate(row, inner, "…")))
		}
	}
	if d.asking {
		d.reason.Width = max(10, inner-len(d.reason.Prompt)-1)
		choices = append(choices, ansi.Truncate(d.reason.View(), inner, ""))
	}
	// Details, scrolled, in what space is left.
	details := d.details(p, inner, st)
	room := height - len(choices) - 2 // title, blank line
	if bordered {
		room -= 2
	}
	room = max(room, 1)
	d.scroll = max(0, min(d.scroll, len(details)-room))
	shown := details[d.scroll:min(len(details), d.scroll+room)]
	if more := len(details) - d.scroll - len(shown); more > 0 && len(shown) > 0 {
		shown[len(shown)-1] = st.Info.Render(fmt.Sprintf("… %d more lines (pgdn)", more+1))
	}
	title := fmt.Sprintf("%s wants to %s", sourceOf(p.req), p.req.Kind)
	if n := len(d.queue); n > 1 {
		title = fmt.Sprintf("approval 1 of %d · %s", n, title)
	} else {
		title = "approval · " + title
	}
	body := []string{st.DialogTitle.Render(ansi.Truncate(title, inner, "…"))}
	body = append(body, shown...)
	body = append(body, "")
	body = append(body, choices...)
	out := strings.Join(body, "\n")
	if bordered {
		return st.DialogBorder.Border(lipgloss.RoundedBorder()).Padding(0, 1).Width(width - 2).Render(out)
	}
	return out
}

func sourceOf(r approval.Request) approval.Source {
	if r.Source == "" {
		return approval.SourceUser
	}
	return r.Source
}

// details are the lines that say exactly what the request will do. Every
// text is masked, then escaped with output.Escape, the one escaping of
// every approval surface: unlike command output in the scrollback, a
// request is never cut at a carriage return nor stripped of escape
// sequences, but shows them. A request holding hidden characters gets a
// warning line first.
func (d *dialog) details(p pending, width int, st *Styles) []string {
	r := p.req
	var out []string
	add := func(style lipgloss.Style, s string) {
		for _, row := range wrap(output.Escape(d.mask(s)), max(width, 1)) {
			out = append(out, style.Render(row))
		}
	}
	if w := approval.HiddenWarning(r); w != "" {
		add(st.Warn, "⚠ "+w)
	}
	where := r.Sandbox
	if r.Provider != "" {
		where = r.Provider + "/" + r.Sandbox
	}
	add(st.Info, "in "+where)
	de := r.Details
	switch r.Kind {
	case approval.KindExec:
		add(st.Op, "$ "+r.Target)
		cwd := de.Cwd
		if cwd == "" {
			cwd = "(the sandbox's default, /workspace)"
		}
		add(st.Info, "cwd: "+cwd)
		if de.User != "" {
			add(st.Info, "as user: "+de.User)
		}
		for _, seg := range r.Segments() {
			if seg.Complex {
				add(st.Warn, "note: "+seg.Reason+": only the bare exec rule matches it")
				break
			}
		}
	case approval.KindUpload, approval.KindDownload:
		if r.Kind == approval.KindUpload {
			to := r.Target
			if de.Dest != "" {
				to = de.Dest
			}
			if de.From != "" {
				add(st.Op, "upload "+de.From+" from the host")
				add(st.Op, "to "+to)
			} else {
				add(st.Op, "upload to "+to)
			}
		} else {
			add(st.Op, "download "+r.Target+" to the host at "+de.Dest)
		}
		n := 0
		for _, f := range de.Files {
			if f.Exists {
				n++
			}
		}
		add(st.Info, fmt.Sprintf("%d file(s), %s", len(de.Files), output.Bytes(de.Bytes)))
		if n > 0 {
			add(st.Warn, fmt.Sprintf("overwrites %d existing file(s)", n))
		}
		for _, f := range de.Files {
			s := fmt.Sprintf("  %s  %s", f.Path, output.Bytes(f.Size))
			if f.SHA256 != "" {
				s += "  sha256:" + f.SHA256[:min(12, len(f.SHA256))]
			}
			style := st.Stdout
			if f.Exists {
				s += "  (overwrites)"
				style = st.Warn
			}
			add(style, s)
		}
	default:
		add(st.Op, string(r.Kind)+" "+r.Target)
		if de.Dest != "" {
			add(st.Op, "to "+de.Dest)
		}
		if de.Pattern != "" {
			add(st.Info, "pattern: "+de.Pattern)
		}
		if de.Bytes > 0 {
			add(st.Info, "size: "+output.Bytes(de.Bytes))
		}
	}
	if de.Resolved != "" {
		add(st.Warn, "resolves to "+de.Resolved+" (through a symlink)")
	}
	if de.ResolvedDest != "" {
		add(st.Warn, "destination resolves to "+de.ResolvedDest+" (through a symlink)")
	}
	if de.Diff != "" {
		for l := range strings.SplitSeq(strings.TrimSuffix(de.Diff, "\n"), "\n") {
			style := st.Stdout
			switch {
			case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
				style = st.Info
			case strings.HasPrefix(l, "+"):
				style = st.DiffAdd
			case strings.HasPrefix(l, "-"):
				style = st.DiffDel
			case strings.HasPrefix(l, "@@"):
				style = st.DiffHunk
			}
			add(style, l)
		}
	}
	return out
}
