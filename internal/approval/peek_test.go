package approval

import (
	"context"
	"io/fs"
	"testing"
)

// TestPeek checks that the look before a write sends no event, and reads
// the content only where reading is allowed and the file is small.
func TestPeek(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, policy string
		limit              int64
		want               Existing
	}{
		{"a small file", "/workspace/a.txt", "allow: [\"write\"]", 100, Existing{Exists: true, Known: true, Content: "hello world\n"}},
		{"reading denied", "/workspace/a.txt", "deny: [\"read:/workspace/a.txt\"]", 100, Existing{Exists: true}},
		{"larger than the limit", "/workspace/a.txt", "allow: [\"write\"]", 4, Existing{Exists: true}},
		{"nothing there", "/workspace/new.txt", "allow: [\"write\"]", 100, Existing{}},
		{"a directory", "/workspace/d", "allow: [\"write\"]", 100, Existing{Exists: true, Dir: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var evs []Event
			f := seededFake()
			f.files["/workspace/d"], f.modes["/workspace/d"] = "", fs.ModeDir|0o755
			g := NewGate(f, GateOptions{Policy: mustPolicy(t, tt.policy), OnEvent: func(ev Event) { evs = append(evs, ev) }})
			got, err := g.Peek(context.Background(), "sb-1", tt.path, tt.limit)
			if err != nil || got != tt.want {
				t.Fatalf("Peek = %+v, %v; want %+v", got, err, tt.want)
			}
			if len(evs) != 0 {
				t.Fatalf("Peek sent %d events: %+v", len(evs), evs)
			}
		})
	}
}

// TestHoldCompletions checks that a call's completion waits for release,
// and that one ending after the release goes out at once.
func TestHoldCompletions(t *testing.T) {
	t.Parallel()
	var types []string
	g := NewGate(seededFake(), GateOptions{Policy: &Policy{Yes: true}, OnEvent: func(ev Event) { types = append(types, ev.Type) }})
	ctx, release := HoldCompletions(context.Background())
	if _, err := g.ReadFile(ctx, "sb-1", "/workspace/a.txt"); err != nil {
		t.Fatal(err)
	}
	if n := len(types); n != 2 || types[n-1] == EventOperation {
		t.Fatalf("before release: %v", types)
	}
	release()
	if n := len(types); n != 3 || types[n-1] != EventOperation {
		t.Fatalf("after release: %v", types)
	}
	if _, err := g.ReadFile(ctx, "sb-1", "/workspace/a.txt"); err != nil {
		t.Fatal(err)
	}
	if n := len(types); n != 6 || types[n-1] != EventOperation {
		t.Fatalf("a call after release: %v", types)
	}
	release()
}
