package approval

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
	// here-documents, assignments, compound commands, alias definitions,
	// wrappers whose options are not understood, constructs that sh and
	// bash read differently, or text that does not parse.
	Complex bool `json:"complex,omitempty"`
	// Reason names the first feature that made the segment complex.
	Reason string `json:"reason,omitempty"`
	// Nested is set for a command found inside another construct.
	Nested bool `json:"nested,omitempty"`

	// info describes each word of Words for matching; nil means every
	// word is plain text.
	info []wordInfo
	// unparsed marks a piece of text that did not parse: a deny rule
	// matches it when the rule's command word appears anywhere in it.
	unparsed bool
}

// wordInfo says what the shell may turn a word into.
type wordInfo struct {
	// glob: the word holds unquoted pattern characters, so the shell may
	// replace it with the names of matching files.
	glob bool
	// dyn: the word holds an expansion whose value is unknown.
	dyn bool
	// split: an unquoted expansion, so the word may become no word at all
	// or several.
	split bool
	// re and baseRe are anchored regular expressions matching every value
	// the word may take, and every base name (the text after the last
	// slash) of such a value. They are set when glob or dyn is.
	re, baseRe string
}

func (w wordInfo) plain() bool { return !w.glob && !w.dyn && !w.split }

// wordAt returns what is known about word i of the segment.
func (seg Segment) wordAt(i int) wordInfo {
	if i < len(seg.info) {
		return seg.info[i]
	}
	return wordInfo{}
}

// hasPatterns reports whether any word may be changed by the shell.
func (seg Segment) hasPatterns() bool {
	return slices.ContainsFunc(seg.info, func(w wordInfo) bool { return !w.plain() })
}

// ArgvSegment is the single segment of a command given as argv: its words
// are the argv, verbatim, and it is never complex.
func ArgvSegment(argv []string) Segment {
	return Segment{Text: QuoteArgv(argv), Words: append([]string(nil), argv...)}
}

// QuoteArgv joins argv into one command line for POSIX sh that parses back
// into exactly the same words (as far as the shell can represent them: a
// NUL byte cannot be, and is shown escaped). Words that need quoting are
// put in single quotes, which sh and bash read alike; other characters,
// including control characters, are kept as they are, so show the result
// escaped.
func QuoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		// A NUL byte cannot be passed; show it rather than drop it.
		a = strings.ReplaceAll(a, "\x00", `\0`)
		q, err := syntax.Quote(a, syntax.LangPOSIX)
		if err != nil || i == 0 && (strings.HasPrefix(q, "-") || strings.HasPrefix(q, "+")) {
			// Non-printable text, or a line that `sh -c` would take
			// for options: single quotes keep every byte as is.
			q = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = q
	}
	return strings.Join(parts, " ")
}

// SplitShell splits a shell command line into its segments the way
// /bin/sh reads it. It splits on `;`, `&&`, `||`, `|`, `&` and newlines
// and reports for each segment its words and whether it is complex (see
// Segment).
//
// The line is parsed twice, as POSIX sh (what /bin/sh is on most systems)
// and as bash (what /bin/sh is on some). When the two parses disagree in
// any way, or either fails, every segment of both is reported and marked
// complex, so that only the bare `exec` rule or a person can allow the
// line while deny rules still see the words of both readings. Quoting that
// the two shells read differently ($'…' and $"…") is always complex.
//
// It never fails: text that does not parse is also cut crudely on the
// operator characters, with quotes removed in every way a shell could
// remove them, and the pieces are marked so that a deny rule matches when
// its command word appears anywhere in them. It always returns at least
// one segment; a line with no command at all yields one segment without
// words.
func SplitShell(cmd string) []Segment {
	posix, perr := parseSegments(cmd, syntax.LangPOSIX)
	bash, berr := parseSegments(cmd, syntax.LangBash)
	suspect := suspectText(cmd)
	if perr == nil && berr == nil && suspect == "" && sameSegments(posix, bash) {
		if len(posix) == 0 {
			return []Segment{{Text: strings.TrimSpace(cmd)}}
		}
		return posix
	}

	var reason string
	switch {
	case perr != nil:
		reason = "does not parse as sh: " + perr.Error()
	case berr != nil:
		reason = "does not parse as bash: " + berr.Error()
	case suspect != "":
		reason = suspect
	default:
		reason = "sh and bash read it differently"
	}
	var out []Segment
	seen := map[string]int{}
	add := func(segs []Segment) {
		for _, s := range segs {
			s.markComplex(reason)
			if i, ok := seen[s.key()]; ok {
				out[i].unparsed = out[i].unparsed || s.unparsed
				continue
			}
			seen[s.key()] = len(out)
			out = append(out, s)
		}
	}
	add(posix)
	add(bash)
	if perr != nil || berr != nil || suspect != "" {
		add(lenientSplit(cmd, reason))
	}
	if i := strings.IndexByte(cmd, 0); i >= 0 {
		// A program given the line as a C string stops at the NUL byte.
		add(SplitShell(cmd[:i]))
	}
	if len(out) == 0 {
		out = append(out, Segment{Text: strings.TrimSpace(cmd), Complex: true, Reason: reason})
	}
	return out
}

// key identifies the segment's words and what is known about them.
func (seg Segment) key() string {
	var b strings.Builder
	for i, w := range seg.Words {
		b.WriteString(strconv.Itoa(len(w)))
		b.WriteByte(':')
		b.WriteString(w)
		if wi := seg.wordAt(i); !wi.plain() {
			// baseRe follows from re.
			b.WriteString(strconv.Itoa(len(wi.re)))
			b.WriteByte(':')
			b.WriteString(wi.re)
			for _, f := range []bool{wi.glob, wi.dyn, wi.split} {
				b.WriteString(strconv.FormatBool(f))
			}
		}
		b.WriteByte(0)
	}
	return b.String()
}

// suspectText names a property of the whole line that the parsers may not
// see as the shell does, or returns "".
func suspectText(cmd string) string {
	switch {
	case strings.IndexByte(cmd, 0) >= 0:
		return "NUL byte"
	case !utf8.ValidString(cmd):
		return "invalid UTF-8"
	case strings.HasPrefix(cmd, "-") || strings.HasPrefix(cmd, "+"):
		// `sh -c -x` reads the line as options, not as commands.
		return "starts with - or +, which sh reads as an option"
	case strings.IndexByte(cmd, '\r') >= 0:
		// The parser takes a carriage return for a blank or drops it
		// before a newline; sh keeps it in the word.
		return "carriage return"
	}
	return ""
}

// parseSegments parses cmd in one dialect and returns its segments.
func parseSegments(cmd string, lang syntax.LangVariant) ([]Segment, error) {
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return nil, err
	}
	s := splitter{src: cmd}
	for _, st := range f.Stmts {
		s.stmt(st, false)
	}
	return s.out, nil
}

// sameSegments reports whether two parses found the same commands.
func sameSegments(a, b []Segment) bool {
	return slices.EqualFunc(a, b, sameSegment)
}

func sameSegment(a, b Segment) bool {
	return a.Text == b.Text && a.Complex == b.Complex && a.Nested == b.Nested && a.unparsed == b.unparsed &&
		slices.Equal(a.Words, b.Words) && slices.Equal(a.info, b.info)
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
		var info []wordInfo
		for i, w := range c.Args {
			lit, wi, reason := s.word(w)
			if reason != "" {
				mark(reason)
			}
			if !wi.plain() {
				if info == nil {
					info = make([]wordInfo, len(c.Args))
				}
				info[i] = wi
			}
			words = append(words, lit)
		}
		s.out[idx].Words = words
		s.out[idx].info = info
		if !s.out[idx].Complex {
			if r := commandRisk(s.out[idx].Words); r != "" {
				mark(r)
			}
		}
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

// wordBuilder accumulates a word's value after quote removal and the
// regular expressions of what the shell may turn it into.
type wordBuilder struct {
	val      strings.Builder
	re, base strings.Builder
	info     wordInfo
	reason   string
}

func (b *wordBuilder) fail(reason string) {
	if b.reason == "" {
		b.reason = reason
	}
}

// lit adds text that the shell keeps as it is.
func (b *wordBuilder) lit(s string) {
	b.val.WriteString(s)
	if b.info.plain() {
		return // the expressions are made from val when needed
	}
	b.litRe(s)
}

// litRe adds literal text to the regular expressions.
func (b *wordBuilder) litRe(s string) {
	for s != "" {
		i := strings.IndexByte(s, '/')
		if i < 0 {
			b.re.WriteString(regexp.QuoteMeta(s))
			b.base.WriteString(regexp.QuoteMeta(s))
			return
		}
		b.re.WriteString(regexp.QuoteMeta(s[:i+1]))
		b.base.Reset()
		s = s[i+1:]
	}
}

// special starts the regular expressions of a word that the shell may
// change, from the plain text seen so far.
func (b *wordBuilder) special() {
	if b.info.plain() {
		b.litRe(b.val.String())
	}
}

// pattern adds unquoted pattern characters (text) that match what the
// regular expression frag matches, within one path component.
func (b *wordBuilder) pattern(text, frag string) {
	b.special()
	b.val.WriteString(text)
	b.re.WriteString(frag)
	b.base.WriteString(frag)
	b.info.glob = true
}

// unknown adds an expansion of unknown value (shown as text); split says
// whether the shell splits its value into words.
func (b *wordBuilder) unknown(text string, split bool) {
	b.special()
	b.val.WriteString(text)
	b.re.WriteString(".*")
	b.base.Reset()
	b.base.WriteString(".*")
	b.info.dyn = true
	b.info.split = b.info.split || split
}

func (b *wordBuilder) result() wordInfo {
	wi := b.info
	if !wi.plain() {
		wi.re = "^(?s:" + b.re.String() + ")$"
		wi.baseRe = "^(?s:" + b.base.String() + ")$"
	}
	return wi
}

// word returns the value of a word after quote removal, what the shell may
// turn it into, and, when it cannot be evaluated statically, its source
// text and the reason.
func (s *splitter) word(w *syntax.Word) (string, wordInfo, string) {
	var b wordBuilder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				// ~ and ~user expand to a home directory.
				b.fail("tilde expansion")
				end := strings.IndexByte(v, '/')
				if end < 0 {
					end = len(v)
				}
				b.unknown(v[:end], false)
				v = v[end:]
			}
			if dollarQuote(w.Parts, i) {
				b.fail("$'…' or $\"…\" quoting, which sh and bash read differently")
			}
			b.unquoted(v, w.Parts[i+1:])
		case *syntax.SglQuoted:
			if !p.Dollar {
				b.lit(p.Value)
				continue
			}
			// bash decodes $'…' escapes; sh reads a $ and a quoted string.
			b.fail("ANSI-C quoting $'…', which sh and bash read differently")
			v, err := decodeANSIC(p.Value)
			if err != nil {
				b.unknown(v, false)
				continue
			}
			b.lit(v)
		case *syntax.DblQuoted:
			if p.Dollar {
				b.fail("$\"…\" quoting, which sh and bash read differently")
			}
			for _, inner := range p.Parts {
				switch q := inner.(type) {
				case *syntax.Lit:
					b.lit(unescapeDouble(q.Value))
				case *syntax.ParamExp:
					b.fail(partReason(inner))
					// "$@" and "${a[@]}" become several words, or none.
					b.unknown(s.text(q.Pos(), q.End()), q.Param != nil && q.Param.Value == "@" || q.Index != nil || q.Names != 0)
				default:
					b.fail(partReason(inner))
					b.unknown(s.text(inner.Pos(), inner.End()), false)
				}
			}
		default:
			b.fail(partReason(part))
			b.unknown(s.text(part.Pos(), part.End()), true)
			if _, ok := part.(*syntax.ExtGlob); ok {
				b.info.glob = true
			}
		}
	}
	// Brace expansion turns one word into several: {rm,-rf,/}.
	probe := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
	if syntax.SplitBraces(probe) && slices.ContainsFunc(probe.Parts, func(p syntax.WordPart) bool {
		_, ok := p.(*syntax.BraceExp)
		return ok
	}) {
		b.fail("brace expansion")
		b.unknown("", true)
	}
	wi := b.result()
	if wi.dyn {
		return s.text(w.Pos(), w.End()), wi, b.reason
	}
	// A word that only the other dialect reads differently keeps its
	// value in this one: rules see both readings.
	return b.val.String(), wi, b.reason
}

// decodeANSIC decodes the body of a $'…' string as bash does.
func decodeANSIC(raw string) (string, error) {
	// A config of its own: the package's default one is shared and
	// written to on every call.
	return expand.Literal(&expand.Config{}, &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Dollar: true, Value: raw}}})
}

// dollarQuote reports whether part i is a literal ending in an unescaped $
// that a quoted part follows: `$'…'` or `$"…"` as POSIX sh reads it.
func dollarQuote(parts []syntax.WordPart, i int) bool {
	lit, ok := parts[i].(*syntax.Lit)
	if !ok || i+1 >= len(parts) || !strings.HasSuffix(lit.Value, "$") {
		return false
	}
	if n := len(lit.Value) - len(strings.TrimRight(lit.Value[:len(lit.Value)-1], `\`)) - 1; n%2 == 1 {
		return false // \$ is a literal dollar sign
	}
	switch parts[i+1].(type) {
	case *syntax.SglQuoted, *syntax.DblQuoted:
		return true
	}
	return false
}

// unquoted adds the text of an unquoted literal: backslashes quote the
// next character (and a backslash-newline is removed); *, ? and […] are
// pattern characters. rest are the parts that follow in the same word.
func (b *wordBuilder) unquoted(v string, rest []syntax.WordPart) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			if v[i] == '\n' {
				continue
			}
			_, n := utf8.DecodeRuneInString(v[i:])
			b.lit(v[i : i+n])
			i += n - 1
		case c == '*':
			b.pattern("*", `[^/]*`)
		case c == '?':
			b.pattern("?", `[^/]`)
		case c == '[':
			end := bracketEnd(v, i)
			switch {
			case end > 0:
				text := unescapeUnquoted(v[i : end+1])
				if strings.Contains(text, "/") {
					b.lit(text)
				} else {
					b.pattern(text, `(?:[^/]|`+regexp.QuoteMeta(text)+`)`)
				}
				i = end
			case slices.ContainsFunc(rest, func(p syntax.WordPart) bool {
				l, ok := p.(*syntax.Lit)
				return ok && strings.Contains(l.Value, "]")
			}):
				// A bracket that spans quoted text: match anything.
				b.unknown("[", false)
				b.info.glob = true
			default:
				b.lit("[")
			}
		case c == '~' && i > 0 && (v[i-1] == '=' || v[i-1] == ':'):
			// bash expands ~ after = or : in words that look like
			// assignments.
			b.fail("tilde expansion")
			end := i + 1
			for end < len(v) && v[end] != '/' && v[end] != ':' {
				end++
			}
			b.unknown(v[i:end], false)
			i = end - 1
		default:
			_, n := utf8.DecodeRuneInString(v[i:])
			b.lit(v[i : i+n])
			i += n - 1
		}
	}
}

// bracketEnd returns the index of the ] that closes the bracket expression
// opening at v[i], or -1.
func bracketEnd(v string, i int) int {
	j := i + 1
	if j < len(v) && (v[j] == '!' || v[j] == '^') {
		j++
	}
	if j < len(v) && v[j] == ']' {
		j++
	}
	for ; j < len(v); j++ {
		switch v[j] {
		case '\\':
			j++
		case ']':
			return j
		}
	}
	return -1
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

// partReason names the expansion that makes a word complex.
func partReason(p syntax.WordPart) string { return nodeReason(p, "expansion") }

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

// commandReason names the compound command that makes a line complex.
func commandReason(c syntax.Command) string { return nodeReason(c, "compound command") }

// nodeReason names the kind of an expansion or a compound command, or
// returns other.
func nodeReason(n syntax.Node, other string) string {
	switch n.(type) {
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
		return other
	}
}
