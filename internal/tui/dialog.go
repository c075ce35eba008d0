package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// typeAheadGuard is how quiet the keyboard must be before a key answers a
// prompt (the approval dialog, the quit prompt, a confirmation): every key
// that arrives sooner is dropped and restarts the wait, so text meant for
// the input line cannot answer a prompt that opened while it was typed.
const typeAheadGuard = 300 * time.Millisecond

// guard is the type-ahead guard of one prompt.
type guard struct {
	until   time.Time // keys before this instant are dropped
	dropped int       // keys dropped since the prompt opened
}

// arm starts the guard for a prompt that opens at now; lastKey is when the
// user last pressed a key anywhere.
func (g *guard) arm(now, lastKey time.Time) {
	g.until = now.Add(typeAheadGuard)
	g.dropped = 0
	if now.Sub(lastKey) < typeAheadGuard {
		g.dropped = 1 // the user is typing: say so
	}
}

// pass reports whether a key pressed at now may act on the prompt; a key
// that may not restarts the wait.
func (g *guard) pass(now time.Time) bool {
	if now.Before(g.until) {
		g.until = now.Add(typeAheadGuard)
		g.dropped++
		return false
	}
	return true
}

// waiting reports whether keys are still being dropped because the user
// was typing when the prompt opened.
func (g *guard) waiting(now time.Time) bool { return g.dropped > 0 && now.Before(g.until) }

// typingNote is the line a prompt shows while its guard drops keys.
const typingNote = "you are typing: keys are ignored until you pause"

// isText reports whether a key message is text rather than a key: a paste,
// or several runes read at once (input that arrived unbracketed), whose
// words must never act as key names such as "enter" or "esc".
func isText(msg tea.KeyMsg) bool {
	return msg.Paste || (msg.Type == tea.KeyRunes && len(msg.Runes) > 1)
}

// pending is one request waiting in the dialog.
type pending struct {
	id    int
	req   approval.Request
	reply chan<- approval.Decision
	// prefix are the session rules the "for the session" choice would
	// add; nil when no rule short of the bare kind can.
	prefix []string
	// hosts are, for a download, the host paths each of req's files goes
	// to, in the order of req.Details.Files (whose Exists then says the
	// host file exists and is replaced).
	hosts []string
	// op is the operation that asks; added is when the request came.
	op    int
	added time.Time
	// plan names the plan and its step when a plan asks.
	plan string
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
	choiceAllowPlan
)

// answer is a decision for one pending request.
type answer struct {
	p   pending
	dec approval.Decision
	// rest is set when the later requests of the same plan run are
	// allowed too.
	rest bool
}

// dialogAction is what the dialog asks the root model to do: deliver
// answers. It is empty when a key only moved the cursor or was ignored.
type dialogAction struct {
	answers []answer
	// dropped is set when the type-ahead guard dropped the key.
	dropped bool
}

// dialog is the approval dialog: a queue of pending requests, the first
// of which is shown.
type dialog struct {
	keys  *keyMap
	queue []pending
	// cursor is the highlighted choice; -1 (the start) is none, so that
	// enter alone never answers.
	cursor int
	guard  guard
	reason textinput.Model
	asking bool   // typing a reason
	scroll int    // first detail line shown
	note   string // why the last key did nothing
	mask   func(string) string
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
// request is the one shown. lastKey is when the user last pressed a key.
func (d *dialog) add(p pending, now, lastKey time.Time) {
	p.prefix = approval.SuggestRules(p.req)
	d.queue = append(d.queue, p)
	if len(d.queue) == 1 {
		d.show(now, lastKey)
	}
}

// remove drops a withdrawn request.
func (d *dialog) remove(id int, now time.Time) {
	for i, p := range d.queue {
		if p.id == id {
			d.queue = append(d.queue[:i], d.queue[i+1:]...)
			if i == 0 && len(d.queue) > 0 {
				d.show(now, time.Time{})
			}
			return
		}
	}
}

// show resets the dialog for the request now at the front.
func (d *dialog) show(now, lastKey time.Time) {
	d.cursor = -1
	d.scroll = 0
	d.asking = false
	d.note = ""
	d.reason.Reset()
	d.reason.Blur()
	d.guard.arm(now, lastKey)
}

// choices lists what the dialog offers for the front request: choices
// that cannot apply are left out.
func (d *dialog) choices() []choice {
	c := []choice{choiceAllowOnce, choiceAllowExact}
	if d.enabled(choiceAllowSession) {
		c = append(c, choiceAllowSession)
	}
	if d.queue[0].plan != "" {
		c = append(c, choiceAllowPlan)
	}
	c = append(c, choiceDeny, choiceDenyReason)
	if len(d.queue) > 1 {
		c = append(c, choiceAllowAll, choiceDenyAll)
	}
	return c
}

// enabled reports whether a choice can apply to the front request.
func (d *dialog) enabled(c choice) bool {
	switch c {
	case choiceAllowSession:
		return len(d.queue[0].prefix) > 0
	case choiceAllowPlan:
		return d.queue[0].plan != ""
	}
	return true
}

// handleKey answers, moves or ignores. now is the injected clock, so the
// type-ahead guard is testable.
func (d *dialog) handleKey(msg tea.KeyMsg, now time.Time) dialogAction {
	if !d.open() {
		return dialogAction{}
	}
	k := d.keys
	if d.asking {
		// Typing the reason: every key is text for it, and what enter
		// sends is a denial, so no guard is needed.
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
	if !d.guard.pass(now) || isText(msg) {
		d.guard.until = now.Add(typeAheadGuard)
		return dialogAction{dropped: true}
	}
	d.note = ""
	cs := d.choices()
	switch {
	case key.Matches(msg, k.Up):
		if d.cursor < 0 {
			d.cursor = len(cs)
		}
		d.cursor = (d.cursor + len(cs) - 1) % len(cs)
	case key.Matches(msg, k.Down):
		d.cursor = (d.cursor + 1) % len(cs)
	case key.Matches(msg, k.ScrollUp):
		d.scroll = max(0, d.scroll-5)
	case key.Matches(msg, k.ScrollDown):
		d.scroll += 5
	case key.Matches(msg, k.Choose):
		if d.cursor < 0 {
			d.note = "enter chooses the highlighted answer: move with ↑/↓ first, or press its key"
			return dialogAction{}
		}
		return d.pick(cs[d.cursor], now)
	case key.Matches(msg, k.AllowOnce):
		return d.pick(choiceAllowOnce, now)
	case key.Matches(msg, k.AllowExact):
		return d.pick(choiceAllowExact, now)
	case key.Matches(msg, k.AllowSession):
		return d.pick(choiceAllowSession, now)
	case key.Matches(msg, k.AllowPlan):
		return d.pick(choiceAllowPlan, now)
	case key.Matches(msg, k.Deny):
		return d.pick(choiceDeny, now)
	case key.Matches(msg, k.DenyReason):
		return d.pick(choiceDenyReason, now)
	case key.Matches(msg, k.AllowAll):
		return d.pick(choiceAllowAll, now)
	case key.Matches(msg, k.DenyAll):
		return d.pick(choiceDenyAll, now)
	}
	return dialogAction{}
}

// pick applies a choice to the front request (or to all of them).
func (d *dialog) pick(c choice, now time.Time) dialogAction {
	if !d.enabled(c) {
		d.note = "no rule for the session fits this call (" + d.unfit() + "): allow it once or as this exact call"
		if c == choiceAllowPlan {
			d.note = "this request comes from no plan"
		}
		return dialogAction{}
	}
	front := d.queue[0]
	var act dialogAction
	switch c {
	case choiceAllowOnce:
		act.answers = []answer{{p: front, dec: approval.Decision{Allow: true, By: "user"}}}
	case choiceAllowExact:
		act.answers = []answer{{p: front, dec: approval.Decision{Allow: true, By: "user", SessionExact: true}}}
	case choiceAllowSession:
		act.answers = []answer{{p: front, dec: sessionDecision(front.prefix)}}
	case choiceAllowPlan:
		// This request, the other pending ones of the same plan run, and
		// (through the model) its later ones.
		for _, p := range d.queue {
			if p.op == front.op {
				act.answers = append(act.answers, answer{p: p, dec: approval.Decision{Allow: true, By: "user", Reason: "the rest of the plan was allowed"}, rest: true})
			}
		}
		d.queue = slices.DeleteFunc(d.queue, func(p pending) bool { return p.op == front.op })
		if len(d.queue) > 0 {
			d.show(now, time.Time{})
		}
		return act
	case choiceDeny:
		act.answers = []answer{{p: front, dec: approval.Decision{By: "user"}}}
	case choiceDenyReason:
		if !d.asking {
			d.asking = true
			d.reason.Focus()
			return dialogAction{}
		}
		act.answers = []answer{{p: front, dec: approval.Decision{By: "user", Reason: strings.TrimSpace(d.reason.Value())}}}
	case choiceAllowAll, choiceDenyAll:
		for _, p := range d.queue {
			act.answers = append(act.answers, answer{p: p, dec: approval.Decision{Allow: c == choiceAllowAll, By: "user"}})
		}
	}
	d.queue = d.queue[len(act.answers):]
	if len(d.queue) > 0 {
		d.show(now, time.Time{})
	}
	return act
}

// unfit says in plain words why no session rule fits the front request.
func (d *dialog) unfit() string {
	for _, seg := range d.queue[0].req.Segments() {
		if seg.Complex {
			return seg.Reason
		}
	}
	return "its words cannot be written as a rule"
}

func sessionDecision(rules []string) approval.Decision {
	d := approval.Decision{Allow: true, By: "user", SessionRule: rules[0]}
	if len(rules) > 1 {
		d.SessionRules = rules[1:]
	}
	return d
}

// label is the text of a choice for the front request; short is the
// label on a narrow terminal.
func (d *dialog) label(c choice, short bool) string {
	p := d.queue[0]
	n := len(d.queue)
	type pair struct{ long, short string }
	l := map[choice]pair{
		choiceAllowOnce:    {"allow once", "allow once"},
		choiceAllowExact:   {"allow this exact call again for the session", "exact call"},
		choiceAllowSession: {"allow for the session: " + strings.Join(p.prefix, ", "), "session: " + strings.Join(p.prefix, ", ")},
		choiceDeny:         {"deny", "deny"},
		choiceDenyReason:   {"deny with a reason", "deny, reason"},
		choiceAllowAll:     {fmt.Sprintf("allow all %d pending, once", n), fmt.Sprintf("allow all %d", n)},
		choiceDenyAll:      {fmt.Sprintf("deny all %d pending", n), fmt.Sprintf("deny all %d", n)},
		choiceAllowPlan:    {"allow the rest of this plan", "rest of plan"},
	}[c]
	if short {
		return l.short
	}
	return l.long
}

func (d *dialog) choiceKey(c choice) string {
	k := d.keys
	return firstKey([]key.Binding{k.AllowOnce, k.AllowExact, k.AllowSession, k.Deny, k.DenyReason, k.AllowAll, k.DenyAll, k.AllowPlan}[c])
}

// Sizes below which the dialog drops its border and lists its choices on
// as few rows as it can.
const (
	borderMinWidth  = 30
	borderMinHeight = 14
)

// render draws the dialog in at most width × height cells. The title and
// the start of the request always show; what does not fit scrolls (pgdn),
// and a long rule in a choice is cut, never wrapped.
func (d *dialog) render(width, height int, st *Styles, now time.Time) string {
	if !d.open() {
		return ""
	}
	p := d.queue[0]
	bordered := width >= borderMinWidth && height >= borderMinHeight
	inner := width
	if bordered {
		inner = width - 4
		height -= 2
	}
	inner = max(inner, 1)
	short := inner < 50
	// Choices: one row each, or, when that leaves no room for the request,
	// as few rows as their short labels fit on.
	cs := d.choices()
	var choices []string
	for i, c := range cs {
		style, cursor := st.Choice, "  "
		if i == d.cursor {
			style, cursor = st.ChoiceOn, "> "
		}
		text := fmt.Sprintf("%s[%s] %s", cursor, d.choiceKey(c), output.Escape(d.mask(d.label(c, short))))
		choices = append(choices, style.Render(ansi.Truncate(text, inner, "…")))
	}
	if height < len(cs)+4 {
		tiny := map[choice]string{choiceAllowOnce: "once", choiceAllowExact: "exact", choiceAllowSession: "session",
			choiceDeny: "deny", choiceDenyReason: "reason", choiceAllowAll: "all", choiceDenyAll: "deny all", choiceAllowPlan: "plan"}
		var parts []string
		for i, c := range cs {
			s := fmt.Sprintf("[%s] %s", d.choiceKey(c), tiny[c])
			if i == d.cursor {
				s = st.ChoiceOn.Render("> " + s)
			}
			parts = append(parts, s)
		}
		choices = nil
		for row := range strings.SplitSeq(ansi.Wrap(strings.Join(parts, "  "), inner, " "), "\n") {
			choices = append(choices, ansi.Truncate(row, inner, "…"))
		}
	}
	if d.asking {
		d.reason.Width = max(10, inner-len(d.reason.Prompt)-1)
		choices = append(choices, ansi.Truncate(d.reason.View(), inner, ""))
	}
	var notes []string
	switch {
	case d.guard.waiting(now):
		notes = append(notes, st.Warn.Render(ansi.Truncate(typingNote, inner, "…")))
	case d.note != "":
		for row := range strings.SplitSeq(ansi.Wrap(d.note, inner, " "), "\n") {
			notes = append(notes, st.Warn.Render(ansi.Truncate(row, inner, "…")))
		}
	}
	// The request, scrolled, in the rows left: at least one.
	fixed := 1 + len(notes) + len(choices)
	room := height - fixed
	if room >= 3 {
		room-- // a blank row between the request and the choices
	}
	if room < 1 {
		// Not even one row: the choices give way to the request.
		choices = choices[:max(0, len(choices)-(1-room))]
		room = 1
	}
	details := d.details(p, inner, st)
	d.scroll = max(0, min(d.scroll, len(details)-room))
	shown := slices.Clone(details[d.scroll:min(len(details), d.scroll+room)])
	if more := len(details) - d.scroll - len(shown); more > 0 && len(shown) >= 3 {
		shown[len(shown)-1] = st.Info.Render(ansi.Truncate(fmt.Sprintf("… %d more lines (pgdn)", more+1), inner, ""))
	}
	title := fmt.Sprintf("%s wants to %s", sourceOf(p.req), p.req.Kind)
	if n := len(d.queue); n > 1 {
		title += fmt.Sprintf(" · 1 of %d", n)
	}
	if !short {
		title = "approval · " + title
	}
	body := []string{st.DialogTitle.Render(ansi.Truncate(title, inner, "…"))}
	if p.plan != "" && room > 1 {
		body = append(body, st.Info.Render(ansi.Truncate(output.Escape(d.mask(p.plan)), inner, "…")))
		if len(shown) == room {
			shown = shown[:room-1]
		}
	}
	body = append(body, shown...)
	if height-fixed >= 3 {
		body = append(body, "")
	}
	body = append(body, notes...)
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
			add(st.Op, "download "+r.Target+" from the sandbox")
			add(st.Op, "to the host at "+de.Dest)
		}
		n := 0
		for _, f := range de.Files {
			if f.Exists {
				n++
			}
		}
		add(st.Info, fmt.Sprintf("%d file(s), %s", len(de.Files), output.Bytes(de.Bytes)))
		if n > 0 && r.Kind == approval.KindDownload {
			add(st.Warn, fmt.Sprintf("replaces %d existing file(s) on the host", n))
		} else if n > 0 {
			add(st.Warn, fmt.Sprintf("overwrites %d existing file(s)", n))
		}
		for i, f := range de.Files {
			s := fmt.Sprintf("  %s  %s", f.Path, output.Bytes(f.Size))
			if i < len(p.hosts) {
				s = fmt.Sprintf("  %s → %s  %s", f.Path, p.hosts[i], output.Bytes(f.Size))
			}
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
	add(st.Info, "in "+where)
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

// hostDestinations fills in, for a download, the host path each file goes
// to and whether one is there already (FileEntry.Exists). It stats the host
// and runs on the caller's goroutine (Bridge.Approve), never in Update.
func hostDestinations(req approval.Request) (approval.Request, []string) {
	de := req.Details
	if req.Kind != approval.KindDownload || de.Dest == "" {
		return req, nil
	}
	files := slices.Clone(de.Files)
	hosts := make([]string, len(files))
	for i, f := range files {
		host := de.Dest
		if rel := strings.TrimPrefix(f.Path, strings.TrimSuffix(req.Target, "/")+"/"); rel != f.Path {
			host = filepath.Join(de.Dest, filepath.FromSlash(rel))
		}
		hosts[i] = host
		_, err := os.Lstat(host)
		files[i].Exists = err == nil
	}
	req.Details.Files = files
	return req, hosts
}
