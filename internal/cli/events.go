package cli

import (
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/output"
)

// eventWriter prints --json events as JSON Lines on stdout, masked.
type eventWriter struct {
	w     interface{ Write([]byte) (int, error) }
	mask  func(string) string
	lines *output.Lines
}

func (e *eventWriter) write(v any) {
	if e.lines == nil {
		e.lines = output.NewLines(e.w, e.mask)
	}
	e.lines.Write(v)
}

func (e *eventWriter) engineEvent(ev engine.Event) { e.write(ev) }
