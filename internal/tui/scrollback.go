package tui

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// Limits of the scrollback.
const (
	// maxLines is how many lines are kept; the oldest tenth is dropped
	// when it is reached.
	maxLines = 1 << 21
	// maxLineBytes cuts single lines longer than this.
	maxLineBytes = 16 << 10
	tabWidth     = 8
)

// lineKind picks a line's style.
type lineKind uint8

const (
	kindStdout lineKind = iota
	kindStderr
	kindInfo
	kindOp
	kindSetup
	kindError
	kindOK
	kindDiffAdd
	kindDiffDel
	kindDiffHunk
)

type line struct {
	text string
	kind lineKind
}

// streamKey names an open (unterminated) line.
type streamKey struct {
	op int
	s  stream
}

// scrollback is the log of operations and their output. It keeps lines
// unwrapped and renders only what is visible, so its cost per frame does
// not grow with its length.
type scrollback struct {
	lines []line
	// open maps a stream to the index of its unterminated last line.
	open map[streamKey]int
	// offset is how many lines from the bottom the view is scrolled; 0
	// follows new output.
	offset int
	mask   func(string) string
}

func newScrollback(mask func(string) string) *scrollback {
	if mask == nil {
		mask = func(s string) string { return s }
	}
	return &scrollback{open: map[streamKey]int{}, mask: mask}
}

// add appends whole lines of one kind.
func (sb *scrollback) add(kind lineKind, text string) {
	for l := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		sb.push(line{text: sb.mask(sanitize(l)), kind: kind})
	}
}

func (sb *scrollback) push(l line) {
	if len(sb.lines) >= maxLines {
		drop := maxLines / 10
		sb.lines = append(sb.lines[:0], sb.lines[drop:]...)
		for k, i := range sb.open {
			if i < drop {
				delete(sb.open, k)
			} else {
				sb.open[k] = i - drop
			}
		}
	}
	sb.lines = append(sb.lines, l)
	if sb.offset > 0 {
		sb.offset++ // keep the view where the reader left it
	}
}

// write appends streamed text: it continues the stream's open line and
// leaves the last line open when data does not end in a newline.
func (sb *scrollback) write(op int, s stream, kind lineKind, data string) {
	k := streamKey{op, s}
	for data != "" {
		chunk, rest, nl := strings.Cut(data, "\n")
		data = rest
		if i, ok := sb.open[k]; ok && i < len(sb.lines) {
			// Sanitizing again is harmless to the clean start and gets tab
			// stops and carriage returns right across chunks.
			raw := sb.lines[i].text + chunk
			if len(raw) > maxLineBytes {
				raw = raw[:maxLineBytes]
			}
			sb.lines[i].text = sb.mask(sanitize(raw))
		} else {
			sb.push(line{text: sb.mask(sanitize(chunk)), kind: kind})
			sb.open[k] = len(sb.lines) - 1
		}
		if nl {
			delete(sb.open, k)
		}
	}
}

// closeStream ends a stream's open line.
func (sb *scrollback) closeStream(op int, s stream) { delete(sb.open, streamKey{op, s}) }

// scroll moves the view by n lines (positive: back in time).
func (sb *scrollback) scroll(n int) {
	sb.offset = max(0, min(sb.offset+n, len(sb.lines)-1))
}

// render returns exactly height rows of at most width cells: the lines
// ending offset lines above the last one, wrapped, styled with st.
func (sb *scrollback) render(width, height int, st *Styles) []string {
	rows := make([]string, 0, height)
	if width < 1 || height < 1 {
		return rows
	}
	// Walk back from the last visible line, wrapping, until the screen is
	// full: the work is bounded by height, not by the number of lines.
	var rev []string
	for i := len(sb.lines) - 1 - sb.offset; i >= 0 && len(rev) < height; i-- {
		l := sb.lines[i]
		parts := wrap(l.text, width)
		style := st.lineStyle(l.kind)
		for j := len(parts) - 1; j >= 0 && len(rev) < height; j-- {
			rev = append(rev, style.Render(parts[j]))
		}
	}
	for i := height - len(rev); i > 0; i-- {
		rows = append(rows, "")
	}
	for i := len(rev) - 1; i >= 0; i-- {
		rows = append(rows, rev[i])
	}
	return rows
}

func (st *Styles) lineStyle(k lineKind) lipgloss.Style {
	switch k {
	case kindStderr:
		return st.Stderr
	case kindInfo:
		return st.Info
	case kindOp:
		return st.Op
	case kindSetup:
		return st.Setup
	case kindError:
		return st.Error
	case kindOK:
		return st.OK
	case kindDiffAdd:
		return st.DiffAdd
	case kindDiffDel:
		return st.DiffDel
	case kindDiffHunk:
		return st.DiffHunk
	}
	return st.Stdout
}

// wrap cuts s (already sanitized: no control characters) into rows of at
// most width cells.
func wrap(s string, width int) []string {
	if len(s) <= width && isASCII(s) {
		return []string{s}
	}
	if ansi.StringWidth(s) <= width {
		return []string{s}
	}
	return strings.Split(ansi.Hardwrap(s, width, true), "\n")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sanitize makes output safe to draw: escape sequences are removed, a
// carriage return keeps what follows it (progress lines redraw), tabs
// expand, and other control characters are shown escaped, so a program's
// output cannot move the cursor or disguise itself.
func sanitize(s string) string {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		return s
	}
	if strings.IndexByte(s, 0x1b) >= 0 || strings.ContainsRune(s, 0x9b) {
		s = ansi.Strip(s)
	}
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:]
	}
	var b strings.Builder
	col := 0
	for _, r := range s {
		switch {
		case r == '\t':
			n := tabWidth - col%tabWidth
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case r == '\r':
		case r == utf8.RuneError || unicode.IsPrint(r):
			b.WriteRune(r)
			col++
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			col += len(q) - 2
		}
	}
	return b.String()
}
