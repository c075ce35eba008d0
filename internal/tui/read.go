package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/output"
)

// Limits of what /read shows and what the editor loads.
const (
	// readPageLines and readPageBytes bound one page of /read.
	readPageLines = 500
	readPageBytes = 1 << 20
	// sniffBytes is how much of a file is looked at to tell text from
	// binary content.
	sniffBytes = 8 << 10
	// maxEditBytes bounds the files /write and /edit open in the editor.
	maxEditBytes = 4 << 20
)

// errStopped ends a read early: the page is full, the content is binary,
// or the file is too large for the editor.
var errStopped = errors.New("stopped reading")

// capped collects at most limit bytes, then stops the read.
type capped struct {
	w     io.Writer
	limit int
	n     int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.n+len(p) > c.limit {
		return 0, errStopped
	}
	c.n += len(p)
	return c.w.Write(p)
}

// loadFile reads a whole file for the editor, refusing one larger than
// maxEditBytes; large tells what to use instead.
func loadFile(ctx context.Context, s *engine.Session, p, large string) (string, error) {
	var b strings.Builder
	err := s.Read(ctx, p, &capped{w: &b, limit: maxEditBytes})
	if errors.Is(err, errStopped) {
		return "", fmt.Errorf("the file is larger than %s: %s", output.Bytes(maxEditBytes), large)
	}
	return b.String(), err
}

// pager shows one page of a text file, from line from on, and stops the
// read once the page is full; binary content is not shown at all.
type pager struct {
	w        io.Writer
	from     int // first line shown, from 1
	line     int // the line being read, from 1
	shown    int // lines shown
	bytes    int // bytes shown
	sniffing bool
	sniff    []byte
	binary   bool
	full     bool
}

func newPager(w io.Writer, from int) *pager {
	return &pager{w: w, from: from, line: 1, sniffing: true}
}

func (p *pager) Write(b []byte) (int, error) {
	if p.sniffing {
		p.sniff = append(p.sniff, b...)
		if len(p.sniff) < sniffBytes {
			return len(b), nil
		}
		if err := p.flush(); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if err := p.page(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// flush decides text or binary on what was collected and shows it; the
// reader calls it once more at the end of a file shorter than the sample.
func (p *pager) flush() error {
	data := p.sniff
	p.sniffing, p.sniff = false, nil
	if looksBinary(data) {
		p.binary = true
		return errStopped
	}
	return p.page(data)
}

// page shows the lines of b that belong to the page.
func (p *pager) page(b []byte) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i+1]
		}
		b = b[len(chunk):]
		if p.line >= p.from {
			if p.shown >= readPageLines || p.bytes+len(chunk) > readPageBytes {
				p.full = true
				return errStopped
			}
			if _, err := p.w.Write(chunk); err != nil {
				return err
			}
			p.bytes += len(chunk)
		}
		if i >= 0 {
			if p.line >= p.from {
				p.shown++
			}
			p.line++
		}
	}
	return nil
}

// looksBinary reports whether the start of a file holds a NUL byte or is
// not UTF-8 (a rune cut at the end of the sample is not held against it).
func looksBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	for cut := 0; cut < utf8.UTFMax && cut <= len(b); cut++ {
		if utf8.Valid(b[:len(b)-cut]) {
			return false
		}
	}
	return true
}

// readPage is /read PATH [LINE]: one page of a text file into the
// scrollback, or a summary of binary content.
func (m *model) readPage(ctx context.Context, s *engine.Session, id int, p string, from int) opResult {
	pg := newPager(m.bridge.writer(id, streamStdout), from)
	err := s.Read(ctx, p, pg)
	if err == nil && pg.sniffing {
		err = pg.flush()
	}
	switch {
	case err != nil && !errors.Is(err, errStopped):
		return opResult{err: err}
	case pg.binary:
		return opResult{summary: fmt.Sprintf("%s is binary (a NUL byte or no UTF-8 in its first %s): not shown; /download %s LOCAL copies it to the host", p, output.Bytes(sniffBytes), p)}
	case pg.full:
		return opResult{summary: fmt.Sprintf("showed lines %d–%d of %s; /read %s %d shows the next page, /download copies the whole file", from, from+pg.shown-1, p, p, from+pg.shown)}
	case pg.shown == 0 && pg.bytes == 0 && from > 1:
		return opResult{summary: fmt.Sprintf("%s has only %d lines", p, pg.line-1)}
	}
	return opResult{}
}
