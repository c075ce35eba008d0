package output

import (
	"encoding/base64"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// TextOrBase64 returns what a JSON event carries for a chunk of output:
// the chunk as text, and, when it is not valid UTF-8, also its exact bytes
// in standard base64 (the text then has U+FFFD for each invalid byte).
func TextOrBase64(p []byte) (text, b64 string) {
	if utf8.Valid(p) {
		return string(p), ""
	}
	return strings.ToValidUTF8(string(p), "\uFFFD"), base64.StdEncoding.EncodeToString(p)
}

// Chunks returns a writer that hands what is written to emit, one call per
// write, except that a UTF-8 character split across two writes is held
// back until it is complete, so the chunks of a text stream each stay valid
// UTF-8. Close hands over what is still held. emit gets its own copy of
// the bytes. The writer is safe for concurrent use.
func Chunks(emit func(p []byte)) io.WriteCloser {
	return &chunker{emit: emit}
}

type chunker struct {
	mu   sync.Mutex
	emit func([]byte)
	held []byte
}

func (c *chunker) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := make([]byte, 0, len(c.held)+len(p))
	data = append(append(data, c.held...), p...)
	cut := incompleteTail(data)
	c.held = append(c.held[:0], data[cut:]...)
	if cut > 0 {
		c.emit(data[:cut])
	}
	return len(p), nil
}

func (c *chunker) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) > 0 {
		c.emit(append([]byte(nil), c.held...))
		c.held = c.held[:0]
	}
	return nil
}

// incompleteTail returns where a multi-byte UTF-8 character that b ends
// in the middle of starts, or len(b).
func incompleteTail(b []byte) int {
	for j := len(b) - 1; j >= 0 && j >= len(b)-utf8.UTFMax+1; j-- {
		if utf8.RuneStart(b[j]) {
			if b[j] >= utf8.RuneSelf && !utf8.FullRune(b[j:]) {
				return j
			}
			break
		}
	}
	return len(b)
}
