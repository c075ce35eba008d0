//go:build linux

package local

import (
	"os"
	"testing"
)

// BenchmarkHostMasks measures the scan for host secrets (the root scan
// when run as root), which every CLI start would pay without the cache.
func BenchmarkHostMasks(b *testing.B) {
	layers, _ := hostLayout("/")
	for b.Loop() {
		hostMasks(layers, os.Getuid(), os.Getenv("HOME"), "/etc/passwd")
	}
}

// BenchmarkProviderMasks measures the same through the cache, as New
// runs it.
func BenchmarkProviderMasks(b *testing.B) {
	layers, _ := hostLayout("/")
	dir := b.TempDir()
	for b.Loop() {
		providerMasks(dir, layers, os.Getuid(), os.Getenv("HOME"))
	}
}

// BenchmarkSeccompFilter measures assembling the filter (done in every
// init).
func BenchmarkSeccompFilter(b *testing.B) {
	for b.Loop() {
		if _, err := seccompFilter(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStampSum measures the check of a cached root scan: every start
// as root runs one, unless a standby machine vouches for the cache (see
// maskWatch), and a standby runs one to vouch.
func BenchmarkStampSum(b *testing.B) {
	layers, _ := hostLayout("/")
	st := newStamps()
	scanHostMasks(layers, 0, "/root", "/etc/passwd", st)
	b.ReportMetric(float64(len(st.watch)), "paths")
	for b.Loop() {
		stampSum(st.watch, true)
	}
}
