package tui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// command is one parsed input line.
type command struct {
	// name is "exec" for !cmd (and plain text in shell mode), else the
	// slash command without its slash.
	name string
	// args are the words after the name; for exec, args[0] is the whole
	// shell command line.
	args []string
	// rest is the text after the name (and, for /write, after the path)
	// taken verbatim.
	rest string
}

// commands lists the slash commands and their usage, for /help and errors.
var commands = []struct{ name, usage, help string }{
	{"read", "/read PATH [LINE]", "show a page of a text file (from LINE)"},
	{"write", "/write PATH [TEXT]", "write TEXT, or edit the file's content in $EDITOR (else a multi-line input)"},
	{"edit", "/edit PATH [OLD NEW | --old OLD --new NEW] [--all]", "replace OLD with NEW (quoted words; every one with --all), or edit the whole file in the editor"},
	{"ls", "/ls [PATH]", "list a directory"},
	{"glob", "/glob PATTERN [ROOT]", "find paths matching a glob"},
	{"grep", "/grep PATTERN [PATH]", "search file contents"},
	{"upload", "/upload LOCAL REMOTE", "copy host files into the sandbox"},
	{"download", "/download REMOTE LOCAL", "copy sandbox files to the host"},
	{"run", "/run PLAN", "run a plan file; its steps are asked about as source script"},
	{"mode", "/mode [ask|session|all]", "switch the approval mode (shift+tab cycles)"},
	{"rules", "/rules [revoke N | save N FILE]", "list the session rules; revoke one, or add it to a policy file"},
	{"shell", "/shell", "toggle shell mode: plain text runs as a command (ctrl+t)"},
	{"clear", "/clear", "clear the scrollback"},
	{"help", "/help", "show this help"},
	{"quit", "/quit", "leave (a sandbox this run created is deleted unless kept)"},
}

// commandsFor returns the command named prefix, or else those it starts.
func commandsFor(prefix string) []string {
	var out []string
	for _, c := range commands {
		if c.name == prefix {
			return []string{c.name}
		}
		if prefix != "" && strings.HasPrefix(c.name, prefix) {
			out = append(out, c.name)
		}
	}
	return out
}

func usageOf(name string) string {
	for _, c := range commands {
		if c.name == name {
			return c.usage
		}
	}
	return ""
}

// parseInput turns a line into a command. In shell mode, text without a
// leading / runs as a command; outside it, !cmd does.
func parseInput(text string, shellMode bool) (command, error) {
	t := strings.TrimSpace(text)
	switch {
	case t == "":
		return command{}, errors.New("empty input")
	case strings.HasPrefix(t, "!"):
		sh := strings.TrimSpace(t[1:])
		if sh == "" {
			return command{name: "shell"}, nil
		}
		return command{name: "exec", args: []string{sh}, rest: sh}, nil
	case !strings.HasPrefix(t, "/"):
		if shellMode {
			return command{name: "exec", args: []string{t}, rest: t}, nil
		}
		return command{}, fmt.Errorf("%q is not a command: start a command with ! (or switch to shell mode with ctrl+t), or type /help", t)
	}
	name, rest, _ := strings.Cut(t[1:], " ")
	rest = strings.TrimLeft(rest, " ")
	switch names := commandsFor(name); {
	case len(names) == 1:
		name = names[0] // a unique prefix names its command: /wr is /write
	case len(names) > 1:
		return command{}, fmt.Errorf("/%s could be /%s; type more of it", name, strings.Join(names, ", /"))
	default:
		return command{}, fmt.Errorf("unknown command /%s; type /help", name)
	}
	c := command{name: name, rest: rest}
	if name == "write" {
		// The text after the path is taken as it is.
		p, text, _ := strings.Cut(rest, " ")
		c.args = []string{p}
		if p == "" {
			c.args = nil
		}
		c.rest = text
		return c, nil
	}
	args, err := splitWords(rest)
	if err != nil {
		return command{}, err
	}
	c.args = args
	return c, nil
}

// editArgs reads the arguments of /edit as `sandbox edit` takes them:
// PATH, then OLD NEW or --old OLD --new NEW, and --all; whole is set for
// PATH alone (the whole file in the editor).
func editArgs(args []string) (p, old, new string, all, whole bool, err error) {
	var words []string
	var hasOld, hasNew bool
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--all":
			all = true
		case (a == "--old" || a == "--new") && i+1 < len(args):
			i++
			if a == "--old" {
				old, hasOld = args[i], true
			} else {
				new, hasNew = args[i], true
			}
		case strings.HasPrefix(a, "--old="):
			old, hasOld = strings.TrimPrefix(a, "--old="), true
		case strings.HasPrefix(a, "--new="):
			new, hasNew = strings.TrimPrefix(a, "--new="), true
		default:
			words = append(words, a)
		}
	}
	bad := fmt.Errorf("usage: %s", usageOf("edit"))
	switch {
	case len(words) == 1 && !hasOld && !hasNew && !all:
		return words[0], "", "", false, true, nil
	case len(words) == 3 && !hasOld && !hasNew:
		return words[0], words[1], words[2], all, false, nil
	case len(words) == 1 && hasOld:
		return words[0], old, new, all, false, nil
	}
	return "", "", "", false, false, bad
}

// checkArgs validates the argument count of a slash command.
func (c command) checkArgs(minArgs, maxArgs int) error {
	if len(c.args) < minArgs || len(c.args) > maxArgs {
		return fmt.Errorf("usage: %s", usageOf(c.name))
	}
	return nil
}

// splitWords splits on spaces, honouring '…' and "…" quotes and \ escapes
// (outside single quotes).
func splitWords(s string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		in    bool
		quote rune
		esc   bool
	)
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, in = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if esc {
		cur.WriteRune('\\')
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// history is the input history, oldest first.
type history struct {
	items []string
	pos   int    // len(items) when not browsing
	draft string // what was typed before browsing
}

func (h *history) push(s string) {
	if s != "" && (len(h.items) == 0 || h.items[len(h.items)-1] != s) {
		h.items = append(h.items, s)
	}
	h.pos = len(h.items)
}

// prev returns the older entry (the current text when there is none).
func (h *history) prev(current string) string {
	if h.pos == len(h.items) {
		h.draft = current
	}
	if h.pos > 0 {
		h.pos--
		return h.items[h.pos]
	}
	return current
}

// next returns the newer entry, or the draft past the newest.
func (h *history) next(current string) string {
	if h.pos >= len(h.items) {
		return current
	}
	h.pos++
	if h.pos == len(h.items) {
		return h.draft
	}
	return h.items[h.pos]
}

// historyKeep is how many entries the history file keeps.
const historyKeep = 500

// load reads the history file (one quoted entry a line); a missing or
// unreadable file is an empty history.
func (h *history) load(file string) {
	if file == "" {
		return
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if s, err := strconv.Unquote(l); err == nil {
			h.push(s)
		}
	}
}

// save writes the newest entries to the history file, readable by its
// owner only (commands may hold secrets).
func (h *history) save(file string) error {
	if file == "" || len(h.items) == 0 {
		return nil
	}
	var b strings.Builder
	for _, s := range h.items[max(0, len(h.items)-historyKeep):] {
		b.WriteString(strconv.Quote(s) + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// completionTarget returns the word being completed at the end of text and
// the text before it, or ok=false when the end is not a path argument.
func completionTarget(text string) (before, word string, ok bool) {
	i := strings.LastIndexByte(text, ' ')
	if i < 0 {
		return "", "", false
	}
	before, word = text[:i+1], text[i+1:]
	if strings.HasPrefix(strings.TrimSpace(text), "/upload") && strings.Count(strings.TrimSpace(before), " ") < 1 {
		return "", "", false // the first argument of /upload is a host path
	}
	return before, word, true
}

// commonPrefix is the longest prefix all of ss share.
func commonPrefix(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	p := ss[0]
	for _, s := range ss[1:] {
		for !strings.HasPrefix(s, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}
