package output

import (
	"strings"
	"sync"
	"testing"
)

func TestTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	Table(&b, []string{"ID", "STATE"}, [][]string{{"sb-1", "running"}, {"sb-long-id", "stopped"}})
	want := "ID          STATE\nsb-1        running\nsb-long-id  stopped\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestLinesMaskedAndWhole(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	l := NewLines(&b, func(s string) string { return strings.ReplaceAll(s, "hunter2", "***") })
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); l.Write(map[string]string{"pw": "hunter2", "pad": strings.Repeat("x", 100)}) }()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, ln := range lines {
		if !strings.HasPrefix(ln, "{") || !strings.HasSuffix(ln, "}") || strings.Contains(ln, "hunter2") {
			t.Fatalf("bad line %q", ln)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	JSON(&b, map[string]any{"a": "<b>"})
	if b.String() != "{\n  \"a\": \"<b>\"\n}\n" {
		t.Fatalf("got %q", b.String())
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
