package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// spliceTree lays out files whose sizes land on and around tar's 512-byte
// blocks, a long name (a PAX header), an empty file, a symlink and nested
// directories, and returns name → contents of the regular files.
func spliceTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{}
	for i, size := range []int{0, 1, 511, 512, 513, 3<<20 + 7} {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		files[filepath.Join("d", "sub", "f"+string(rune('a'+i)))] = b
	}
	files[strings.Repeat("long-name-", 15)+"end"] = []byte("pax\n")
	for name, b := range files {
		full := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub/fa", filepath.Join(dir, "d", "link")); err != nil {
		t.Fatal(err)
	}
	return files
}

// TestPipeRoundTrip packs a tree into a pipe (bodies spliced from the
// files) and extracts it from the pipe (bodies spliced into the files):
// every byte arrives, the framing around spliced bodies holds, and both
// sides report exactly the bytes of the files.
func TestPipeRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := spliceTree(t, src)
	var total int64
	for _, b := range files {
		total += int64(len(b))
	}
	sroot, droot := openRoot(t, src), openRoot(t, dst)

	var packed, extracted atomic.Int64
	s, err := PackPipe(context.Background(), sroot, ".", "", func(n int64) { packed.Add(n) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !isPipe(s.File()) {
		t.Fatal("the stream is not a pipe")
	}
	_, err = Extract(context.Background(), s.File(), droot, "out", ExtractOptions{Progress: func(n int64) { extracted.Add(n) }})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("packing: %v", err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, "out", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (want %d), %v", name, len(got), len(want), err)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "out", "d", "link")); err != nil || target != "sub/fa" {
		t.Errorf("symlink: %q, %v", target, err)
	}
	if packed.Load() != total || extracted.Load() != total {
		t.Errorf("progress: packed %d, extracted %d, want %d", packed.Load(), extracted.Load(), total)
	}
}

// TestStreamReportsPackError: a reader of a Stream whose packing failed
// gets the error, not a clean end.
func TestStreamReportsPackError(t *testing.T) {
	root := openRoot(t, t.TempDir())
	s, err := PackPipe(context.Background(), root, "missing", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := io.ReadAll(s); err == nil {
		t.Error("reading a failed stream ended cleanly")
	}
	if err := s.Wait(); err == nil {
		t.Error("Wait = nil for a failed packing")
	}
}

// TestPipeTruncatedBody: a stream that ends inside a spliced body fails
// the extraction and leaves no partial file.
func TestPipeTruncatedBody(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		tw := tar.NewWriter(w)
		_ = tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20})
		_, _ = tw.Write(make([]byte, 1000))
		w.Close() // no more of the body, no end of archive
	}()
	dst := t.TempDir()
	root := openRoot(t, dst)
	_, err = Extract(context.Background(), r, root, ".", ExtractOptions{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Extract of a truncated body = %v, want unexpected EOF", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestWriterSwallowsOnlyBodies: framing written around a spliced body is
// the one tar.Writer would write around a copied one.
func TestWriterSwallowsOnlyBodies(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789"), 100_001)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	var want bytes.Buffer
	if err := Pack(context.Background(), &want, root, "f"); err != nil {
		t.Fatal(err)
	}
	s, err := PackPipe(context.Background(), root, "f", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("spliced stream (%d bytes) differs from the copied one (%d bytes)", len(got), want.Len())
	}
}

// openRoot opens dir as a root closed when t ends.
func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// TestSpliceUsed: the splice path is taken where the stream is a pipe (and
// only there), and the primitives move every byte between a file and a
// pipe without falling back to a copy.
func TestSpliceUsed(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	reg, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	if NewWriter(w).pipe == nil || NewReader(ctx, r).pipe == nil {
		t.Error("a pipe was not recognised: bodies would be copied")
	}
	if NewWriter(reg).pipe != nil || NewWriter(&bytes.Buffer{}).pipe != nil || NewReader(ctx, reg).pipe != nil {
		t.Error("a non-pipe was taken for a pipe")
	}

	data := bytes.Repeat([]byte("splice!"), 3<<18)
	if _, err := reg.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(filepath.Join(t.TempDir(), "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	n := int64(len(data))
	in := make(chan error, 1)
	go func() {
		got, err := spliceIn(ctx, r, dst, n, func(int64) {})
		if err == nil && got != n {
			err = io.ErrShortWrite
		}
		in <- err
	}()
	if got, err := spliceOut(ctx, reg, w, n, nil); err != nil || got != n {
		t.Fatalf("spliceOut = %d, %v; want %d", got, err, n)
	}
	if err := <-in; err != nil {
		t.Fatalf("spliceIn: %v", err)
	}
	if got, err := os.ReadFile(dst.Name()); err != nil || !bytes.Equal(got, data) {
		t.Errorf("spliced file: %d bytes, %v; want the %d written", len(got), err, n)
	}
}
