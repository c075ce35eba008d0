//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// TestCancelledUploadStops (issue 14, item 11): a cancelled single-file
// upload (the kernel's copy of a host file) stops at once rather than
// copying the rest, and leaves no partial file behind. "At once" is
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
	full, err := upload(context.Background())
	if err != nil {
		t.Fatal(err)
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
