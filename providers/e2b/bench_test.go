//go:build linux

package e2b_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b"
)

// benchClient returns a client for the benchmarks: against the server named
// by E2B_BENCH_URL (and E2B_API_KEY) when set, so that the official SDK
// and this client can be measured against the same `sandbox serve`
// (providers/e2b/conformance/bench.sh does that), else against an
// in-process emulator.
func benchClient(b *testing.B) providers.Provider {
	b.Helper()
	if url := os.Getenv("E2B_BENCH_URL"); url != "" {
		p, err := e2b.NewWithOptions(e2b.Options{APIKey: os.Getenv("E2B_API_KEY"), APIURL: url, SandboxURL: url})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	return newHarness(b).client(b, nil)
}

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

// BenchmarkFirstOutput measures the time from calling Exec to the first
// byte of the command's output ("first-output-ms", the median), and the
// whole call (ns/op). The command is the one the official SDK's
// commands.run('echo x') starts, so both measure the same remote work.
func BenchmarkFirstOutput(b *testing.B) {
	p := benchClient(b)
	ctx := context.Background()
	info, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"bench": "first-output"}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Delete(context.Background(), info.ID)
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		w := &firstWrite{}
		start := time.Now()
		if _, err := p.Exec(ctx, info.ID, providers.ExecRequest{Argv: []string{"/bin/bash", "-l", "-c", "echo x"}, Stdout: w}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, w.at.Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "first-output-ms")
}

// BenchmarkUpload measures WriteFile of 50 MiB (MB/s).
func BenchmarkUpload(b *testing.B) {
	p := benchClient(b)
	ctx := context.Background()
	info, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"bench": "upload"}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Delete(context.Background(), info.ID)
	data := make([]byte, 50<<20)
	_, _ = rand.Read(data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if err := p.WriteFile(ctx, info.ID, "/workspace/upload.bin", bytes.NewReader(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
