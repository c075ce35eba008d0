package providertest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// entry is one tar entry reduced to what the transfer checks compare.
type entry struct {
	dir  bool
	size int64
	sum  [sha256.Size]byte
}

func (e entry) String() string {
	if e.dir {
		return "dir"
	}
	return fmt.Sprintf("file %d bytes sha256 %x", e.size, e.sum[:6])
}

// transferChecks uploads a tar and downloads it back.
func (s *suite) transferChecks(t *testing.T) {
	id := s.create(t, "transfer").ID
	const dst = "/workspace/pt-transfer/new/dst" // does not exist yet

	files := map[string][]byte{
		"top.txt":               []byte("top level\n"),
		"tree/a.txt":            []byte("alpha\n"),
		"tree/empty-file":       {},
		"tree/sub/b.txt":        []byte("beta\n"),
		"tree/sub/deep/big.bin": randomBytes(5, 5<<20),
	}
	dirs := []string{"tree", "tree/sub", "tree/sub/deep", "tree/empty-dir"}
	tarball, want := buildTar(t, dirs, files)

	t.Run("upload", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		if err := s.p.Upload(ctx, id, dst, bytes.NewReader(tarball)); err != nil {
			t.Fatalf("Upload(%s, %d-byte tar): %v", dst, len(tarball), err)
		}
		for name, data := range files {
			p := dst + "/" + name
			fi, err := s.stat(t, id, p)
			if err != nil {
				t.Errorf("Stat(%s) after Upload: %v", p, err)
				continue
			}
			if fi.Size != int64(len(data)) {
				t.Errorf("Stat(%s).Size after Upload = %d, want %d", p, fi.Size, len(data))
			}
		}
		p := dst + "/tree/sub/deep/big.bin"
		if got, err := s.readAll(t, id, p); err != nil || !bytes.Equal(got, files["tree/sub/deep/big.bin"]) {
			t.Errorf("ReadFile(%s) after Upload: %d bytes, err %v; want the %d uploaded bytes (%s)", p, len(got), err, len(files["tree/sub/deep/big.bin"]), firstDiff(got, files["tree/sub/deep/big.bin"]))
		}
		if fi, err := s.stat(t, id, dst+"/tree/empty-dir"); err != nil || !fi.IsDir() {
			t.Errorf("Stat(%s) after Upload = %+v, %v; want an empty directory", dst+"/tree/empty-dir", fi, err)
		}
	})

	t.Run("download-dir", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		var buf bytes.Buffer
		if err := s.p.Download(ctx, id, dst, &buf); err != nil {
			t.Fatalf("Download(%s): %v", dst, err)
		}
		got, err := readTar(&buf)
		if err != nil {
			t.Fatalf("Download(%s) produced an unreadable tar: %v", dst, err)
		}
		compareEntries(t, "Download("+dst+")", got, want)
	})

	t.Run("download-file", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		src := dst + "/tree/a.txt"
		var buf bytes.Buffer
		if err := s.p.Download(ctx, id, src, &buf); err != nil {
			t.Fatalf("Download(%s): %v", src, err)
		}
		got, err := readTar(&buf)
		if err != nil {
			t.Fatalf("Download(%s) produced an unreadable tar: %v", src, err)
		}
		compareEntries(t, "Download("+src+")", got, map[string]entry{"a.txt": fileEntry(files["tree/a.txt"])})
	})

	t.Run("upload-overwrites", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		small, _ := buildTar(t, nil, map[string][]byte{"top.txt": []byte("replaced\n")})
		if err := s.p.Upload(ctx, id, dst, bytes.NewReader(small)); err != nil {
			t.Fatalf("Upload(%s) over an existing file: %v", dst, err)
		}
		if got, err := s.readAll(t, id, dst+"/top.txt"); err != nil || string(got) != "replaced\n" {
			t.Errorf("ReadFile(%s) after a second Upload = %q, %v; want %q", dst+"/top.txt", got, err, "replaced\n")
		}
	})

	t.Run("download-missing", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		src := "/workspace/pt-transfer/no-such-dir"
		if err := s.p.Download(ctx, id, src, io.Discard); err == nil {
			t.Errorf("Download(%s) of a missing path succeeded, want an error", src)
		} else if !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Download(%s): err = %v, want one matching ErrNotFound", src, err)
		}
	})
}

// buildTar writes dirs and files into a tar stream, directories first, and
// returns it with the entries a faithful download must reproduce.
func buildTar(t *testing.T, dirs []string, files map[string][]byte) ([]byte, map[string]entry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	want := map[string]entry{}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatalf("building tar: %v", err)
		}
		want[d] = entry{dir: true}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatalf("building tar: %v", err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatalf("building tar: %v", err)
		}
		want[name] = fileEntry(data)
		// Parents not named explicitly still come back as directories.
		for dir := name; strings.Contains(dir, "/"); {
			dir = dir[:strings.LastIndex(dir, "/")]
			want[dir] = entry{dir: true}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("building tar: %v", err)
	}
	return buf.Bytes(), want
}

func fileEntry(data []byte) entry {
	return entry{size: int64(len(data)), sum: sha256.Sum256(data)}
}

// readTar reads a tar stream into entries keyed by clean relative name. A
// leading "./" and a trailing "/" are ignored, as is an entry for the root
// itself.
func readTar(r io.Reader) (map[string]entry, error) {
	got := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		if _, dup := got[name]; dup {
			return got, fmt.Errorf("entry %q appears twice", name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			got[name] = entry{dir: true}
		case tar.TypeReg:
			h := sha256.New()
			n, err := io.Copy(h, tr)
			if err != nil {
				return got, fmt.Errorf("entry %q: %w", name, err)
			}
			if n != hdr.Size {
				return got, fmt.Errorf("entry %q: header says %d bytes, read %d", name, hdr.Size, n)
			}
			e := entry{size: n}
			copy(e.sum[:], h.Sum(nil))
			got[name] = e
		default:
			return got, fmt.Errorf("entry %q has unexpected type %q", name, hdr.Typeflag)
		}
	}
}

// compareEntries reports every difference between got and want.
func compareEntries(t *testing.T, op string, got, want map[string]entry) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: entry %q is missing (want %v)", op, name, want[name])
		case g != want[name]:
			t.Errorf("%s: entry %q is %v, want %v", op, name, g, want[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected entry %q (%v)", op, name, got[name])
		}
	}
}
