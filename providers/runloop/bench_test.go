//go:build linux

package runloop_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/providertest"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
)

// BenchmarkVersusSDK measures our client and Runloop's official
// TypeScript SDK (conformance/bench.mjs) against one emulator backed by
// local sandboxes: the median time from starting `echo x` to its first
// output (first-output-ms) and the throughput of a 50 MiB upload (MB/s for
// ours, upload-MB/s for the SDK's).
//
//	go test -run '^$' -bench VersusSDK -benchtime 20x ./providers/runloop/
//
// (the SDK's part runs once and makes its own 20 commands and 5 uploads).
func BenchmarkVersusSDK(b *testing.B) {
	h := newHarness(b, rlemu.Options{})
	p := h.client(b, nil)
	b.Run("client-first-output", func(b *testing.B) {
		providertest.BenchFirstOutput(b, p, providers.ExecRequest{Shell: "echo x"})
	})
	b.Run("client-upload-50MiB", func(b *testing.B) {
		providertest.BenchUpload(b, p, 50<<20)
	})
	b.Run("sdk", func(b *testing.B) {
		project := &emulatortest.NodeProject{Dir: filepath.Join("conformance")}
		project.Install(b)
		var res struct {
			FirstOutputMs float64 `json:"first_output_ms"`
			UploadMBs     float64 `json:"upload_mb_s"`
		}
		// The script makes its own runs (20 commands, 5 uploads,
		// medians), whatever b.N is.
		out, err := project.Run(b.Context(), b, h.Server.Env(h.URL), "bench.mjs")
		if err != nil {
			b.Fatalf("bench.mjs: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			b.Fatalf("bench.mjs printed %q: %v", out, err)
		}
		b.ReportMetric(res.FirstOutputMs, "first-output-ms")
		b.ReportMetric(res.UploadMBs, "upload-MB/s")
	})
}
