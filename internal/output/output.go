// Package output prints data for people (aligned tables) and for programs
// (JSON documents and JSON Lines events). Everything here writes to the
// writer it is given; data goes to stdout, progress and errors to stderr.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
)

// JSON writes v as one indented JSON document.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// Table writes rows under a header, columns aligned with spaces.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
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

// NewLines returns a JSON Lines writer; mask (may be nil) is applied to each
// encoded line so secret values never reach the output.
func NewLines(w io.Writer, mask func(string) string) *Lines {
	return &Lines{w: w, mask: mask}
}

// Write encodes v as one line.
func (l *Lines) Write(v any) error {
	b, err := json.Marshal(v)
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
