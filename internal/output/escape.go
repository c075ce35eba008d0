package output

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every character that a terminal would not draw as
// itself replaced by a visible escape, so that text from a sandbox or an
// approval request can neither drive the terminal nor disguise itself:
//
//   - control characters (C0, DEL and C1), including \t, \n and \r, as
//     \t, \n, \r, \a, \b, \f, \v, or \xNN and \u0080…\u009f;
//   - bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
//     U+061C), zero-width and other invisible characters (U+200B–U+200D,
//     U+2060, U+FEFF, U+00AD, tag characters, variation selectors, fillers),
//     spaces other than U+0020, and every other non-printing character,
//     as \uXXXX or \UXXXXXXXX;
//   - bytes that are not UTF-8, as \xNN.
//
// Everything else, a backslash included, is kept as it is, and the result
// holds no character that Escape would change again. Escape is the one
// escaping function of every place that shows such text: the approval
// dialog, the line prompt, and plain-text listings. Hidden names what it
// escaped, for a warning.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
			break
		}
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else if e, ok := escapeRune(r); ok {
			b.WriteString(e)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// EscapeText is Escape for multi-line text shown as text, such as a diff:
// it keeps newlines and tabs as layout and escapes everything else as
// Escape does. It is never for approval requests, whose tabs and newlines
// Escape shows.
func EscapeText(s string) string {
	if Escape(s) == s {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = EscapeLine(l)
	}
	return strings.Join(lines, "\n")
}

// EscapeLine is Escape for one line of a listing, such as a line grep
// found: it keeps tabs, which a terminal only moves over, and escapes
// everything else, a newline included, as Escape does.
func EscapeLine(s string) string {
	if !strings.Contains(s, "\t") {
		return Escape(s)
	}
	cells := strings.Split(s, "\t")
	for i, c := range cells {
		cells[i] = Escape(c)
	}
	return strings.Join(cells, "\t")
}

// escapeRune returns the escape of a rune that must not be drawn as
// itself.
func escapeRune(r rune) (string, bool) {
	switch r {
	case '\a':
		return `\a`, true
	case '\b':
		return `\b`, true
	case '\f':
		return `\f`, true
	case '\n':
		return `\n`, true
	case '\r':
		return `\r`, true
	case '\t':
		return `\t`, true
	case '\v':
		return `\v`, true
	}
	switch {
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r), true
	case r < utf8.RuneSelf:
		return "", false
	case mustEscape(r) && r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r), true
	case mustEscape(r):
		return fmt.Sprintf(`\U%08x`, r), true
	}
	return "", false
}

// mustEscape reports whether a non-ASCII rune is escaped: a C1 control, a
// character that does not print, or one that prints as nothing.
func mustEscape(r rune) bool {
	if r == utf8.RuneError {
		return false // a real U+FFFD shows as itself
	}
	return (r >= 0x80 && r <= 0x9f) || !unicode.IsPrint(r) || invisible(r)
}

// invisibleRanges are characters that unicode.IsPrint accepts but that
// draw as nothing or only change their neighbours: joiners, fillers,
// variation selectors.
var invisibleRanges = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x034f, Hi: 0x034f, Stride: 1}, // combining grapheme joiner
		{Lo: 0x115f, Hi: 0x1160, Stride: 1}, // hangul choseong/jungseong fillers
		{Lo: 0x17b4, Hi: 0x17b5, Stride: 1}, // khmer inherent vowels
		{Lo: 0x180b, Hi: 0x180f, Stride: 1}, // mongolian variation selectors
		{Lo: 0x2800, Hi: 0x2800, Stride: 1}, // braille pattern blank
		{Lo: 0x3164, Hi: 0x3164, Stride: 1}, // hangul filler
		{Lo: 0xfe00, Hi: 0xfe0f, Stride: 1}, // variation selectors
		{Lo: 0xffa0, Hi: 0xffa0, Stride: 1}, // halfwidth hangul filler
	},
	R32: []unicode.Range32{
		{Lo: 0xe0100, Hi: 0xe01ef, Stride: 1}, // variation selectors supplement
	},
}

func invisible(r rune) bool { return unicode.Is(invisibleRanges, r) }

// runeNames names the characters a warning most often lists.
var runeNames = map[rune]string{
	0x00:   "NUL",
	'\a':   "bell",
	'\b':   "backspace",
	'\f':   "form feed",
	'\r':   "carriage return",
	'\v':   "vertical tab",
	0x1b:   "escape",
	0x7f:   "delete",
	0x85:   "next line",
	0x9b:   "control sequence introducer",
	0x9d:   "operating system command",
	0xa0:   "no-break space",
	0xad:   "soft hyphen",
	0x034f: "combining grapheme joiner",
	0x061c: "arabic letter mark",
	0x200b: "zero-width space",
	0x200c: "zero-width non-joiner",
	0x200d: "zero-width joiner",
	0x200e: "left-to-right mark",
	0x200f: "right-to-left mark",
	0x2028: "line separator",
	0x2029: "paragraph separator",
	0x202a: "left-to-right embedding",
	0x202b: "right-to-left embedding",
	0x202c: "pop directional formatting",
	0x202d: "left-to-right override",
	0x202e: "right-to-left override",
	0x2060: "word joiner",
	0x2066: "left-to-right isolate",
	0x2067: "right-to-left isolate",
	0x2068: "first strong isolate",
	0x2069: "pop directional isolate",
	0x3164: "hangul filler",
	0xfeff: "zero-width no-break space",
}

// describeRune names a character Escape escaped, for Hidden.
func describeRune(r rune) string {
	if n, ok := runeNames[r]; ok {
		return n
	}
	switch {
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return "control character"
	case r >= 0xe0000 && r <= 0xe007f:
		return "tag character"
	case (r >= 0xfe00 && r <= 0xfe0f) || (r >= 0xe0100 && r <= 0xe01ef) || (r >= 0x180b && r <= 0x180f):
		return "variation selector"
	case invisible(r):
		return "invisible character"
	case unicode.Is(unicode.Cf, r):
		return "invisible formatting character"
	case unicode.Is(unicode.Zs, r):
		return "space character"
	case unicode.Is(unicode.Co, r):
		return "private-use character"
	}
	return "non-printing character"
}

// maxHidden bounds how many distinct characters Hidden lists.
const maxHidden = 8

// Hidden lists, once each and in order of first appearance, the
// characters of texts that Escape escapes and a reader would not otherwise
// notice: every one but tab and newline, which show as \t and \n and are
// ordinary in commands and diffs. Each entry is the escape followed by a
// name, e.g. `\u202e (right-to-left override)`; bytes that are not UTF-8
// count as one entry. It returns nil when there are none.
func Hidden(texts ...string) []string {
	var out []string
	seen := map[string]bool{}
	more := 0
	add := func(esc, name string) {
		if seen[esc] {
			return
		}
		seen[esc] = true
		if len(out) == maxHidden {
			more++
			return
		}
		out = append(out, esc+" ("+name+")")
	}
	for _, s := range texts {
		if Escape(s) == s {
			continue
		}
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				add(`\xNN`, "bytes that are not UTF-8")
			case r == '\t' || r == '\n':
			default:
				if e, ok := escapeRune(r); ok {
					add(e, describeRune(r))
				}
			}
			i += n
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}

// HiddenWarning is the warning line an approval shows above a request
// whose texts hold characters Hidden lists: "hidden characters: …, …
// (shown escaped)". It returns "" when there are none.
func HiddenWarning(texts ...string) string {
	h := Hidden(texts...)
	if len(h) == 0 {
		return ""
	}
	return "hidden characters: " + strings.Join(h, ", ") + " (shown escaped)"
}
