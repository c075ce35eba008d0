package events

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/agentbox/sandbox/internal/output"
)

// CurrentCall holds the id of the call being made, for labelling its
// output: pass Set as the call observer (approval.WithCallObserver). It is
// safe for concurrent use; the zero value holds no id.
type CurrentCall struct {
	mu sync.Mutex
	id string
}

// Set records id as the current call.
func (c *CurrentCall) Set(id string) {
	c.mu.Lock()
	c.id = id
	c.mu.Unlock()
}

// ID returns the current call's id.
func (c *CurrentCall) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// OutputOptions configure an OutputWriter.
type OutputOptions struct {
	// Stream is "stdout" or "stderr".
	Stream string
	// CallID returns the id of the call the output belongs to, asked at
	// each chunk.
	CallID func() string
	// Emit receives the call.output events.
	Emit func(Event)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaskWriter, when set, wraps the writer so that secrets are masked
	// in the raw bytes before they are encoded, also when one is split
	// across writes; its Close flushes what it held back.
	MaskWriter func(io.Writer) io.WriteCloser
}

// OutputWriter returns the writer of one stream of a call's output: what
// is written becomes call.output events, masked first, in chunks that do
// not split a UTF-8 character (output.Chunks). Close flushes what the
// masking and the chunking held back, in that order.
func OutputWriter(o OutputOptions) io.WriteCloser {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	chunks := output.Chunks(func(p []byte) {
		text, b64 := output.TextOrBase64(p)
		o.Emit(Event{Type: CallOutput, Time: now(), CallID: o.CallID(), Stream: o.Stream, Data: text, DataB64: b64})
	})
	if o.MaskWriter == nil {
		return chunks
	}
	return &flushChain{WriteCloser: o.MaskWriter(chunks), next: chunks}
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
