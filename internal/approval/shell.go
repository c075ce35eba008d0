package approval

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Segment is one simple command of a shell command line, as rules see it.
//
// A command line such as `go test ./... && git status | head` has three
// segments. Commands found inside other constructs (a command substitution,
// a subshell, the body of a loop or function, a here-document) are reported
// too, with Nested set, so that a deny rule can see them.
type Segment struct {
	// Text is the segment's source text, without its trailing operator.
	Text string `json:"text"`
	// Words are the command's words after quote removal. A word that cannot
	// be evaluated statically (it holds an expansion) appears as its source
	// text, and the segment is Complex.
	Words []string `json:"words,omitempty"`
	// Complex is set when the segment uses a shell feature that a prefix or
	// exact rule never matches: substitutions, expansions, redirections,
	// here-documents, assignments, compound commands, or text that does not
	// parse.
	Complex bool `json:"complex,omitempty"`
	// Reason names the first feature that made the segment complex.
	Reason string `json:"reason,omitempty"`
	// Nested is set for a command found inside another construct.
	Nested bool `json:"nested,omitempty"`
}

// ArgvSegment is the single segment of a command given as argv: its words
// are the argv, verbatim, and it is never complex.
func ArgvSegment(argv []string) Segment {
	return Segment{Text: QuoteArgv(argv), Words: append([]string(nil), argv...)}
}

// QuoteArgv joins argv into one shell command line that parses back into
// exactly the same words (as far as the shell can represent them: a NUL
// byte cannot be, and is shown escaped).
func QuoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			// Only NUL bytes fail; show them rather than drop them.
			q, _ = syntax.Quote(strings.ReplaceAll(a, "\x00", `\0`), syntax.LangBash)
		}
		parts[i] = q
	}
	return strings.Join(parts, " ")
}

// SplitShell splits a shell command line into its segments with a real
// shell parser (bash dialect, a superset of what /bin/sh accepts). It
// splits on `;`, `&&`, `||`, `|`, `|&`, `&` and newlines and reports for
// each segment its words and whether it is complex (see Segment).
//
// It never fails: text that does not parse is split crudely on the
// operator characters and every piece is marked complex, so that deny
// rules still see the words. It always returns at least one segment; a
// line with no command at all yields one segment without words.
func SplitShell(cmd string) []Segment {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return crudeSplit(cmd, "does not parse: "+err.Error())
	}
	s := splitter{src: cmd}
	for _, st := range f.Stmts {
		s.stmt(st, false)
	}
	if len(s.out) == 0 {
		return []Segment{{Text: strings.TrimSpace(cmd)}}
	}
	return s.out
}

// crudeSplit cuts text that did not parse on every operator character.
func crudeSplit(cmd, reason string) []Segment {
	pieces := strings.FieldsFunc(cmd, func(r rune) bool {
		return r == ';' || r == '&' || r == '|' || r == '\n' || r == '(' || r == ')' || r == '`'
	})
	var out []Segment
	for _, p := range pieces {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		out = append(out, Segment{Text: p, Words: strings.Fields(p), Complex: true, Reason: reason})
	}
	if len(out) == 0 {
		out = append(out, Segment{Text: strings.TrimSpace(cmd), Complex: true, Reason: reason})
	}
	return out
}

type splitter struct {
	src string
	out []Segment
}

// text returns the source between two positions, clamped to the input.
func (s *splitter) text(from, to syntax.Pos) string {
	a, b := int(from.Offset()), int(to.Offset())
	if a < 0 || b > len(s.src) || a > b {
		return ""
	}
	return strings.TrimSpace(s.src[a:b])
}

// stmt appends the segments of one statement.
func (s *splitter) stmt(st *syntax.Stmt, nested bool) {
	if st == nil {
		return
	}
	if bin, ok := st.Cmd.(*syntax.BinaryCmd); ok && len(st.Redirs) == 0 {
		// a && b, a || b, a | b, a |& b: each side is its own segment.
		at := len(s.out)
		s.stmt(bin.X, nested)
		if bin.Op == syntax.PipeAll {
			// |& also redirects stderr of the left side.
			for i := at; i < len(s.out); i++ {
				s.out[i].markComplex("redirection (|&)")
			}
		}
		s.stmt(bin.Y, nested)
		return
	}

	end := st.Position
	if st.Cmd != nil {
		end = st.Cmd.End()
	}
	for _, r := range st.Redirs {
		if r.End().Offset() > end.Offset() {
			end = r.End()
		}
	}
	seg := Segment{Text: s.text(st.Position, end), Nested: nested}
	idx := len(s.out)
	s.out = append(s.out, seg)
	// Work on the slice element through its index: nested segments are
	// appended behind it and may move the backing array.
	mark := func(reason string) { s.out[idx].markComplex(reason) }

	if st.Coprocess || st.Disown {
		mark("coprocess")
	}
	for _, r := range st.Redirs {
		mark(redirectReason(r))
		s.nested(r)
	}

	switch c := st.Cmd.(type) {
	case nil:
		// Only redirections, e.g. `> file`.
	case *syntax.CallExpr:
		if len(c.Assigns) > 0 {
			mark("variable assignment")
		}
		words := make([]string, 0, len(c.Args))
		for _, w := range c.Args {
			lit, reason := s.word(w)
			if reason != "" {
				mark(reason)
			}
			words = append(words, lit)
		}
		s.out[idx].Words = words
		s.nested(c)
	case *syntax.DeclClause:
		mark("declaration (" + c.Variant.Value + ")")
		words := []string{c.Variant.Value}
		for _, a := range c.Args {
			words = append(words, s.text(a.Pos(), a.End()))
		}
		s.out[idx].Words = words
		s.nested(c)
	case *syntax.BinaryCmd:
		// A pipeline with redirections on the whole, e.g. `{ a; } | b > f`.
		mark("redirection")
		s.nested(c)
	default:
		mark(commandReason(st.Cmd))
		s.nested(st.Cmd)
	}
}

// nested appends the statements found anywhere below node.
func (s *splitter) nested(node syntax.Node) {
	syntax.Walk(node, func(n syntax.Node) bool {
		if n == node {
			return true
		}
		if st, ok := n.(*syntax.Stmt); ok {
			s.stmt(st, true)
			return false
		}
		return true
	})
}

func (seg *Segment) markComplex(reason string) {
	if !seg.Complex {
		seg.Complex = true
		seg.Reason = reason
	}
}

// word returns the value of a word after quote removal, or its source text
// and the reason it cannot be evaluated statically.
func (s *splitter) word(w *syntax.Word) (string, string) {
	var b strings.Builder
	reason := ""
	fail := func(r string) {
		if reason == "" {
			reason = r
		}
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeUnquoted(p.Value))
		case *syntax.SglQuoted:
			if !p.Dollar {
				b.WriteString(p.Value)
				continue
			}
			// $'…' escapes are decoded by the shell; decode them the same way.
			v, err := expand.Literal(nil, &syntax.Word{Parts: []syntax.WordPart{p}})
			if err != nil {
				fail("ANSI-C quoting")
			}
			b.WriteString(v)
		case *syntax.DblQuoted:
			for _, inner := range p.Parts {
				if lit, ok := inner.(*syntax.Lit); ok {
					b.WriteString(unescapeDouble(lit.Value))
					continue
				}
				fail(partReason(inner))
			}
		default:
			fail(partReason(part))
		}
	}
	if reason == "" {
		// Brace expansion turns one word into several: {rm,-rf,/}.
		probe := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
		if syntax.SplitBraces(probe) {
			fail("brace expansion")
		}
	}
	if reason != "" {
		return s.text(w.Pos(), w.End()), reason
	}
	return b.String(), ""
}

// unescapeUnquoted removes backslashes as the shell does outside quotes.
func unescapeUnquoted(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
			if v[i] == '\n' {
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// unescapeDouble removes backslashes as the shell does inside "…".
func unescapeDouble(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

func partReason(p syntax.WordPart) string {
	switch p.(type) {
	case *syntax.CmdSubst:
		return "command substitution"
	case *syntax.ProcSubst:
		return "process substitution"
	case *syntax.ParamExp:
		return "parameter expansion"
	case *syntax.ArithmExp:
		return "arithmetic expansion"
	case *syntax.ExtGlob:
		return "extended glob"
	case *syntax.BraceExp:
		return "brace expansion"
	default:
		return "expansion"
	}
}

func redirectReason(r *syntax.Redirect) string {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		return "here-document"
	case syntax.WordHdoc:
		return "here-string"
	default:
		return "redirection"
	}
}

func commandReason(c syntax.Command) string {
	switch c.(type) {
	case *syntax.Subshell:
		return "subshell"
	case *syntax.Block:
		return "block"
	case *syntax.FuncDecl:
		return "function definition"
	case *syntax.IfClause:
		return "if clause"
	case *syntax.WhileClause:
		return "while loop"
	case *syntax.ForClause:
		return "for loop"
	case *syntax.CaseClause:
		return "case clause"
	case *syntax.ArithmCmd:
		return "arithmetic command"
	case *syntax.TestClause:
		return "test clause"
	case *syntax.LetClause:
		return "let clause"
	case *syntax.TimeClause:
		return "time clause"
	case *syntax.CoprocClause:
		return "coprocess"
	default:
		return "compound command"
	}
}
