package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
)

// openRoot opens dir as an *os.Root closed at the end of the test.
func openRoot(t testing.TB, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatalf("OpenRoot(%s): %v", dir, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed byte, n int) []byte {
	var key [32]byte
	key[0] = seed
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// writeFile creates a file and its parents under dir.
func writeFile(t testing.TB, dir, name string, data []byte, perm fs.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

// buildTree makes the tree the round-trip tests pack: nested directories,
// an empty directory, a 20 MiB file, an executable and two symlinks.
func buildTree(t testing.TB, dir string) {
	t.Helper()
	writeFile(t, dir, "a.txt", []byte("alpha\n"), 0o644)
	writeFile(t, dir, "bin/run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	writeFile(t, dir, "nested/deeper/deepest/big.bin", randomBytes(1, 20<<20), 0o600)
	writeFile(t, dir, "nested/b.txt", []byte{}, 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link-to-a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "nested/abs-link")); err != nil {
		t.Fatal(err)
	}
}

// describeTree maps every path under dir to a description of its type,
// permissions, contents or link target.
func describeTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[rel] = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + target
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %d %x", fi.Mode().Perm(), len(data), sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

func compareTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s: got %q, want %q", k, got[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s: %q", k, got[k])
		}
	}
}

// tent is one entry of a tar built by a test.
type tent struct {
	name     string
	typ      byte
	body     string
	linkname string
}

// tarOf builds a tar stream from entries, exactly as given.
func tarOf(t testing.TB, entries ...tent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Linkname: e.linkname, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarNames lists the entry names of a tar stream.
func tarNames(t testing.TB, data []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		names = append(names, hdr.Name)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	buildTree(t, filepath.Join(src, "tree"))
	srcRoot, dstRoot := openRoot(t, src), openRoot(t, dst)

	// Pack into a pipe that Extract drains at the same time: nothing
	// needs the whole archive at once.
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(archive.Pack(t.Context(), pw, srcRoot, "tree")) }()
	written, err := archive.Extract(t.Context(), pr, dstRoot, "out/copy", archive.ExtractOptions{})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	compareTrees(t, describeTree(t, filepath.Join(dst, "out/copy")), describeTree(t, filepath.Join(src, "tree")))
	if !slices.Contains(written, "out/copy/nested/deeper/deepest/big.bin") || !slices.Contains(written, "out/copy/link-to-a") || !slices.Contains(written, "out/copy/empty") {
		t.Errorf("Extract returned %v; want the files, symlinks and directories it wrote", written)
	}
}

func TestPackOrderAndSingles(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeFile(t, src, "d/z.txt", []byte("z"), 0o644)
	writeFile(t, src, "d/a.txt", []byte("a"), 0o644)
	writeFile(t, src, "d/m/inner.txt", []byte("i"), 0o644)
	writeFile(t, src, "d/b/inner.txt", []byte("i"), 0o644)
	if err := os.Symlink("z.txt", filepath.Join(src, "d/link")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, src)

	tests := []struct {
		name string
		want []string
	}{
		{"d", []string{"b/", "b/inner.txt", "m/", "m/inner.txt", "a.txt", "link", "z.txt"}},
		{"d/m/inner.txt", []string{"inner.txt"}},
		{"d/link", []string{"link"}},
		{"./d/b/", []string{"inner.txt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var first, second bytes.Buffer
			if err := archive.Pack(t.Context(), &first, root, tc.name); err != nil {
				t.Fatalf("Pack(%s): %v", tc.name, err)
			}
			if err := archive.Pack(t.Context(), &second, root, tc.name); err != nil {
				t.Fatalf("Pack(%s): %v", tc.name, err)
			}
			if got := tarNames(t, first.Bytes()); !slices.Equal(got, tc.want) {
				t.Errorf("Pack(%s) names = %q, want %q", tc.name, got, tc.want)
			}
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Errorf("Pack(%s) is not deterministic", tc.name)
			}
		})
	}

	t.Run("symlink-not-followed", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		if err := archive.Pack(t.Context(), &buf, root, "d/link"); err != nil {
			t.Fatal(err)
		}
		hdr, err := tar.NewReader(&buf).Next()
		if err != nil || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "z.txt" || hdr.Size != 0 {
			t.Errorf("Pack(d/link) first header = %+v, %v; want a symlink to z.txt", hdr, err)
		}
	})

	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		err := archive.Pack(t.Context(), io.Discard, root, "nope")
		if !errors.Is(err, providers.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Pack(nope) = %v, want an error matching ErrNotFound and fs.ErrNotExist", err)
		}
	})
}

func TestExtractRejectsHostileNames(t *testing.T) {
	t.Parallel()
	// archive/tar refuses to write a NUL in a name, so plant one by hand
	// in a PAX path record: the reader must refuse it too.
	nul := tarOf(t, tent{name: strings.Repeat("n", 120) + "@b", body: "x"})
	nul = bytes.ReplaceAll(nul, []byte("@b"), []byte("\x00b"))

	tests := []struct {
		name    string
		entries []tent
		kind    error // nil: any error
		data    []byte
	}{
		{"nul", nil, nil, nul},
		{"sparse", nil, providers.ErrUnsupported, gnuSparse(t)},
		{"parent", []tent{{name: "../x", body: "x"}}, providers.ErrInvalid, nil},
		{"absolute", []tent{{name: "/etc/x", body: "x"}}, providers.ErrInvalid, nil},
		{"climb", []tent{{name: "a/../../x", body: "x"}}, providers.ErrInvalid, nil},
		{"dotdot-inside", []tent{{name: "a/../b", body: "x"}}, providers.ErrInvalid, nil},
		{"symlink-abs-then-file", []tent{{name: "l", typ: tar.TypeSymlink, linkname: "/etc"}, {name: "l/passwd", body: "owned"}}, providers.ErrInvalid, nil},
		{"symlink-rel-then-file", []tent{{name: "l", typ: tar.TypeSymlink, linkname: "../../outside"}, {name: "l/x", body: "owned"}}, providers.ErrInvalid, nil},
		{"symlink-then-dir", []tent{{name: "l", typ: tar.TypeSymlink, linkname: "../../outside"}, {name: "l/sub/", typ: tar.TypeDir}}, providers.ErrInvalid, nil},
		{"hard-link", []tent{{name: "a", body: "x"}, {name: "h", typ: tar.TypeLink, linkname: "a"}}, providers.ErrUnsupported, nil},
		{"char-device", []tent{{name: "null", typ: tar.TypeChar}}, providers.ErrUnsupported, nil},
		{"block-device", []tent{{name: "sda", typ: tar.TypeBlock}}, providers.ErrUnsupported, nil},
		{"fifo", []tent{{name: "pipe", typ: tar.TypeFifo}}, providers.ErrUnsupported, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			rootDir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
			for _, d := range []string{rootDir, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			root := openRoot(t, rootDir)
			data := tc.data
			if data == nil {
				data = tarOf(t, tc.entries...)
			}
			for _, force := range []bool{false, true} {
				_, err := archive.Extract(t.Context(), bytes.NewReader(data), root, "dst", archive.ExtractOptions{Force: force})
				if err == nil {
					t.Fatalf("Extract(force=%v) succeeded, want an error", force)
				}
				t.Logf("Extract(force=%v): %v", force, err)
				if tc.kind != nil && !errors.Is(err, tc.kind) {
					t.Errorf("Extract(force=%v) = %v, want an error matching %v", force, err, tc.kind)
				}
			}
			assertEmpty(t, outside)
			assertOnly(t, base, "root", "outside")
			if _, err := os.Stat("/etc/x"); err == nil {
				t.Errorf("/etc/x exists")
			}
		})
	}
}

// assertEmpty fails when dir holds anything.
func assertEmpty(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("%s should be empty, holds %v", dir, names)
	}
}

// assertOnly fails when dir holds anything but names.
func assertOnly(t testing.TB, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(names, e.Name()) {
			t.Fatalf("%s holds unexpected %s", dir, e.Name())
		}
	}
}

// failingReader returns data, then fails after n bytes.
type failingReader struct {
	r io.Reader
	n int
}

var errBroken = errors.New("connection reset")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errBroken
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

func TestExtractNoPartialFile(t *testing.T) {
	t.Parallel()
	big := string(randomBytes(2, 1<<20))
	data := tarOf(t, tent{name: "first.txt", body: "complete"}, tent{name: "sub/big.bin", body: big})
	// Fail halfway through big.bin's contents.
	cut := len(data) - len(big)/2 - 1024
	for _, single := range []string{"", "single.bin"} {
		t.Run("single="+single, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			root := openRoot(t, dir)
			_, err := archive.Extract(t.Context(), &failingReader{r: bytes.NewReader(data), n: cut}, root, "dst", archive.ExtractOptions{SingleFileAs: single})
			if !errors.Is(err, errBroken) {
				t.Fatalf("Extract with a reader failing mid-file = %v, want the reader's error", err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "dst/first.txt")); err != nil || string(got) != "complete" {
				t.Errorf("dst/first.txt = %q, %v; want the entry completed before the failure", got, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "dst/sub/big.bin")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("dst/sub/big.bin exists after a failed extract (err %v)", err)
			}
			assertNoTemp(t, dir)
		})
	}
}

// assertNoTemp fails when a temporary file is left anywhere under dir.
func assertNoTemp(t testing.TB, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func TestExtractForce(t *testing.T) {
	t.Parallel()
	data := tarOf(t, tent{name: "a.txt", body: "new"}, tent{name: "l", typ: tar.TypeSymlink, linkname: "a.txt"})
	setup := func(t *testing.T) (string, *os.Root) {
		dir := t.TempDir()
		writeFile(t, dir, "dst/a.txt", []byte("old"), 0o644)
		if err := os.Symlink("/etc/hostname", filepath.Join(dir, "dst/l")); err != nil {
			t.Fatal(err)
		}
		return dir, openRoot(t, dir)
	}

	t.Run("without", func(t *testing.T) {
		t.Parallel()
		dir, root := setup(t)
		_, err := archive.Extract(t.Context(), bytes.NewReader(data), root, "dst", archive.ExtractOptions{})
		if !errors.Is(err, providers.ErrExists) || !strings.Contains(err.Error(), "dst/a.txt") {
			t.Fatalf("Extract over an existing file = %v, want ErrExists naming dst/a.txt", err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "dst/a.txt")); string(got) != "old" {
			t.Errorf("dst/a.txt = %q, want it untouched", got)
		}
		assertNoTemp(t, dir)
	})

	t.Run("existing-symlink", func(t *testing.T) {
		t.Parallel()
		dir, root := setup(t)
		only := tarOf(t, tent{name: "l", typ: tar.TypeSymlink, linkname: "a.txt"})
		_, err := archive.Extract(t.Context(), bytes.NewReader(only), root, "dst", archive.ExtractOptions{})
		if !errors.Is(err, providers.ErrExists) || !strings.Contains(err.Error(), "dst/l") {
			t.Fatalf("Extract over an existing symlink = %v, want ErrExists naming dst/l", err)
		}
		assertNoTemp(t, dir)
	})

	t.Run("with", func(t *testing.T) {
		t.Parallel()
		dir, root := setup(t)
		written, err := archive.Extract(t.Context(), bytes.NewReader(data), root, "dst", archive.ExtractOptions{Force: true})
		if err != nil {
			t.Fatalf("Extract with Force: %v", err)
		}
		if !slices.Equal(written, []string{"dst/a.txt", "dst/l"}) {
			t.Errorf("written = %q", written)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "dst/a.txt")); string(got) != "new" {
			t.Errorf("dst/a.txt = %q, want %q", got, "new")
		}
		if target, err := os.Readlink(filepath.Join(dir, "dst/l")); err != nil || target != "a.txt" {
			t.Errorf("dst/l -> %q, %v; want the link replaced, not followed", target, err)
		}
	})

	t.Run("file-over-directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "dst/a.txt"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := archive.Extract(t.Context(), bytes.NewReader(data), openRoot(t, dir), "dst", archive.ExtractOptions{Force: true})
		if !errors.Is(err, providers.ErrExists) {
			t.Errorf("Extract of a file over a directory = %v, want ErrExists", err)
		}
	})

	t.Run("directories-merge", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, "dst/sub/keep.txt", []byte("keep"), 0o644)
		merge := tarOf(t, tent{name: "sub/", typ: tar.TypeDir}, tent{name: "sub/new.txt", body: "n"})
		if _, err := archive.Extract(t.Context(), bytes.NewReader(merge), openRoot(t, dir), "dst", archive.ExtractOptions{}); err != nil {
			t.Fatalf("Extract into an existing directory: %v", err)
		}
		for _, f := range []string{"dst/sub/keep.txt", "dst/sub/new.txt"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	})
}

func TestExtractSingleFileAs(t *testing.T) {
	t.Parallel()
	t.Run("one-file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		data := tarOf(t, tent{name: "a.txt", body: "hello"})
		written, err := archive.Extract(t.Context(), bytes.NewReader(data), openRoot(t, dir), "dst", archive.ExtractOptions{SingleFileAs: "out/b.txt"})
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		if !slices.Equal(written, []string{"out/b.txt"}) {
			t.Errorf("written = %q, want [out/b.txt]", written)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "out/b.txt")); err != nil || string(got) != "hello" {
			t.Errorf("out/b.txt = %q, %v", got, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "dst")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("dst was created although the single file went elsewhere (err %v)", err)
		}
	})

	t.Run("exists", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, "b.txt", []byte("old"), 0o644)
		data := tarOf(t, tent{name: "a.txt", body: "hello"})
		_, err := archive.Extract(t.Context(), bytes.NewReader(data), openRoot(t, dir), ".", archive.ExtractOptions{SingleFileAs: "b.txt"})
		if !errors.Is(err, providers.ErrExists) || !strings.Contains(err.Error(), "b.txt") {
			t.Fatalf("Extract over an existing single file = %v, want ErrExists naming b.txt", err)
		}
		assertNoTemp(t, dir)
		_, err = archive.Extract(t.Context(), bytes.NewReader(data), openRoot(t, dir), ".", archive.ExtractOptions{SingleFileAs: "b.txt", Force: true})
		if got, _ := os.ReadFile(filepath.Join(dir, "b.txt")); err != nil || string(got) != "hello" {
			t.Errorf("Extract with Force = %v, b.txt = %q", err, got)
		}
	})

	t.Run("several-entries", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// The first entry is a file, so Extract only learns at the second
		// that this is not a single-file archive.
		data := tarOf(t, tent{name: "a.txt", body: "a"}, tent{name: "sub/", typ: tar.TypeDir}, tent{name: "sub/b.txt", body: "b"})
		written, err := archive.Extract(t.Context(), bytes.NewReader(data), openRoot(t, dir), "out", archive.ExtractOptions{SingleFileAs: "out"})
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		if !slices.Equal(written, []string{"out/a.txt", "out/sub", "out/sub/b.txt"}) {
			t.Errorf("written = %q", written)
		}
		compareTrees(t, describeTree(t, filepath.Join(dir, "out")), map[string]string{
			"a.txt":     fmt.Sprintf("file -rw-r--r-- 1 %x", sha256.Sum256([]byte("a"))),
			"sub":       "dir",
			"sub/b.txt": fmt.Sprintf("file -rw-r--r-- 1 %x", sha256.Sum256([]byte("b"))),
		})
		assertNoTemp(t, dir)
	})

	t.Run("directory-first", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		data := tarOf(t, tent{name: "sub/", typ: tar.TypeDir}, tent{name: "sub/only.txt", body: "x"})
		if _, err := archive.Extract(t.Context(), bytes.NewReader(data), openRoot(t, dir), "out", archive.ExtractOptions{SingleFileAs: "ignored.txt"}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "out/sub/only.txt")); err != nil {
			t.Errorf("out/sub/only.txt: %v", err)
		}
	})
}

// endless is a reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// cancelWriter cancels a context once it has received n bytes.
type cancelWriter struct {
	n      int
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.n -= len(p)
	if w.n <= 0 {
		w.cancel()
	}
	return len(p), nil
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	t.Run("extract-mid-file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		var hdr bytes.Buffer
		tw := tar.NewWriter(&hdr)
		if err := tw.WriteHeader(&tar.Header{Name: "huge.bin", Typeflag: tar.TypeReg, Size: 1 << 40, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		tw.Flush()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := archive.Extract(ctx, io.MultiReader(&hdr, endless{}), openRoot(t, dir), "dst", archive.ExtractOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Extract = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Extract took %v to notice the cancellation", d)
		}
		assertNoTemp(t, dir)
		if _, err := os.Lstat(filepath.Join(dir, "dst/huge.bin")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("dst/huge.bin exists after a cancelled extract")
		}
	})

	t.Run("pack-mid-file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, "big.bin", randomBytes(3, 8<<20), 0o644)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		err := archive.Pack(ctx, &cancelWriter{n: 1 << 20, cancel: cancel}, openRoot(t, dir), ".")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Pack = %v, want context.Canceled", err)
		}
	})

	t.Run("already-cancelled", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		buildTree(t, dir)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		root := openRoot(t, dir)
		if err := archive.Pack(ctx, io.Discard, root, "."); !errors.Is(err, context.Canceled) {
			t.Errorf("Pack = %v, want context.Canceled", err)
		}
		if _, err := archive.Manifest(ctx, root, ".", true); !errors.Is(err, context.Canceled) {
			t.Errorf("Manifest = %v, want context.Canceled", err)
		}
		data := tarOf(t, tent{name: "a.txt", body: "a"})
		if _, err := archive.Extract(ctx, bytes.NewReader(data), root, "x", archive.ExtractOptions{}); !errors.Is(err, context.Canceled) {
			t.Errorf("Extract = %v, want context.Canceled", err)
		}
	})
}

func TestManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "d/a.txt", []byte("alpha"), 0o644)
	writeFile(t, dir, "d/sub/b.bin", randomBytes(4, 1000), 0o755)
	if err := os.Symlink("a.txt", filepath.Join(dir, "d/l")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)

	for _, hash := range []bool{false, true} {
		t.Run(fmt.Sprint("hash=", hash), func(t *testing.T) {
			t.Parallel()
			got, err := archive.Manifest(t.Context(), root, "d", hash)
			if err != nil {
				t.Fatal(err)
			}
			sum := func(b []byte) string {
				if !hash {
					return ""
				}
				return fmt.Sprintf("%x", sha256.Sum256(b))
			}
			want := []archive.ManifestEntry{
				{Path: "sub", Mode: fs.ModeDir | 0o755},
				{Path: "sub/b.bin", Size: 1000, Mode: 0o755, SHA256: sum(randomBytes(4, 1000))},
				{Path: "a.txt", Size: 5, Mode: 0o644, SHA256: sum([]byte("alpha"))},
				{Path: "l", Mode: fs.ModeSymlink | 0o777, Target: "a.txt"},
			}
			if !slices.Equal(got, want) {
				t.Errorf("Manifest =\n%+v\nwant\n%+v", got, want)
			}
			var buf bytes.Buffer
			if err := archive.Pack(t.Context(), &buf, root, "d"); err != nil {
				t.Fatal(err)
			}
			names := tarNames(t, buf.Bytes())
			for i, e := range got {
				if strings.TrimSuffix(names[i], "/") != e.Path {
					t.Errorf("Manifest entry %d is %s, Pack wrote %s", i, e.Path, names[i])
				}
			}
		})
	}

	t.Run("single-file", func(t *testing.T) {
		t.Parallel()
		got, err := archive.Manifest(t.Context(), root, "d/sub/b.bin", false)
		if err != nil || len(got) != 1 || got[0].Path != "b.bin" || got[0].Size != 1000 {
			t.Errorf("Manifest(file) = %+v, %v", got, err)
		}
	})
}

// gnuSparse builds an old-GNU sparse entry that is all hole: 8 GiB of
// zeros from a 1 KiB archive, were it extracted.
func gnuSparse(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[156] = tar.TypeGNUSparse
	copy(b[483:495], "77777777777\x00") // real size
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}
