package tui

import (
	"fmt"
	"slices"
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
	// folded are the lines a fold marker stands for (ctrl+o shows them).
	folded []line
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
	// unseen counts the lines added while the view was scrolled back.
	unseen int
	// dropped counts the lines dropped from the top, so that a position
	// taken earlier (abs) stays valid.
	dropped int
	mask    func(string) string
}

// Folding of long output.
const (
	// foldOver is how many lines an operation's output must exceed to
	// fold when it ends; foldKeep is how many of its last lines stay.
	foldOver = 1000
	foldKeep = 200
)

// abs is the position of the next line, counting dropped lines.
func (sb *scrollback) abs() int { return sb.dropped + len(sb.lines) }

// fold replaces the lines from position from (an abs) up to the last
// foldKeep with one marker line, when there are more than foldOver.
func (sb *scrollback) fold(from int) {
	first := from - sb.dropped
	end := len(sb.lines) - foldKeep
	if first < 0 || len(sb.lines)-first <= foldOver {
		return
	}
	hidden := slices.Clone(sb.lines[first:end])
	marker := line{text: fmt.Sprintf("… %s more lines, ctrl+o to expand", groupDigits(len(hidden))), kind: kindInfo, folded: hidden}
	sb.lines = slices.Replace(sb.lines, first, end, marker)
	sb.shiftOpen(first, 1-len(hidden))
	sb.offset = max(0, min(sb.offset, len(sb.lines)-1))
}

// unfold shows the lines of the last fold again; it reports false when
// there is none.
func (sb *scrollback) unfold() bool {
	for i := len(sb.lines) - 1; i >= 0; i-- {
		if f := sb.lines[i].folded; f != nil {
			sb.lines = slices.Replace(sb.lines, i, i+1, f...)
			sb.shiftOpen(i, len(f)-1)
			return true
		}
	}
	return false
}

// shiftOpen moves the open lines after index at by n.
func (sb *scrollback) shiftOpen(at, n int) {
	for k, i := range sb.open {
		if i > at {
			sb.open[k] = i + n
		}
	}
}

// plural is "1 line" or "2 lines".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// groupDigits writes n with thousands separators: 99,800.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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
		sb.dropped += drop
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
		sb.unseen++
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

// follow shows the newest lines again.
func (sb *scrollback) follow() { sb.offset, sb.unseen = 0, 0 }

// scroll moves the view by n lines (positive: back in time).
func (sb *scrollback) scroll(n int) {
	sb.offset = max(0, min(sb.offset+n, len(sb.lines)-1))
	if sb.offset == 0 {
		sb.unseen = 0
	}
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
	if sb.offset > 0 {
		// Scrolled back: the last row says what is below.
		note := "── scrolled: " + plural(sb.offset, "line") + " below"
		if sb.unseen > 0 {
			note = "── scrolled: " + plural(sb.unseen, "new line") + " below"
		}
		rows[len(rows)-1] = st.Warn.Render(ansi.Truncate(note+" (end follows) ──", width, "…"))
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
	// At spaces where it can: a word is cut only when longer than a row.
	return strings.Split(ansi.Wrap(s, width, ""), "\n")
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
