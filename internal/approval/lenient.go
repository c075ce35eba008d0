package approval

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// lexMode says how the lenient lexer removes quotes.
type lexMode int

const (
	// lexBash decodes $'…' escapes, as bash does.
	lexBash lexMode = iota
	// lexPOSIX reads $'…' as a dollar sign and a quoted string, as sh does.
	lexPOSIX
	// lexStrip drops every quote character and backslash first, so that
	// operators inside quotes split the text too.
	lexStrip
)

// lenientSplit cuts text that a parser rejected into pieces on every
// operator character and removes quotes from their words in each way a
// shell could (see lexMode). The pieces are complex and marked unparsed,
// so that a deny rule matches one when its command word appears anywhere
// in it.
func lenientSplit(cmd, reason string) []Segment {
	var out []Segment
	seen := map[string]bool{}
	for _, mode := range []lexMode{lexBash, lexPOSIX, lexStrip} {
		for _, seg := range lenientPieces(cmd, mode, true) {
			seg.Complex, seg.Reason, seg.unparsed = true, reason, true
			if k := seg.key(); !seen[k] {
				seen[k] = true
				out = append(out, seg)
			}
		}
	}
	return out
}

// lenientWords splits text into words the way sh would if it had no
// operators (e.g. the string of `env -S`), with quotes removed.
func lenientWords(s string) cmdWords {
	var c cmdWords
	for _, seg := range lenientPieces(s, lexPOSIX, false) {
		c = c.appendWords(seg.Words, seg.info)
	}
	return c
}

// lenientPieces lexes src without ever failing: unterminated quotes run to
// the end, and with operators set every operator character ends a piece.
func lenientPieces(src string, mode lexMode, operators bool) []Segment {
	if mode == lexStrip {
		src = strings.Map(func(r rune) rune {
			if r == '\'' || r == '"' || r == '\\' {
				return -1
			}
			return r
		}, src)
	}
	l := lexer{src: src, start: -1}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t':
			l.endWord()
			i++
		case operators && strings.IndexByte(";&|\n()`", c) >= 0:
			l.endPiece(i)
			i++
		case !operators && c == '\n':
			l.endWord()
			i++
		case operators && (c == '<' || c == '>'):
			l.endWord()
			i++
		case c == '\\':
			if i+1 < len(src) && src[i+1] == '\n' {
				i += 2
				continue
			}
			if i+1 >= len(src) {
				l.word(i).lit(`\`)
				i++
				continue
			}
			_, n := utf8.DecodeRuneInString(src[i+1:])
			l.word(i).lit(src[i+1 : i+1+n])
			i += 1 + n
		case c == '\'':
			end := strings.IndexByte(src[i+1:], '\'')
			if end < 0 {
				end = len(src) - i - 1
			}
			l.word(i).lit(src[i+1 : i+1+end])
			i += end + 2
		case c == '"':
			i = l.double(i)
		case c == '$':
			i = l.dollar(i, mode, false)
		case c == '*':
			l.word(i).pattern("*", `[^/]*`)
			i++
		case c == '?':
			l.word(i).pattern("?", `[^/]`)
			i++
		case c == '[':
			end := bracketEnd(src, i)
			if end < 0 || strings.ContainsAny(src[i:end], " \t\n;&|()<>`'\"\\/") {
				l.word(i).lit("[")
				i++
				continue
			}
			l.word(i).pattern(src[i:end+1], `(?:[^/]|`+regexp.QuoteMeta(src[i:end+1])+`)`)
			i = end + 1
		default:
			_, n := utf8.DecodeRuneInString(src[i:])
			l.word(i).lit(src[i : i+n])
			i += n
		}
	}
	l.endPiece(len(src))
	return l.pieces
}

type lexer struct {
	src    string
	start  int // offset where the current piece starts, or -1
	cur    *wordBuilder
	words  []string
	info   []wordInfo
	pieces []Segment
}

// word returns the word being built, starting one at offset i if needed.
func (l *lexer) word(i int) *wordBuilder {
	if l.start < 0 {
		l.start = i
	}
	if l.cur == nil {
		l.cur = &wordBuilder{}
	}
	return l.cur
}

func (l *lexer) endWord() {
	if l.cur == nil {
		return
	}
	wi := l.cur.result()
	if !wi.plain() && l.info == nil {
		l.info = make([]wordInfo, len(l.words))
	}
	if l.info != nil {
		l.info = append(l.info, wi)
	}
	l.words = append(l.words, l.cur.val.String())
	l.cur = nil
}

func (l *lexer) endPiece(at int) {
	l.endWord()
	if len(l.words) > 0 {
		l.pieces = append(l.pieces, Segment{Text: strings.TrimSpace(l.src[l.start:at]), Words: l.words, info: l.info})
	}
	l.words, l.info, l.start = nil, nil, -1
}

// double reads a double-quoted string opening at src[i] and returns the
// offset after it.
func (l *lexer) double(i int) int {
	src := l.src
	b := l.word(i)
	j := i + 1
	for j < len(src) && src[j] != '"' {
		switch {
		case src[j] == '\\' && j+1 < len(src) && strings.IndexByte("$`\"\\\n", src[j+1]) >= 0:
			if src[j+1] != '\n' {
				b.lit(src[j+1 : j+2])
			}
			j += 2
		case src[j] == '$':
			j = l.dollar(j, lexPOSIX, true)
		case src[j] == '`':
			b.unknown("`", false)
			j++
		default:
			_, n := utf8.DecodeRuneInString(src[j:])
			b.lit(src[j : j+n])
			j += n
		}
	}
	return j + 1
}

// dollar reads what follows a $ at src[i] and returns the offset after it.
func (l *lexer) dollar(i int, mode lexMode, quoted bool) int {
	src := l.src
	b := l.word(i)
	if i+1 >= len(src) {
		b.lit("$")
		return i + 1
	}
	switch n := src[i+1]; {
	case n == '\'' && mode == lexBash && !quoted:
		j := i + 2
		for j < len(src) && src[j] != '\'' {
			if src[j] == '\\' {
				j++
			}
			j++
		}
		j = min(j, len(src))
		raw := src[i+2 : j]
		v, err := decodeANSIC(raw)
		if err != nil {
			b.unknown(raw, false)
		} else {
			b.lit(v)
		}
		return j + 1
	case n == '"' && mode == lexBash && !quoted:
		// bash reads $"…" as "…".
		return i + 1
	case n == '{':
		end := strings.IndexByte(src[i:], '}')
		if end < 0 {
			end = len(src) - i - 1
		}
		b.unknown(src[i:i+end+1], !quoted)
		return i + end + 1
	case n == '(':
		b.unknown("$", !quoted)
		return i + 1
	case n == '_' || n >= 'a' && n <= 'z' || n >= 'A' && n <= 'Z':
		j := i + 1
		for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
			j++
		}
		b.unknown(src[i:j], !quoted)
		return j
	case n >= '0' && n <= '9' || strings.IndexByte("@*#?$!-", n) >= 0:
		b.unknown(src[i:i+2], !quoted)
		return i + 2
	}
	b.lit("$")
	return i + 1
}
