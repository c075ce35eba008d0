package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestPackAs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha"), 0o640)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	if err := PackAs(context.Background(), &buf, root, "a.txt", "b.txt"); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "b.txt" || hdr.Size != 5 {
		t.Fatalf("entry = %+v, %v", hdr, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("more than one entry: %v", err)
	}
	for _, bad := range []struct{ name, as string }{{"d", "x"}, {"a.txt", "x/y"}, {"a.txt", ".."}, {"a.txt", "."}, {"a.txt", "./b"}} {
		if err := PackAs(context.Background(), io.Discard, root, bad.name, bad.as); err == nil {
			t.Errorf("PackAs(%q, %q) should fail", bad.name, bad.as)
		}
	}
}
