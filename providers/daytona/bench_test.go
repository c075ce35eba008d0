//go:build linux

package daytona_test

import (
	"os"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona"
	dtnemu "github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/providertest"
)

// benchClient returns a client for the benchmarks: against the API named
// by DAYTONA_BENCH_URL (and DAYTONA_API_KEY) when set, so that the
// official SDK and this client are measured against the same `sandbox
// serve` (conformance/bench.sh does that), else against an in-process
// emulator.
func benchClient(b *testing.B) providers.Provider {
	b.Helper()
	if url := os.Getenv("DAYTONA_BENCH_URL"); url != "" {
		p, err := daytona.NewWithOptions(daytona.Options{APIKey: os.Getenv("DAYTONA_API_KEY"), APIURL: url})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	return newHarness(b, dtnemu.Options{}).client(b, nil)
}

// BenchmarkFirstOutput measures the first output of `echo x` run the way
// the official SDK's streamed session command runs it.
func BenchmarkFirstOutput(b *testing.B) {
	providertest.BenchFirstOutput(b, benchClient(b), providers.ExecRequest{Shell: "echo x"})
}

// BenchmarkUpload measures WriteFile of 50 MiB (MB/s).
func BenchmarkUpload(b *testing.B) {
	providertest.BenchUpload(b, benchClient(b), 50<<20)
}
