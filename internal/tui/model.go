package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/textarea"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// phase is where the model is in its life.
type phase int

const (
	phaseOpening phase = iota // creating, reusing, setting up
	phaseReady
	phaseFailed // the session did not open; any key leaves
	phaseQuit   // the quit prompt is open
)

// opState is one running operation.
type opState struct {
	id     int
	title  string
	start  time.Time
	cancel context.CancelFunc
	// transfer is set for an upload or download once bytes flow.
	transfer *transferState
	// waited is the time its requests spent in the approval dialog,
	// which its duration leaves out.
	waited time.Duration
	// overlapped is set when another operation ran at the same time: its
	// output and its end then name it.
	overlapped bool
	// firstLine is the scrollback position (scrollback.abs) of its first
	// output line, for folding long output.
	firstLine int
	// plan is set for /run; step is the plan's last "step N/M" line;
	// allowRest is set once "allow the rest of this plan" was chosen.
	plan      bool
	step      string
	allowRest bool
}

type transferState struct {
	done, total int64
	first       int64     // bytes at the first sample
	start       time.Time // when the first sample came
	at          time.Time
}

// editTarget is what the multi-line editor is writing.
type editTarget struct {
	path   string
	edit   bool   // /edit: replace before with the result
	before string // the file's content when the edit began
	// existed is set for /write on a file that exists: an unchanged or
	// empty result then asks before it is written.
	existed bool
	// run is set for a pasted multi-line script: saving runs it.
	run bool
}

// model is the one root model.
type model struct {
	ctx    context.Context
	o      Options
	now    func() time.Time
	keys   keyMap
	st     Styles
	bridge *Bridge
	opener *opener

	width, height int
	phase         phase
	session       *engine.Session
	info          providers.Info
	mode          approval.Mode
	state         string // shown in the status line while opening
	openCancel    context.CancelFunc

	sb      *scrollback
	dlg     *dialog
	input   textinput.Model
	hist    history
	shell   bool
	editor  textarea.Model
	editing *editTarget
	spin    spinner.Model
	bar     progress.Model
	help    help.Model

	ops    map[int]*opState
	order  []int // running operation ids, oldest first
	nextOp int
	// interrupted is set by a ctrl+c that cancelled operations; it is
	// cleared by the next other key.
	interrupted bool
	// leaving is set by a ctrl+c while the session opens: the program
	// ends once the open has been undone.
	leaving bool
	// lastKey is when the user last pressed a key (the type-ahead guard
	// of a prompt that opens meanwhile says so).
	lastKey time.Time
	// quitGuard is the type-ahead guard of the quit prompt.
	quitGuard guard
	// confirm is the open yes/no question, if any.
	confirm *confirmPrompt
	// ruleFrom says where each session rule came from, for /rules.
	ruleFrom map[string]string
	// lastOutput is the operation whose output came last.
	lastOutput int
	// blurred is set while the terminal reports it has lost the focus: a
	// request then rings the bell.
	blurred bool
}

// bell rings the terminal's bell, so that a request waiting while the
// user is in another window is noticed.
func (m *model) bell() tea.Cmd {
	out := m.o.Out
	return func() tea.Msg {
		fmt.Fprint(out, "\a")
		return nil
	}
}

// confirmPrompt asks before doing something that may lose data.
type confirmPrompt struct {
	question string
	yes      string         // what y does, e.g. "write it anyway"
	no       string         // what is said when the answer is no
	run      func() tea.Cmd // what y does
	guard    guard
}

func newModel(ctx context.Context, o Options) *model {
	if o.Now == nil {
		o.Now = time.Now
	}
	// A bridge is one NewBridge made (Options.Bridge, checked by Run).
	bridge, _ := o.Bridge.(*Bridge)
	if bridge == nil {
		bridge = NewBridge(nil)
		o.Bridge = bridge
	}
	if o.Out == nil {
		o.Out = os.Stderr
	}
	st := NewStyles(o.Out, o.Color)
	m := &model{
		ctx: ctx, o: o, now: o.Now, keys: newKeyMap(), st: st, bridge: bridge,
		opener: &opener{done: make(chan struct{})},
		width:  80, height: 24,
		mode:  approval.ModeSession,
		state: "opening",
		sb:    newScrollback(o.Mask),
		ops:   map[int]*opState{},
	}
	m.dlg = newDialog(&m.keys)
	if o.Mask != nil {
		m.dlg.mask = o.Mask
	}
	m.input = textinput.New()
	m.input.Prompt = "> "
	m.input.Placeholder = "!command, or /help"
	m.input.PromptStyle = st.Prompt
	m.input.Focus()
	m.editor = textarea.New()
	m.editor.ShowLineNumbers = false
	m.editor.CharLimit = 0
	m.editor.FocusedStyle, m.editor.BlurredStyle = editorStyles(st)
	m.spin = spinner.New(spinner.WithSpinner(spinner.Dot), spinner.WithStyle(st.Info))
	popts := []progress.Option{progress.WithSolidFill(string(st.Bar)), progress.WithoutPercentage()}
	if !o.Color {
		popts = append(popts, progress.WithColorProfile(termenv.Ascii))
	}
	m.bar = progress.New(popts...)
	m.help = help.New()
	m.help.Styles.ShortKey = st.HelpKey
	m.help.Styles.ShortDesc = st.Help
	m.help.Styles.ShortSeparator = st.Help
	m.help.Styles.Ellipsis = st.Help
	if o.Setup != "" {
		m.sb.add(kindInfo, "setup script: "+o.Setup)
	}
	return m
}

// editorStyles are the built-in editor's styles in the TUI's colours: the
// textarea's own defaults are adaptive ones, which would want the terminal
// asked for its background (see package quiet).
func editorStyles(st Styles) (focused, blurred textarea.Style) {
	focused = textarea.Style{
		Base:             st.Stdout,
		CursorLine:       st.Stdout,
		CursorLineNumber: st.Info,
		EndOfBuffer:      st.Info,
		LineNumber:       st.Info,
		Placeholder:      st.Info,
		Prompt:           st.Prompt,
		Text:             st.Stdout,
	}
	blurred = focused
	blurred.CursorLine = st.Info
	blurred.Text = st.Info
	return focused, blurred
}

// Messages produced by commands.
type (
	openedMsg struct {
		s   *engine.Session
		err error
	}
	opDoneMsg struct {
		id  int
		res opResult
	}
	tickMsg       time.Time
	completionMsg struct {
		input  string // the input the completion was asked for
		before string
		dir    string
		names  []string
		err    error
	}
	editorDoneMsg struct {
		target  editTarget
		content string
		err     error
	}
	loadedMsg struct {
		target editTarget
		err    error
	}
)

// Init starts the bridge, the spinner, the clock and opening the session.
func (m *model) Init() tea.Cmd {
	ctx, cancel := context.WithCancel(m.ctx)
	m.openCancel = cancel
	op := m.opener
	open := m.o.Open
	b := m.bridge
	return tea.Batch(m.bridge.wait(), m.spin.Tick, tick(), textinput.Blink, func() tea.Msg {
		defer close(op.done)
		if open == nil {
			op.err = fmt.Errorf("no session to open")
			b.send(context.Background(), openedMsg{err: op.err})
			return nil
		}
		op.session, op.err = open(ctx)
		// Through the bridge, after the engine's events of the open.
		b.send(context.Background(), openedMsg{s: op.session, err: op.err})
		return nil
	})
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// busy reports whether the spinner should turn.
func (m *model) busy() bool { return m.phase == phaseOpening || len(m.ops) > 0 }

// Update routes a message; it never does I/O.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	return m, cmd
}

func (m *model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return nil
	case batchMsg:
		cmds := []tea.Cmd{m.bridge.wait()}
		for _, x := range msg {
			cmds = append(cmds, m.update(x))
		}
		return tea.Batch(cmds...)
	case approvalMsg:
		p := pending{id: msg.id, req: msg.req, reply: msg.reply, hosts: msg.hosts, op: msg.op, added: m.now()}
		if op, ok := m.ops[msg.op]; ok && op.plan {
			if op.allowRest {
				msg.reply <- approval.Decision{Allow: true, By: "user", Reason: "the rest of the plan was allowed"}
				return nil
			}
			p.plan = op.title + " · " + op.step
		}
		m.dlg.add(p, m.now(), m.lastKey)
		if m.blurred {
			return tea.Batch(redrawAfterGuard(), m.bell())
		}
		return redrawAfterGuard()
	case tea.FocusMsg:
		m.blurred = false
		return nil
	case tea.BlurMsg:
		m.blurred = true
		return nil
	case redrawMsg:
		return nil
	case approvalGoneMsg:
		m.dlg.remove(msg.id, m.now())
		return nil
	case textMsg:
		kind := map[stream]lineKind{streamInfo: kindInfo, streamStdout: kindStdout, streamStderr: kindStderr, streamSetup: kindSetup}[msg.stream]
		if op, ok := m.ops[msg.op]; ok && op.overlapped && msg.op != m.lastOutput {
			// Output of operations running at once interleaves: each
			// block says whose it is.
			m.sb.add(kindInfo, "── "+op.title)
		}
		m.lastOutput = msg.op
		if op, ok := m.ops[msg.op]; ok && op.plan && msg.stream == streamInfo {
			if i := strings.LastIndex(msg.data, "step "); i >= 0 {
				op.step, _, _ = strings.Cut(msg.data[i:], "\n")
			}
		}
		m.sb.write(msg.op, msg.stream, kind, msg.data)
		return nil
	case eventMsg:
		m.event(msg.ev)
		return nil
	case transferMsg:
		if op, ok := m.ops[msg.op]; ok {
			if op.transfer == nil {
				op.transfer = &transferState{start: m.now(), first: msg.done}
			}
			op.transfer.done, op.transfer.total, op.transfer.at = msg.done, msg.total, m.now()
		}
		return nil
	case openedMsg:
		return m.opened(msg)
	case opDoneMsg:
		m.finish(msg)
		return nil
	case completionMsg:
		m.completed(msg)
		return nil
	case savedRuleMsg:
		m.savedRule(msg)
		return nil
	case loadedMsg:
		if msg.err != nil {
			m.sb.add(kindError, message(msg.err))
			return nil
		}
		return m.openEditor(msg.target)
	case editorReadyMsg:
		return m.runEditor(msg)
	case editorDoneMsg:
		return m.editorDone(msg)
	case tickMsg:
		return tick()
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		return m.key(msg)
	case tea.MouseMsg:
		m.wheel(msg)
		return nil
	}
	// Cursor blinks and the like go to the focused input.
	var cmd tea.Cmd
	if m.editing != nil {
		m.editor, cmd = m.editor.Update(msg)
	} else {
		m.input, cmd = m.input.Update(msg)
	}
	return cmd
}

// event shows the engine events worth a line.
func (m *model) event(ev engine.Event) {
	switch {
	case ev.Type == "lifecycle" && ev.Sandbox != nil:
		switch ev.Action {
		case "created":
			m.state = "created"
			m.info = *ev.Sandbox
			m.sb.add(kindInfo, fmt.Sprintf("created %s sandbox %s", ev.Sandbox.Provider, ev.Sandbox.ID))
		case "reused":
			m.info = *ev.Sandbox
			m.sb.add(kindInfo, fmt.Sprintf("reusing %s sandbox %s (kept on exit)", ev.Sandbox.Provider, ev.Sandbox.ID))
		}
	case ev.Type == "setup":
		switch ev.Action {
		case "started":
			m.state = "setting up"
		case "succeeded":
			m.sb.add(kindOK, "setup finished")
		case "skipped":
			m.sb.add(kindInfo, "setup already ran here; skipped")
		case "failed":
			m.sb.add(kindError, "setup failed")
		}
	case ev.Gate != nil && ev.Gate.Type == approval.EventDecision:
		g := ev.Gate
		d := g.Decision
		// Every decision but the built-in defaults (the user's own
		// commands, reading and listing): a person's answer, and each
		// automatic approval with the flag or rule that gave it.
		if d.By == "default" && d.Allow {
			return
		}
		if d.Reason == "not answered" {
			return
		}
		// A request, not command output: escaped whole (output.Escape),
		// never cut at a carriage return as output lines are.
		what := fmt.Sprintf("%s %s", g.Request.Kind, g.Request.Target)
		if d.Allow {
			s := "allowed " + what
			if d.Rule != "" {
				s += " (" + d.Rule + ")"
			}
			m.noteRules(g.Request, d)
			if d.SessionRule != "" {
				s += "; session rule added: " + strings.Join(append([]string{d.SessionRule}, d.SessionRules...), ", ")
			}
			if d.SessionExact {
				s += "; allowed again for the session when identical"
			}
			if d.Reason != "" {
				s += " (" + d.Reason + ")"
			}
			m.sb.add(kindOK, "✔ "+output.Escape(s))
			return
		}
		s := "denied " + what
		if d.Rule != "" {
			s += " by " + d.Rule
		}
		if d.Reason != "" {
			s += ": " + d.Reason
		}
		m.sb.add(kindError, "✘ "+output.Escape(s))
	}
}

func (m *model) opened(msg openedMsg) tea.Cmd {
	if msg.err != nil && m.leaving {
		return tea.Quit
	}
	if msg.err != nil {
		m.phase = phaseFailed
		m.sb.add(kindError, "could not open the sandbox: "+msg.err.Error())
		m.sb.add(kindInfo, "press any key to leave")
		return nil
	}
	m.session = msg.s
	m.info = msg.s.Info()
	m.mode = msg.s.Gate().Mode()
	m.phase = phaseReady
	m.sb.add(kindOK, fmt.Sprintf("ready: %s sandbox %s. Type !command to run it, /help for more.", m.info.Provider, m.info.ID))
	return nil
}

// key handles a key press according to what has the focus.
func (m *model) key(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	now := m.now()
	defer func() { m.lastKey = now }()
	if !isText(msg) && key.Matches(msg, k.Interrupt) {
		return m.interrupt()
	}
	m.interrupted = false
	switch {
	case m.phase == phaseFailed:
		return tea.Quit
	case m.phase == phaseQuit:
		if !m.quitGuard.pass(now) || isText(msg) {
			m.quitGuard.until = now.Add(typeAheadGuard)
			return redrawAfterGuard()
		}
		switch {
		case key.Matches(msg, k.Keep):
			return m.leave(true)
		case key.Matches(msg, k.Delete):
			return m.leave(false)
		case key.Matches(msg, k.Cancel):
			m.stay()
		}
		return nil
	case m.confirm != nil:
		c := m.confirm
		if !c.guard.pass(now) || isText(msg) {
			c.guard.until = now.Add(typeAheadGuard)
			return redrawAfterGuard()
		}
		switch {
		case key.Matches(msg, k.Yes):
			m.confirm = nil
			return c.run()
		case key.Matches(msg, k.No), key.Matches(msg, k.Cancel):
			m.confirm = nil
			m.sb.add(kindInfo, c.no)
		}
		return nil
	case m.dlg.open():
		act := m.dlg.handleKey(msg, now)
		for _, a := range act.answers {
			a.p.reply <- a.dec // buffered: never blocks
			if op, ok := m.ops[a.p.op]; ok {
				op.waited += now.Sub(a.p.added)
				op.allowRest = op.allowRest || a.rest
			}
		}
		if act.dropped {
			return redrawAfterGuard()
		}
		return nil
	case m.editing != nil:
		switch {
		case isText(msg):
		case key.Matches(msg, k.Save):
			t := *m.editing
			m.editing = nil
			return m.editorDoneCmd(t, m.editor.Value())
		case key.Matches(msg, k.Cancel):
			m.editing = nil
			m.sb.add(kindInfo, "cancelled")
			return nil
		}
		var cmd tea.Cmd
		m.editor, cmd = m.editor.Update(msg)
		return cmd
	}
	if msg.Paste && strings.ContainsAny(string(msg.Runes), "\r\n") {
		return m.pasteLines(string(msg.Runes))
	}
	if isText(msg) {
		// Text, even when it spells a key name: into the input line.
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return cmd
	}
	switch {
	case key.Matches(msg, k.Submit):
		text := m.input.Value()
		m.input.Reset()
		m.hist.push(strings.TrimSpace(text))
		return m.submit(text)
	case key.Matches(msg, k.Complete):
		if m.completeCommand() {
			return nil
		}
		return m.complete()
	case key.Matches(msg, k.QuitEmpty) && m.input.Value() == "":
		return m.quit()
	case key.Matches(msg, k.HistPrev):
		m.input.SetValue(m.hist.prev(m.input.Value()))
		m.input.CursorEnd()
		return nil
	case key.Matches(msg, k.HistNext):
		m.input.SetValue(m.hist.next(m.input.Value()))
		m.input.CursorEnd()
		return nil
	case key.Matches(msg, k.PageUp):
		m.sb.scroll(max(1, m.scrollHeight()-1))
		return nil
	case key.Matches(msg, k.PageDown):
		m.sb.scroll(-max(1, m.scrollHeight()-1))
		return nil
	case key.Matches(msg, k.Expand):
		if !m.sb.unfold() {
			m.sb.add(kindInfo, "no folded output to expand")
		}
		return nil
	case key.Matches(msg, k.Bottom) && m.input.Value() == "":
		m.sb.follow()
		return nil
	case key.Matches(msg, k.CycleMode):
		next := map[approval.Mode]approval.Mode{approval.ModeAsk: approval.ModeSession, approval.ModeSession: approval.ModeAll, approval.ModeAll: approval.ModeAsk}
		return m.askMode(next[m.mode])
	case key.Matches(msg, k.ShellMode):
		m.toggleShell()
		return nil
	case key.Matches(msg, k.ClearInput):
		m.input.Reset()
		return nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return cmd
}

// interrupt is ctrl+c: it cancels what runs; with nothing running it
// leaves (or, from the quit prompt, deletes and leaves).
func (m *model) interrupt() tea.Cmd {
	switch {
	case m.phase == phaseOpening:
		m.openCancel()
		m.leaving = true
		m.sb.add(kindInfo, "interrupted; cleaning up…")
		return nil
	case m.phase == phaseFailed:
		return tea.Quit
	case m.phase == phaseQuit:
		m.stay()
		return nil
	case m.confirm != nil:
		m.sb.add(kindInfo, m.confirm.no)
		m.confirm = nil
		return nil
	case len(m.ops) > 0 && !m.interrupted:
		m.cancelOps()
		m.interrupted = true
		m.sb.add(kindInfo, "^C cancelling the running operation (ctrl+c again leaves)")
		return nil
	case m.editing != nil:
		m.editing = nil
		m.sb.add(kindInfo, "cancelled")
		return nil
	}
	return m.quit()
}

// quit leaves, asking first about a sandbox this run created.
func (m *model) quit() tea.Cmd {
	if m.session != nil && m.session.Created() && !m.o.Keep {
		m.phase = phaseQuit
		m.quitGuard.arm(m.now(), m.lastKey)
		return redrawAfterGuard()
	}
	return m.leave(m.o.Keep)
}

// wheelLines is how far one turn of the mouse wheel scrolls.
const wheelLines = 3

// wheel scrolls the approval dialog's request when it is open, else the
// transcript.
func (m *model) wheel(msg tea.MouseMsg) {
	n := map[tea.MouseButton]int{tea.MouseButtonWheelUp: wheelLines, tea.MouseButtonWheelDown: -wheelLines}[msg.Button]
	switch {
	case n == 0 || msg.Action != tea.MouseActionPress:
	case m.dlg.open():
		m.dlg.scroll = max(0, m.dlg.scroll-n)
	default:
		m.sb.scroll(n)
	}
}

// stay closes the quit prompt.
func (m *model) stay() {
	m.phase = phaseReady
	m.sb.add(kindInfo, "staying; the sandbox is still here")
}

// pasteLines takes a bracketed paste of several lines: it never joins
// them into one command, but opens them in the multi-line editor, to run
// as one script once reviewed.
func (m *model) pasteLines(text string) tea.Cmd {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	m.sb.add(kindInfo, fmt.Sprintf("pasted %d lines: review them, then %s runs them as one script", strings.Count(strings.TrimRight(text, "\n"), "\n")+1, m.keys.Save.Help().Key))
	return m.openBuiltinEditor(editTarget{run: true, before: m.input.Value() + text})
}

// redrawMsg only redraws the screen.
type redrawMsg struct{}

// redrawAfterGuard redraws once a prompt's type-ahead guard may have run
// out, so its "you are typing" note goes.
func redrawAfterGuard() tea.Cmd {
	return tea.Tick(typeAheadGuard+50*time.Millisecond, func(time.Time) tea.Msg { return redrawMsg{} })
}

// leave ends the program; Run closes the session (deleting a created
// sandbox unless keep).
func (m *model) leave(keep bool) tea.Cmd {
	m.cancelOps()
	if m.session != nil {
		m.session.SetKeep(keep)
	}
	return tea.Quit
}

// cancelOps cancels every running operation.
func (m *model) cancelOps() {
	for _, op := range m.ops {
		op.cancel()
	}
}

// askMode switches to mode; mode all, which allows without asking, is
// confirmed first.
func (m *model) askMode(mode approval.Mode) tea.Cmd {
	if mode != approval.ModeAll {
		m.setMode(mode)
		return nil
	}
	m.confirm = &confirmPrompt{
		question: "Switch to mode all: allow everything no deny or ask rule matches, without asking?",
		yes:      "switch to all",
		no:       "the approval mode stays " + string(m.mode),
		run:      func() tea.Cmd { m.setMode(approval.ModeAll); return nil },
	}
	m.confirm.guard.arm(m.now(), m.lastKey)
	return redrawAfterGuard()
}

// completeCommand completes a slash command's name (/wr → /write); it
// reports false when the input is no command name being typed.
func (m *model) completeCommand() bool {
	text := m.input.Value()
	if !strings.HasPrefix(text, "/") || strings.Contains(text, " ") {
		return false
	}
	names := commandsFor(text[1:])
	switch {
	case len(names) == 1:
		m.input.SetValue("/" + names[0] + " ")
		m.input.CursorEnd()
	case len(names) > 1:
		m.input.SetValue("/" + commonPrefix(names))
		m.input.CursorEnd()
		m.sb.add(kindInfo, "/"+strings.Join(names, "  /"))
	}
	return true
}

func (m *model) setMode(mode approval.Mode) {
	m.mode = mode
	yes := false
	if m.session != nil {
		m.session.Gate().SetMode(mode)
		yes = m.session.Gate().Yes()
	}
	desc := map[approval.Mode]string{
		approval.ModeAsk:     "ask: every request opens the dialog, your own commands too (reading and listing aside); session rules are not applied",
		approval.ModeSession: "session: rules you allowed for the session apply; anything else asks",
		approval.ModeAll:     "all: everything no deny or ask rule matches is allowed without asking",
	}
	s := "approval mode " + desc[mode]
	switch {
	case yes && mode == approval.ModeAll:
		s += " (--yes is on again)"
	case yes:
		s += " (--yes is off until mode all)"
	}
	m.sb.add(kindInfo, s)
}

func (m *model) toggleShell() {
	m.shell = !m.shell
	if m.shell {
		m.input.Prompt = "$ "
		m.input.Placeholder = "a command to run in the sandbox (/shell or ctrl+t leaves shell mode)"
	} else {
		m.input.Prompt = "> "
		m.input.Placeholder = "!command, or /help"
	}
}

// scrollHeight is the number of scrollback rows on screen.
func (m *model) scrollHeight() int {
	_, mid, _ := m.layout()
	return mid
}

// finish records a finished operation.
func (m *model) finish(msg opDoneMsg) {
	op, ok := m.ops[msg.id]
	if !ok {
		return
	}
	delete(m.ops, msg.id)
	for i, id := range m.order {
		if id == msg.id {
			m.order = append(m.order[:i], m.order[i+1:]...)
			break
		}
	}
	m.sb.closeStream(msg.id, streamStdout)
	m.sb.closeStream(msg.id, streamStderr)
	r := msg.res
	for _, l := range r.lines {
		m.sb.push(line{text: m.sb.mask(sanitize(l.text)), kind: l.kind})
	}
	if !op.overlapped {
		m.sb.fold(op.firstLine)
	}
	var denied *approval.DeniedError
	// The time it ran, without the time its requests waited for a person.
	took := (m.now().Sub(op.start) - op.waited).Round(time.Millisecond)
	name := ""
	if op.overlapped {
		name = " · " + op.title
	}
	switch {
	case r.err != nil && (errorsIsCanceled(r.err)):
		m.sb.add(kindError, fmt.Sprintf("cancelled: %s (after %s)", op.title, took))
	case errors.As(r.err, &denied):
		// The ✘ line of the decision said what and why: the end says
		// only that it stopped, and how to allow it when a rule denied.
		s := "stopped: " + op.title + " was denied"
		if denied.Decision.By != "user" && denied.Hint != "" {
			s += " (" + denied.Hint + ")"
		}
		m.sb.add(kindError, output.EscapeText(s))
	case r.err != nil:
		// An error may quote a request: escaped, not cut at a "\r".
		m.sb.add(kindError, output.EscapeText(message(r.err))+name)
	case r.code != nil && *r.code != 0:
		m.sb.add(kindError, fmt.Sprintf("exit %d (%s)%s", *r.code, took, name))
	case r.code != nil:
		m.sb.add(kindOK, fmt.Sprintf("exit 0 (%s)%s", took, name))
	case r.summary != "":
		m.sb.add(kindOK, r.summary+name)
	}
}
