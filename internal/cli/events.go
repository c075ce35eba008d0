package cli

import (
	"errors"
	"io"

	"github.com/agentbox/sandbox/internal/output"
)

// outputEvent is a chunk of a command's output in --json mode.
type outputEvent struct {
	Type   string `json:"type"` // "output"
	Stream string `json:"stream"`
	// Data is the chunk as text. When the chunk is not valid UTF-8, each
	// invalid byte is U+FFFD here and DataB64 holds the exact bytes.
	Data    string `json:"data"`
	DataB64 string `json:"data_b64,omitempty"`
}

// resultEvent ends an exec in --json mode.
type resultEvent struct {
	Type       string `json:"type"` // "result"
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
}

// jsonOutput returns the writer of one output stream ("stdout" or
// "stderr") of a command in --json mode. Secrets are masked in the raw
// bytes, before they are encoded, by a masking writer of this stream's own
// that holds back a possible start of a secret until the next write, so a
// secret split across two writes is masked too; a UTF-8 character split
// across writes is held back likewise. Close flushes both, in that order.
func (a *App) jsonOutput(stream string) io.WriteCloser {
	events := output.Chunks(func(p []byte) {
		text, b64 := output.TextOrBase64(p)
		a.events.Write(outputEvent{Type: "output", Stream: stream, Data: text, DataB64: b64})
	})
	return &flushChain{WriteCloser: a.masker.Writer(events), next: events}
}

// flushChain is a masking writer and the writer after it: Close flushes
// the masking writer into the next one, then closes that.
type flushChain struct {
	io.WriteCloser
	next io.Closer
}

// Close flushes and closes both writers, in order.
func (c *flushChain) Close() error {
	return errors.Join(c.WriteCloser.Close(), c.next.Close())
}
