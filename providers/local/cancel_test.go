//go:build linux

package local

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// TestCancelledUploadStops (issue 14, item 11): a single-file upload (the
// kernel's copy of a host file) shows its progress as it goes, and a
// cancelled one stops at once rather than copying the rest, and leaves no
// partial file behind. "At once" is
// measured against the same upload left to finish, on the same machine.
func TestCancelledUploadStops(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	src := filepath.Join(t.TempDir(), "u3.bin")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for range 1024 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	upload := func(ctx context.Context) (time.Duration, error) {
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := p.UploadFile(ctx, id, "/workspace/u3.bin", f, 0o644, time.Time{})
		return time.Since(start), err
	}
	// While it runs, the source's offset shows the progress (the engine's
	// progress bar follows it): some value strictly between 0 and the end.
	var midway atomic.Bool
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for i := 0; i < 10000 && !midway.Load(); i++ {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil && off > 0 && off < 1<<30 {
				midway.Store(true)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	full, err := upload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-watching
	if !midway.Load() {
		t.Errorf("the source's offset never showed progress during the upload")
	}
	mustRun(t, p, id, "rm /workspace/u3.bin")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(full/10, cancel)
	took, err := upload(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled upload: %v", err)
	}
	if took > full*6/10 {
		t.Errorf("a cancelled upload took %v; the whole upload takes %v", took, full)
	}
	if got := mustRun(t, p, id, "ls -A /workspace"); got != "" {
		t.Errorf("left in /workspace: %q", got)
	}
}
