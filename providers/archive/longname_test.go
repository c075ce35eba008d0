package archive_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/archive"
)

// TestLongNames: names at and near NAME_MAX (255 bytes) survive every
// write path of the package: Extract (a directory, a single file renamed,
// an existing file replaced), WriteFile, and an upload and download through
// a provider's file operations. A temporary name derived from the target
// name would not fit beside it.
func TestLongNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int
	}{
		{"240 bytes", 240},
		{"250 bytes", 250},
		{"255 bytes", 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			file, dir, link := strings.Repeat("f", tt.n), strings.Repeat("d", tt.n), strings.Repeat("l", tt.n)
			src := t.TempDir()
			writeFile(t, src, filepath.Join("tree", file), []byte("top\n"), 0o644)
			writeFile(t, src, filepath.Join("tree", dir, file), randomBytes(2, 70_000), 0o600)
			if err := os.Symlink(file, filepath.Join(src, "tree", link)); err != nil {
				t.Fatal(err)
			}
			want := describeTree(t, filepath.Join(src, "tree"))
			var packed bytes.Buffer
			if err := archive.Pack(ctx, &packed, openRoot(t, src), "tree"); err != nil {
				t.Fatalf("Pack: %v", err)
			}

			dst := t.TempDir()
			root := openRoot(t, dst)
			if _, err := archive.Extract(ctx, bytes.NewReader(packed.Bytes()), root, "copy", archive.ExtractOptions{}); err != nil {
				t.Fatalf("Extract of a directory: %v", err)
			}
			compareTrees(t, describeTree(t, filepath.Join(dst, "copy")), want)
			if _, err := archive.Extract(ctx, bytes.NewReader(packed.Bytes()), root, "copy", archive.ExtractOptions{Force: true}); err != nil {
				t.Fatalf("Extract over existing files with Force: %v", err)
			}
			compareTrees(t, describeTree(t, filepath.Join(dst, "copy")), want)

			single := tarOf(t, tent{name: file, body: "single\n"})
			if _, err := archive.Extract(ctx, bytes.NewReader(single), root, ".", archive.ExtractOptions{SingleFileAs: "one/" + link}); err != nil {
				t.Fatalf("Extract of a single file to a long name: %v", err)
			}
			if got, err := os.ReadFile(filepath.Join(dst, "one", link)); err != nil || string(got) != "single\n" {
				t.Errorf("single file: %q, %v", got, err)
			}

			if err := root.Mkdir("written", 0o755); err != nil {
				t.Fatal(err)
			}
			for _, force := range []bool{false, true} {
				err := archive.WriteFile(ctx, root, "written/"+file, force, 0o640, time.Time{}, func(f *os.File) error {
					_, err := f.WriteString("written\n")
					return err
				})
				if err != nil {
					t.Fatalf("WriteFile (force %v): %v", force, err)
				}
			}
			if got, err := os.ReadFile(filepath.Join(dst, "written", file)); err != nil || string(got) != "written\n" {
				t.Errorf("WriteFile: %q, %v", got, err)
			}

			p, id := newSandbox(t)
			if err := archive.UploadViaFiles(ctx, p, id, "/workspace/up", bytes.NewReader(packed.Bytes())); err != nil {
				t.Fatalf("UploadViaFiles: %v", err)
			}
			var down bytes.Buffer
			if err := archive.DownloadViaFiles(ctx, p, id, "/workspace/up", &down); err != nil {
				t.Fatalf("DownloadViaFiles: %v", err)
			}
			if _, err := archive.Extract(ctx, &down, root, "back", archive.ExtractOptions{}); err != nil {
				t.Fatalf("Extract of the download: %v", err)
			}
			compareTrees(t, describeTree(t, filepath.Join(dst, "back")), want)
			assertNoTemp(t, dst)
		})
	}
}
