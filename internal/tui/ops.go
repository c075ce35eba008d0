package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/driver"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// shellSession is the sandbox shell session (providers.ExecRequest.Session)
// every command typed in the TUI runs in, shell mode or !COMMAND: `cd` and
// `export` carry over from one command to the next.
const shellSession = "tui"

// opResult is what an operation leaves in the scrollback when it ends.
type opResult struct {
	lines   []line
	code    *int // exit status of an exec
	summary string
	err     error
}

func errorsIsCanceled(err error) bool { return errors.Is(err, context.Canceled) }

// sentinels are the providers' error kinds, whose text a message need not
// repeat after it has said it in words.
var sentinels = []error{providers.ErrNotFound, providers.ErrUnsupported, providers.ErrInvalid, providers.ErrExists}

// message is err as one sentence for a person: without a trailing Go
// sentinel (": invalid argument", ": already exists") and with
// "cancelled" for "context canceled".
func message(err error) string {
	msg := err.Error()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			msg = strings.TrimSuffix(msg, ": "+s.Error())
		}
	}
	return strings.ReplaceAll(msg, context.Canceled.Error(), "cancelled")
}

// submit runs an input line.
func (m *model) submit(text string) tea.Cmd {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	c, err := parseInput(text, m.shell)
	if err != nil {
		m.sb.add(kindError, err.Error())
		return nil
	}
	switch c.name {
	case "help":
		m.showHelp()
		return nil
	case "quit":
		return m.quit()
	case "shell":
		m.toggleShell()
		return nil
	case "clear":
		m.sb = newScrollback(m.o.Mask)
		return nil
	case "mode":
		if len(c.args) == 0 {
			m.sb.add(kindInfo, "approval mode: "+string(m.mode)+" (ask | session | all)")
			return nil
		}
		mode, err := approval.ParseMode(c.args[0])
		if err != nil {
			m.sb.add(kindError, err.Error())
			return nil
		}
		return m.askMode(mode)
	}
	if m.session == nil {
		m.sb.add(kindError, "the sandbox is not open yet")
		return nil
	}
	s := m.session
	switch c.name {
	case "rules":
		return m.rulesCmd(c)
	case "exec":
		sh := c.args[0]
		if prog := interactiveProgram(sh); prog != "" {
			m.sb.add(kindInfo, fmt.Sprintf("note: %s wants a terminal, but commands here have none and their stdin is closed, so it exits at once or waits until ctrl+c; give it a script or arguments, or use `sandbox shell --sandbox-id %s`", prog, m.info.ID))
		}
		return m.start("$ "+sh, func(ctx context.Context, id int) opResult {
			res, err := s.Exec(ctx, providers.ExecRequest{
				Shell:   sh,
				Session: shellSession,
				Stdout:  m.bridge.writer(id, streamStdout),
				Stderr:  m.bridge.writer(id, streamStderr),
			})
			if err != nil {
				return opResult{err: err}
			}
			code := res.ExitCode
			return opResult{code: &code}
		})
	case "read":
		if err := c.checkArgs(1, 2); err != nil {
			break
		}
		p, from := c.args[0], 1
		if len(c.args) == 2 {
			n, err := strconv.Atoi(c.args[1])
			if err != nil || n < 1 {
				m.sb.add(kindError, "usage: "+usageOf("read")+" (LINE is a line number, from 1)")
				return nil
			}
			from = n
		}
		return m.start("read "+p, func(ctx context.Context, id int) opResult {
			return m.readPage(ctx, s, id, p, from)
		})
	case "write":
		if err := c.checkArgs(1, 1); err != nil {
			break
		}
		t := editTarget{path: c.args[0]}
		if c.rest != "" {
			return m.writeCmd(t, c.rest+"\n")
		}
		// The editor opens on what the file holds now.
		return func() tea.Msg {
			before, err := loadFile(m.ctx, s, t.path, "write it with /upload")
			switch {
			case errors.Is(err, providers.ErrNotFound):
				return loadedMsg{target: t}
			case err != nil:
				err = fmt.Errorf("write %s: %w", t.path, err)
			}
			t.before, t.existed = before, true
			return loadedMsg{target: t, err: err}
		}
	case "edit":
		p, old, nw, all, whole, err := editArgs(c.args)
		switch {
		case err != nil:
		case whole:
			return func() tea.Msg {
				before, err := loadFile(m.ctx, s, p, "edit it with /edit PATH OLD NEW")
				if err != nil {
					err = fmt.Errorf("edit %s: %w", p, err)
				}
				return loadedMsg{target: editTarget{path: p, edit: true, before: before}, err: err}
			}
		default:
			return m.start("edit "+p, func(ctx context.Context, id int) opResult {
				r, err := s.Edit(ctx, p, old, nw, all)
				if err != nil {
					return opResult{err: err}
				}
				return opResult{lines: diffLines(r.Diff), summary: fmt.Sprintf("edited %s (%d replacement)", p, r.Replacements)}
			})
		}
	case "ls":
		if err := c.checkArgs(0, 1); err != nil {
			break
		}
		p := providers.DefaultWorkdir
		if len(c.args) == 1 {
			p = c.args[0]
		}
		return m.start("ls "+p, func(ctx context.Context, id int) opResult {
			list, err := s.Ls(ctx, p, 1)
			if err != nil {
				return opResult{err: err}
			}
			var r opResult
			for _, fi := range list {
				r.lines = append(r.lines, line{text: fmt.Sprintf("%s %9s  %s", fi.Mode, output.Bytes(fi.Size), output.Escape(fi.Path)), kind: kindStdout})
			}
			r.summary = fmt.Sprintf("%d entries", len(list))
			return r
		})
	case "glob":
		if err := c.checkArgs(1, 2); err != nil {
			break
		}
		pat, root := c.args[0], providers.DefaultWorkdir
		if len(c.args) == 2 {
			root = c.args[1]
		}
		return m.start("glob "+pat, func(ctx context.Context, id int) opResult {
			list, err := s.Glob(ctx, root, pat)
			if err != nil {
				return opResult{err: err}
			}
			var r opResult
			for _, fi := range list {
				r.lines = append(r.lines, line{text: output.Escape(fi.Path), kind: kindStdout})
			}
			r.summary = fmt.Sprintf("%d matches", len(list))
			return r
		})
	case "grep":
		if err := c.checkArgs(1, 2); err != nil {
			break
		}
		req := providers.GrepRequest{Pattern: c.args[0], Path: providers.DefaultWorkdir}
		if len(c.args) == 2 {
			req.Path = c.args[1]
		}
		return m.start("grep "+req.Pattern, func(ctx context.Context, id int) opResult {
			ms, err := s.Grep(ctx, req)
			if err != nil {
				return opResult{err: err}
			}
			var r opResult
			for _, x := range ms {
				r.lines = append(r.lines, line{text: fmt.Sprintf("%s:%d: %s", output.Escape(x.Path), x.Line, output.EscapeLine(x.Text)), kind: kindStdout})
			}
			r.summary = fmt.Sprintf("%d matches", len(ms))
			return r
		})
	case "upload", "download":
		args, force := withoutForce(c.args)
		if len(args) != 2 {
			break
		}
		from, to := args[0], args[1]
		up := c.name == "upload"
		return m.start(fmt.Sprintf("%s %s → %s", c.name, from, to), func(ctx context.Context, id int) opResult {
			o := engine.TransferOptions{Force: force, Progress: m.bridge.transferProgress(id)}
			var err error
			if up {
				err = s.Upload(ctx, from, to, o)
			} else {
				err = s.Download(ctx, from, to, o)
			}
			if err != nil {
				return opResult{err: err}
			}
			return opResult{summary: c.name + " done"}
		})
	case "run":
		if err := c.checkArgs(1, 1); err != nil {
			break
		}
		file := c.args[0]
		cmd := m.start("run "+file, func(ctx context.Context, id int) opResult {
			data, err := os.ReadFile(file)
			if err != nil {
				return opResult{err: err}
			}
			plan, err := driver.ParsePlan(file, data)
			if err != nil {
				return opResult{err: err}
			}
			err = driver.Run(ctx, s, plan, driver.Options{
				Stdout:   m.bridge.writer(id, streamStdout),
				Stderr:   m.bridge.writer(id, streamStderr),
				Progress: m.bridge.writer(id, streamInfo),
				Timeout:  m.o.Timeout,
			})
			if err != nil {
				return opResult{err: err}
			}
			return opResult{summary: fmt.Sprintf("plan %s: %d step(s) done", file, len(plan.Steps))}
		})
		m.ops[m.nextOp].plan = true
		return cmd
	}
	m.sb.add(kindError, "usage: "+usageOf(c.name))
	return nil
}

// interactivePrograms are programs that, without arguments (or always,
// for the full-screen ones), want a terminal and a person typing.
var interactivePrograms = map[string]bool{
	"python": false, "python3": false, "node": false, "irb": false, "bash": false, "sh": false, "zsh": false,
	"psql": false, "mysql": false, "sqlite3": false, "cat": false, "ssh": false,
	"top": true, "htop": true, "vi": true, "vim": true, "nano": true, "less": true, "more": true, "man": true,
}

// interactiveProgram returns the program of a command line that needs a
// terminal, or "".
func interactiveProgram(sh string) string {
	f := strings.Fields(sh)
	if len(f) == 0 {
		return ""
	}
	prog := path.Base(f[0])
	always, ok := interactivePrograms[prog]
	if ok && (always || len(f) == 1) {
		return prog
	}
	return ""
}

func withoutForce(args []string) ([]string, bool) {
	force := slices.Contains(args, "--force") || slices.Contains(args, "-f")
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--force" || a == "-f" }), force
}

// start runs fn as operation number id in a command, under the per-call
// timeout; ctrl+c cancels its context.
func (m *model) start(title string, fn func(ctx context.Context, id int) opResult) tea.Cmd {
	m.nextOp++
	id := m.nextOp
	ctx, cancel := engine.WithCallTimeout(withOp(m.ctx, id), m.o.Timeout, fmt.Sprintf("--timeout %s", m.o.Timeout))
	op := &opState{id: id, title: title, start: m.now(), cancel: cancel}
	for _, other := range m.ops {
		other.overlapped, op.overlapped = true, true
	}
	m.ops[id] = op
	m.order = append(m.order, id)
	m.sb.follow()
	m.sb.add(kindOp, "› "+title)
	op.firstLine = m.sb.abs()
	b := m.bridge
	return tea.Batch(m.spin.Tick, func() tea.Msg {
		r := fn(ctx, id)
		r.err = engine.CallError(ctx, r.err)
		cancel()
		// Through the bridge, after the operation's output: one queue
		// keeps the order.
		b.send(context.Background(), opDoneMsg{id: id, res: r})
		return nil
	})
}

func (m *model) writeCmd(t editTarget, content string) tea.Cmd {
	s := m.session
	if t.run {
		return m.submit("!" + content)
	}
	if t.edit {
		if content == t.before {
			m.sb.add(kindInfo, "no change to "+t.path)
			return nil
		}
		return m.start("edit "+t.path, func(ctx context.Context, id int) opResult {
			r, err := s.Edit(ctx, t.path, t.before, content, false)
			if err != nil {
				return opResult{err: err}
			}
			return opResult{lines: diffLines(r.Diff), summary: "edited " + t.path}
		})
	}
	return m.start("write "+t.path, func(ctx context.Context, id int) opResult {
		if err := s.Write(ctx, t.path, strings.NewReader(content), true); err != nil {
			return opResult{err: err}
		}
		return opResult{summary: fmt.Sprintf("wrote %s (%s)", t.path, output.Bytes(int64(len(content))))}
	})
}

// openEditor edits a file's new content: in $EDITOR when one is set, else
// in the built-in multi-line input.
func (m *model) openEditor(t editTarget) tea.Cmd {
	if m.o.Editor == "" {
		return m.openBuiltinEditor(t)
	}
	// The temporary file is written in a command; the editor runs when
	// it is ready (editorReadyMsg), with the terminal handed over.
	return func() tea.Msg {
		f, err := os.CreateTemp("", "sandbox-edit-*"+path.Ext(t.path))
		if err != nil {
			return editorDoneMsg{target: t, err: fmt.Errorf("editor: %w", err)}
		}
		_, err = f.WriteString(t.before)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
			return editorDoneMsg{target: t, err: fmt.Errorf("editor: %w", err)}
		}
		return editorReadyMsg{target: t, file: f.Name()}
	}
}

// openBuiltinEditor edits t in the built-in multi-line input.
func (m *model) openBuiltinEditor(t editTarget) tea.Cmd {
	m.editing = &t
	m.input.Reset()
	m.editor.SetValue(t.before)
	m.editor.Focus()
	return textarea.Blink
}

// editorReadyMsg says the temporary file for $EDITOR is written.
type editorReadyMsg struct {
	target editTarget
	file   string
}

// runEditor hands the terminal to $EDITOR on the file, then reads it back.
func (m *model) runEditor(msg editorReadyMsg) tea.Cmd {
	t, name := msg.target, msg.file
	return tea.ExecProcess(exec.Command("sh", "-c", m.o.Editor+` "$1"`, "sh", name), func(err error) tea.Msg {
		defer os.Remove(name)
		if err != nil {
			return editorDoneMsg{target: t, err: fmt.Errorf("%s: %w", m.o.Editor, err)}
		}
		data, err := os.ReadFile(name)
		return editorDoneMsg{target: t, content: string(data), err: err}
	})
}

func (m *model) editorDoneCmd(t editTarget, content string) tea.Cmd {
	return func() tea.Msg { return editorDoneMsg{target: t, content: content} }
}

func (m *model) editorDone(msg editorDoneMsg) tea.Cmd {
	if msg.err != nil {
		m.sb.add(kindError, message(msg.err))
		return nil
	}
	t, content := msg.target, msg.content
	if t.run {
		if strings.TrimSpace(content) == "" {
			m.sb.add(kindInfo, "nothing to run")
			return nil
		}
		return m.writeCmd(t, content)
	}
	if !t.edit && content != "" && !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	if t.existed {
		var q string
		switch {
		case strings.TrimSpace(content) == "":
			q = fmt.Sprintf("The new content of %s is empty: write the empty file over its %s?", t.path, output.Bytes(int64(len(t.before))))
		case content == t.before:
			q = fmt.Sprintf("%s is unchanged: write it anyway?", t.path)
		}
		if q != "" {
			m.confirm = &confirmPrompt{question: q, yes: "write it", no: "nothing written", run: func() tea.Cmd { return m.writeCmd(t, content) }}
			m.confirm.guard.arm(m.now(), m.lastKey)
			return redrawAfterGuard()
		}
	}
	return m.writeCmd(t, content)
}

// complete asks the sandbox for the entries that complete the path at the
// end of the input.
func (m *model) complete() tea.Cmd {
	if m.session == nil {
		return nil
	}
	text := m.input.Value()
	if m.shell && !strings.Contains(text, " ") {
		return nil
	}
	before, word, ok := completionTarget(text)
	if !ok {
		return nil
	}
	full := word
	if !strings.HasPrefix(full, "/") {
		full = providers.DefaultWorkdir + "/" + full
	}
	dir := path.Dir(full)
	if strings.HasSuffix(full, "/") {
		dir = strings.TrimSuffix(full, "/")
		if dir == "" {
			dir = "/"
		}
	}
	s, ctx := m.session, m.ctx
	return func() tea.Msg {
		list, err := s.Ls(ctx, dir, 1)
		msg := completionMsg{input: text, before: before, dir: dir, err: err}
		for _, fi := range list {
			name := fi.Path
			if fi.IsDir() {
				name += "/"
			}
			msg.names = append(msg.names, name)
		}
		return msg
	}
}

// completed applies a completion when the input has not changed since.
func (m *model) completed(msg completionMsg) {
	if msg.err != nil || m.input.Value() != msg.input {
		return
	}
	_, word, _ := completionTarget(msg.input)
	rel := !strings.HasPrefix(word, "/")
	prefix := word
	if rel {
		prefix = providers.DefaultWorkdir + "/" + word
	}
	var match []string
	for _, n := range msg.names {
		if strings.HasPrefix(n, prefix) {
			match = append(match, n)
		}
	}
	if len(match) == 0 {
		return
	}
	common := commonPrefix(match)
	if rel {
		common = strings.TrimPrefix(common, providers.DefaultWorkdir+"/")
	}
	m.input.SetValue(msg.before + common)
	m.input.CursorEnd()
	if len(match) > 1 {
		var names []string
		for _, n := range match {
			names = append(names, path.Base(n)+map[bool]string{true: "/"}[strings.HasSuffix(n, "/")])
		}
		m.sb.add(kindInfo, strings.Join(names, "  "))
	}
}

// diffLines styles a diff's lines, escaped (output.EscapeLine) like every
// listing of what is in the sandbox.
func diffLines(d string) []line {
	var out []line
	for l := range strings.SplitSeq(strings.TrimSuffix(d, "\n"), "\n") {
		k := kindStdout
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			k = kindInfo
		case strings.HasPrefix(l, "+"):
			k = kindDiffAdd
		case strings.HasPrefix(l, "-"):
			k = kindDiffDel
		case strings.HasPrefix(l, "@@"):
			k = kindDiffHunk
		}
		out = append(out, line{text: output.EscapeLine(l), kind: k})
	}
	return out
}

func (m *model) showHelp() {
	m.sb.add(kindInfo, "commands:")
	m.sb.add(kindStdout, fmt.Sprintf("  %-28s %s", "!COMMAND", "run a shell command in the sandbox (in shell mode: just COMMAND)"))
	for _, c := range commands {
		m.sb.add(kindStdout, fmt.Sprintf("  %-28s %s", c.usage, c.help))
	}
	for _, sec := range []struct {
		title string
		keys  []key.Binding
	}{{"keys:", m.keys.mainKeys()}, {"in the approval dialog:", m.keys.dialogKeys()}} {
		m.sb.add(kindInfo, sec.title)
		for _, b := range sec.keys {
			h := b.Help()
			m.sb.add(kindStdout, fmt.Sprintf("  %-28s %s", h.Key, h.Desc))
		}
	}
	m.sb.add(kindInfo, fmt.Sprintf("a prompt answers only once the keyboard has been quiet for %s, so typing cannot answer it; enter answers only a highlighted choice.", typeAheadGuard))
}
