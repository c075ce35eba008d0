package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLongNames: a session writes, uploads (one file, and a directory
// holding such names) and downloads files whose names are 240, 250 and 255
// bytes long (NAME_MAX is 255), through the tar stream and through a
// provider's direct file copies.
func TestLongNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		n      int
		direct bool
	}{
		{"240 bytes tar", 240, false},
		{"250 bytes tar", 250, false},
		{"255 bytes tar", 255, false},
		{"240 bytes direct", 240, true},
		{"255 bytes direct", 255, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var s *Session
			if tt.direct {
				s, _ = directSession(t)
			} else {
				fx := newFixture(t, nil)
				var err error
				if s, err = fx.engine.Open(ctx, OpenOptions{}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close(context.Background()) })
			}
			name := strings.Repeat("n", tt.n)
			sub := strings.Repeat("s", tt.n)

			if err := s.Write(ctx, "written/"+name, strings.NewReader("written\n"), false); err != nil {
				t.Fatalf("Write: %v", err)
			}
			host := t.TempDir()
			tree := filepath.Join(host, "tree")
			for rel, body := range map[string]string{name: "top\n", filepath.Join(sub, name): "nested\n"} {
				p := filepath.Join(tree, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Upload(ctx, filepath.Join(tree, name), "/workspace/single/", TransferOptions{}); err != nil {
				t.Fatalf("Upload of one file: %v", err)
			}
			if err := s.Upload(ctx, tree, "/workspace/up", TransferOptions{}); err != nil {
				t.Fatalf("Upload of a directory: %v", err)
			}
			for p, want := range map[string]string{
				"/workspace/written/" + name:        "written\n",
				"/workspace/single/" + name:         "top\n",
				"/workspace/up/" + name:             "top\n",
				"/workspace/up/" + sub + "/" + name: "nested\n",
			} {
				var b strings.Builder
				if err := s.Read(ctx, p, &b); err != nil || b.String() != want {
					t.Errorf("%s…: %q, %v; want %q", p[:24], b.String(), err, want)
				}
			}

			back := t.TempDir()
			if err := s.Download(ctx, "/workspace/single/"+name, filepath.Join(back, "one", name), TransferOptions{}); err != nil {
				t.Fatalf("Download of one file: %v", err)
			}
			if err := s.Download(ctx, "/workspace/up", filepath.Join(back, "tree"), TransferOptions{}); err != nil {
				t.Fatalf("Download of a directory: %v", err)
			}
			for rel, want := range map[string]string{
				filepath.Join("one", name):       "top\n",
				filepath.Join("tree", name):      "top\n",
				filepath.Join("tree", sub, name): "nested\n",
			} {
				if got, err := os.ReadFile(filepath.Join(back, rel)); err != nil || string(got) != want {
					t.Errorf("downloaded %s…: %q, %v; want %q", rel[:8], got, err, want)
				}
			}
		})
	}
}
