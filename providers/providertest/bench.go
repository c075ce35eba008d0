package providertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// firstWrite records when the first byte arrived.
type firstWrite struct {
	once sync.Once
	at   time.Time
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { f.at = time.Now() })
	}
	return len(p), nil
}

// benchSandbox creates a sandbox for a benchmark and deletes it after.
func benchSandbox(b *testing.B, p providers.Provider, name string) string {
	b.Helper()
	ctx := b.Context()
	info, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"bench": name}})
	if err != nil {
		b.Fatal(err)
	}
	// b.Context ends before the cleanups run.
	b.Cleanup(func() { _ = p.Delete(context.WithoutCancel(ctx), info.ID) })
	return info.ID
}

// BenchFirstOutput measures the time from calling Exec with req to the
// first byte of the command's stdout ("first-output-ms", the median), and
// the whole call (ns/op), in a sandbox of its own.
func BenchFirstOutput(b *testing.B, p providers.Provider, req providers.ExecRequest) {
	id := benchSandbox(b, p, "first-output")
	ctx := b.Context()
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		w := &firstWrite{}
		req.Stdout = w
		start := time.Now()
		if _, err := p.Exec(ctx, id, req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, w.at.Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "first-output-ms")
}

// BenchUpload measures WriteFile of size random bytes (MB/s) into
// /workspace/upload.bin of a sandbox of its own.
func BenchUpload(b *testing.B, p providers.Provider, size int) {
	id := benchSandbox(b, p, "upload")
	data := make([]byte, size)
	_, _ = rand.Read(data)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		if err := p.WriteFile(b.Context(), id, "/workspace/upload.bin", bytes.NewReader(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
