package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
	"github.com/agentbox/sandbox/providers/fake"
)

// newSandbox returns a fake provider and the id of a fresh sandbox in it.
func newSandbox(t *testing.T) (*fake.Provider, string) {
	t.Helper()
	p := fake.New()
	info, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	return p, info.ID
}

func TestViaFilesRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	buildTree(t, filepath.Join(src, "tree"))
	var packed bytes.Buffer
	if err := archive.Pack(t.Context(), &packed, openRoot(t, src), "tree"); err != nil {
		t.Fatal(err)
	}
	p, id := newSandbox(t)
	if err := archive.UploadViaFiles(t.Context(), p, id, "/workspace/up", bytes.NewReader(packed.Bytes())); err != nil {
		t.Fatalf("UploadViaFiles: %v", err)
	}
	fi, err := p.Stat(t.Context(), id, "/workspace/up/nested/abs-link")
	if err != nil || fi.Target != "/etc/passwd" {
		t.Errorf("Stat(abs-link) = %+v, %v; want a symlink entry to /etc/passwd", fi, err)
	}

	var down bytes.Buffer
	if err := archive.DownloadViaFiles(t.Context(), p, id, "/workspace/up", &down); err != nil {
		t.Fatalf("DownloadViaFiles: %v", err)
	}
	if got, want := tarNames(t, down.Bytes()), tarNames(t, packed.Bytes()); !slices.Equal(got, want) {
		t.Errorf("DownloadViaFiles names = %q\nPack names = %q", got, want)
	}
	if _, err := archive.Extract(t.Context(), &down, openRoot(t, dst), "copy", archive.ExtractOptions{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	compareTrees(t, describeTree(t, filepath.Join(dst, "copy")), describeTree(t, filepath.Join(src, "tree")))
}

func TestDownloadViaFilesSingle(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t)
	if err := p.WriteFile(t.Context(), id, "/workspace/dir/a.txt", bytes.NewReader([]byte("hello")), 0o640); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := archive.DownloadViaFiles(t.Context(), p, id, "/workspace/dir/a.txt", &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "a.txt" || hdr.Size != 5 || hdr.Mode != 0o640 {
		t.Fatalf("first entry = %+v, %v; want a.txt, 5 bytes, mode 0640", hdr, err)
	}
	if body, _ := io.ReadAll(tr); string(body) != "hello" {
		t.Errorf("body = %q", body)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("second entry: err = %v, want io.EOF (one entry only)", err)
	}

	err = archive.DownloadViaFiles(t.Context(), p, id, "/workspace/missing", io.Discard)
	if !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("DownloadViaFiles(missing) = %v, want ErrNotFound", err)
	}
}

func TestUploadViaFilesRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []tent
		kind    error
	}{
		{"parent", []tent{{name: "../x", body: "x"}}, providers.ErrInvalid},
		{"absolute", []tent{{name: "/etc/x", body: "x"}}, providers.ErrInvalid},
		{"climb", []tent{{name: "a/../../x", body: "x"}}, providers.ErrInvalid},
		{"hard-link", []tent{{name: "h", typ: tar.TypeLink, linkname: "a"}}, providers.ErrUnsupported},
		{"device", []tent{{name: "null", typ: tar.TypeChar}}, providers.ErrUnsupported},
		{"through-symlink", []tent{{name: "l", typ: tar.TypeSymlink, linkname: "/etc"}, {name: "l/passwd", body: "x"}}, providers.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, id := newSandbox(t)
			err := archive.UploadViaFiles(t.Context(), p, id, "/workspace/up", bytes.NewReader(tarOf(t, tc.entries...)))
			if !errors.Is(err, tc.kind) {
				t.Errorf("UploadViaFiles = %v, want an error matching %v", err, tc.kind)
			}
			for _, path := range []string{"/workspace/x", "/x", "/etc/x", "/etc/passwd"} {
				if _, err := p.Stat(t.Context(), id, path); !errors.Is(err, providers.ErrNotFound) {
					t.Errorf("%s exists after a refused upload (err %v)", path, err)
				}
			}
		})
	}
}

// noSymlinks hides the fake's Symlink method.
type noSymlinks struct{ providers.Provider }

func TestUploadViaFilesWithoutSymlinker(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t)
	data := tarOf(t, tent{name: "l", typ: tar.TypeSymlink, linkname: "a"})
	err := archive.UploadViaFiles(t.Context(), noSymlinks{p}, id, "/workspace/up", bytes.NewReader(data))
	if !errors.Is(err, providers.ErrUnsupported) {
		t.Errorf("UploadViaFiles of a symlink without Symlinker = %v, want ErrUnsupported", err)
	}
}

func TestViaFilesCancel(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t)
	if err := p.WriteFile(t.Context(), id, "/workspace/a.txt", bytes.NewReader([]byte("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := archive.DownloadViaFiles(ctx, p, id, "/workspace", io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("DownloadViaFiles = %v, want context.Canceled", err)
	}
	data := tarOf(t, tent{name: "b.txt", body: "b"})
	if err := archive.UploadViaFiles(ctx, p, id, "/workspace", bytes.NewReader(data)); !errors.Is(err, context.Canceled) {
		t.Errorf("UploadViaFiles = %v, want context.Canceled", err)
	}
	if _, err := p.Stat(t.Context(), id, "/workspace/b.txt"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("b.txt written by a cancelled upload (err %v)", err)
	}
}

// A failing archive leaves no partial file in the sandbox.
func TestUploadViaFilesNoPartial(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t)
	big := string(randomBytes(7, 1<<20))
	data := tarOf(t, tent{name: "big.bin", body: big})
	r := &failingReader{r: bytes.NewReader(data), n: len(data) / 2}
	if err := archive.UploadViaFiles(t.Context(), p, id, "/workspace", r); !errors.Is(err, errBroken) {
		t.Errorf("UploadViaFiles = %v, want the reader's error", err)
	}
	if _, err := p.Stat(t.Context(), id, "/workspace/big.bin"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("big.bin exists after a failed upload (err %v)", err)
	}
}
