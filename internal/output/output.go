// Package output prints data for people (aligned tables) and for programs
// (JSON documents and JSON Lines events). Everything here writes to the
// writer it is given; data goes to stdout, progress and errors to stderr.
//
// Text for people is escaped with Escape, so that what a sandbox named or
// printed cannot drive the terminal; JSON is encoded without HTML escaping
// and with every character that Escape would escape written as a \u
// escape, so that the same holds for a person reading it.
package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON writes v as one indented JSON document.
func JSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	if _, err := w.Write(escapeJSON(b.Bytes())); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// Appender is a value that writes its own JSON: compact, without HTML
// escaping, byte for byte what encoding/json makes of it (events.Event).
// ok false leaves it to encoding/json.
type Appender interface {
	AppendJSON(b []byte) (_ []byte, ok bool)
}

// Marshal encodes v as one compact line of JSON, without a newline: no
// HTML escaping (so "<", ">" and "&" stay as they are), and control,
// invisible and bidirectional characters as \u escapes (see Escape). An
// Appender writes itself: through encoding/json, the checks and copies an
// encoder makes of a Marshaler's output cost a CLI call more than its
// writing did.
func Marshal(v any) ([]byte, error) {
	if a, ok := v.(Appender); ok {
		if b, ok := a.AppendJSON(make([]byte, 0, 512)); ok {
			return escapeJSON(b), nil
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return escapeJSON(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// escapeJSON rewrites, in encoded JSON, DEL and every non-ASCII character
// that Escape escapes as a \u escape (a surrogate pair above U+FFFF). In
// JSON such characters can only occur inside strings, where the escape
// decodes to the same character.
func escapeJSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf && b[i] != 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == 0x7f || (r >= utf8.RuneSelf && !(r == utf8.RuneError && n == 1) && mustEscape(r)):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// Table writes rows under a header, columns aligned with spaces. Cells are
// escaped with Escape, so a tab or an escape sequence in a cell can neither
// break the columns nor reach the terminal.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = Escape(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Lines writes JSON Lines: one compact JSON value per line, each with a
// single Write so concurrent writers never interleave within a line.
type Lines struct {
	mu   sync.Mutex
	w    io.Writer
	mask func(string) string
}

// NewLines returns a JSON Lines writer. Values are encoded with Marshal.
// Callers mask secrets in the raw values before they are encoded (a
// stream's bytes with a masking writer, so that a secret split across
// writes is caught too); mask (may be nil) is a second line of defence,
// applied to each encoded line, and must therefore also catch a secret in
// its JSON-encoded form.
func NewLines(w io.Writer, mask func(string) string) *Lines {
	return &Lines{w: w, mask: mask}
}

// Write encodes v as one line.
func (l *Lines) Write(v any) error {
	b, err := Marshal(v)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	line := string(b)
	if l.mask != nil {
		line = l.mask(line)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = io.WriteString(l.w, line+"\n")
	return err
}

// Bytes formats a size for people: 512 B, 1.5 KiB, 3.2 GiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
