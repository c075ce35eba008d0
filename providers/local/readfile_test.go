//go:build linux

package local

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, size := range []int{0, 1, 2047, 2048, 2049, 100 << 10} {
		want := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read %d, %v", size, len(got), err)
		}
	}
	// A /proc file, whose size says 0.
	got, err := readFile("/proc/self/status")
	if err != nil || !bytes.HasPrefix(got, []byte("Name:")) || !bytes.Contains(got, []byte("\nSigPnd:")) {
		t.Fatalf("/proc/self/status: %q, %v", got, err)
	}
	if _, err := readFile(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	if _, err := readFile(dir); err == nil {
		t.Fatal("a directory was read")
	}
}
