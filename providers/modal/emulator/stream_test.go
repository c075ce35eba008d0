//go:build linux

package emulator

import (
	"bytes"
	"testing"
	"time"
)

// TestStreamBoundsUnreadOutput checks that a writer more than streamCap
// ahead of its reader blocks until the reader catches up, that a read
// resumes from any offset still kept, and that an offset already dropped
// is refused rather than answered with the wrong bytes.
func TestStreamBoundsUnreadOutput(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	st := newStream(stop)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	wrote := make(chan int, 64)
	go func() {
		for i := 0; i < 32; i++ {
			if _, err := st.Write(chunk); err != nil {
				return
			}
			wrote <- i
		}
		st.close()
	}()
	// The writer stops after streamCap plus one chunk.
	deadline := time.After(10 * time.Second)
	n := 0
	for n < streamCap>>20+1 {
		select {
		case <-wrote:
			n++
		case <-deadline:
			t.Fatalf("only %d MiB written", n)
		}
	}
	select {
	case <-wrote:
		t.Fatalf("the writer went past %d MiB with nothing read", streamCap>>20+1)
	case <-time.After(200 * time.Millisecond):
	}
	// Reading all of it lets the writer finish.
	var off uint64
	for {
		data, closed, changed, err := st.from(off)
		if err != nil {
			t.Fatalf("from(%d): %v", off, err)
		}
		off += uint64(len(data))
		st.sent(off)
		if closed && len(data) == 0 {
			break
		}
		if len(data) == 0 {
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatalf("stalled at offset %d", off)
			}
		}
	}
	if off != 32<<20 {
		t.Errorf("read %d bytes, want %d", off, 32<<20)
	}
	if _, _, _, err := st.from(off - streamKeep); err != nil {
		t.Errorf("from(end - streamKeep): %v, want the kept tail", err)
	}
	if _, _, _, err := st.from(0); err == nil {
		t.Errorf("from(0) after the start was dropped: no error")
	}
}
