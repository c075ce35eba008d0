package execfs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/execfs"
)

// hostFS runs the helper's scripts with this machine's /bin/sh, find and
// tar: the same programs a sandbox runs them with.
func hostFS() *execfs.FS {
	return &execfs.FS{
		Provider: "test",
		Exec: func(ctx context.Context, _, script string, stdout, stderr io.Writer) (int, error) {
			cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
			cmd.Stdout, cmd.Stderr = stdout, stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return ee.ExitCode(), nil
			}
			return 0, err
		},
		Put: func(_ context.Context, _, p string, r io.Reader) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, r); err != nil {
				f.Close()
				os.Remove(p)
				return err
			}
			return f.Close()
		},
		Get: func(_ context.Context, _, p string, w io.Writer) error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		},
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/a b", "'/a b'"},
		{"it's", `'it'\''s'`},
		{"-rf", "'./-rf'"},
		{"$(x)`y`", "'$(x)`y`'"},
	} {
		if got, err := execfs.Quote(tc.in); err != nil || got != tc.want {
			t.Errorf("Quote(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "a\x00b"} {
		if _, err := execfs.Quote(bad); !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("Quote(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// awkward are names a shell would misread unquoted.
var awkward = []string{"plain", "with space", "it's", "-dash", "new\nline", "$(touch pwned)", "tab\there"}

func TestOperations(t *testing.T) {
	ctx := t.Context()
	f := hostFS()
	dir := t.TempDir()
	for _, n := range awkward {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("plain", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	t.Run("stat", func(t *testing.T) {
		for _, n := range awkward {
			fi, err := f.Stat(ctx, "", filepath.Join(dir, n))
			if err != nil || fi.Name != n || fi.Size != int64(len(n)) || fi.Mode != 0o640 {
				t.Errorf("Stat(%q) = %+v, %v", n, fi, err)
			}
		}
		fi, err := f.Stat(ctx, "", filepath.Join(dir, "link"))
		if err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != "plain" {
			t.Errorf("Stat(link) = %+v, %v; want a symlink to plain", fi, err)
		}
		if _, err := f.Stat(ctx, "", filepath.Join(dir, "missing")); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat(missing): %v, want ErrNotFound", err)
		}
		if _, err := os.Stat("pwned"); err == nil {
			t.Error("a file name ran as a command")
		}
	})

	t.Run("list", func(t *testing.T) {
		one, err := f.ListDir(ctx, "", dir, 1)
		if err != nil {
			t.Fatalf("ListDir: %v", err)
		}
		var names []string
		for _, fi := range one {
			names = append(names, fi.Name)
			if fi.Path != filepath.Join(dir, fi.Name) {
				t.Errorf("entry %q has path %q", fi.Name, fi.Path)
			}
		}
		want := append(slices.Clone(awkward), "sub", "link")
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("ListDir depth 1 = %q, want %q", names, want)
		}
		two, err := f.ListDir(ctx, "", dir, 2)
		if err != nil || len(two) != len(one)+1 {
			t.Errorf("ListDir depth 2: %d entries, %v; want %d", len(two), err, len(one)+1)
		}
		if _, err := f.ListDir(ctx, "", filepath.Join(dir, "plain"), 1); !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("ListDir(a file): %v, want ErrInvalid", err)
		}
		if _, err := f.ListDir(ctx, "", filepath.Join(dir, "nope"), 1); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("ListDir(missing): %v, want ErrNotFound", err)
		}
	})

	t.Run("mkdir remove rename", func(t *testing.T) {
		if err := f.Mkdir(ctx, "", filepath.Join(dir, "m k", "d")); err != nil {
			t.Errorf("Mkdir: %v", err)
		}
		if err := f.Mkdir(ctx, "", filepath.Join(dir, "plain")); !errors.Is(err, providers.ErrExists) {
			t.Errorf("Mkdir over a file: %v, want ErrExists", err)
		}
		if err := f.Remove(ctx, "", filepath.Join(dir, "sub"), false); !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("Remove(a full directory, not recursive): %v, want ErrInvalid", err)
		}
		if err := f.Remove(ctx, "", filepath.Join(dir, "sub"), true); err != nil {
			t.Errorf("Remove(recursive): %v", err)
		}
		if err := f.Remove(ctx, "", filepath.Join(dir, "sub"), true); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Remove(missing): %v, want ErrNotFound", err)
		}
		if err := f.Rename(ctx, "", filepath.Join(dir, "it's"), filepath.Join(dir, "new dir", "-moved")); err != nil {
			t.Errorf("Rename: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "new dir", "-moved")); err != nil || string(b) != "it's" {
			t.Errorf("after Rename: %q, %v", b, err)
		}
	})
}

func TestTransfer(t *testing.T) {
	ctx := t.Context()
	f := hostFS()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, n := range awkward {
		_ = tw.WriteHeader(&tar.Header{Name: "d/" + n, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(n))})
		_, _ = tw.Write([]byte(n))
	}
	_ = tw.WriteHeader(&tar.Header{Name: "d/ln", Typeflag: tar.TypeSymlink, Linkname: "plain"})
	_ = tw.Close()
	dst := filepath.Join(t.TempDir(), "up load")
	if err := f.Upload(ctx, "", dst, bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	for _, n := range awkward {
		if b, err := os.ReadFile(filepath.Join(dst, "d", n)); err != nil || string(b) != n {
			t.Errorf("uploaded %q: %q, %v", n, b, err)
		}
	}

	var out bytes.Buffer
	if err := f.Download(ctx, "", filepath.Join(dst, "d"), &out); err != nil {
		t.Fatalf("Download: %v", err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the download: %v", err)
		}
		b, _ := io.ReadAll(tr)
		got[hdr.Name] = string(b)
	}
	for _, n := range awkward {
		if got[n] != n {
			t.Errorf("downloaded entry %q = %q (entries %q)", n, got[n], slices.Sorted(maps.Keys(got)))
		}
	}
	var single bytes.Buffer
	if err := f.Download(ctx, "", filepath.Join(dst, "d", "-dash"), &single); err != nil {
		t.Fatalf("Download(file): %v", err)
	}
	if hdr, err := tar.NewReader(&single).Next(); err != nil || hdr.Name != "-dash" {
		t.Errorf("Download(file): first entry %+v, %v; want -dash", hdr, err)
	}
	if err := f.Download(ctx, "", filepath.Join(dst, "missing"), io.Discard); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Download(missing): %v, want ErrNotFound", err)
	}

	for _, bad := range []tar.Header{
		{Name: "../up", Typeflag: tar.TypeReg},
		{Name: "/abs", Typeflag: tar.TypeReg},
		{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../etc"},
		{Name: "h", Typeflag: tar.TypeLink, Linkname: "d/plain"},
	} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		_ = tw.WriteHeader(&tar.Header{Name: "first", Typeflag: tar.TypeReg, Mode: 0o644})
		hdr := bad
		_ = tw.WriteHeader(&hdr)
		_ = tw.Close()
		to := filepath.Join(t.TempDir(), "refused")
		if err := f.Upload(ctx, "", to, &b); err == nil {
			t.Errorf("Upload with entry %q -> %q succeeded", bad.Name, bad.Linkname)
		}
		if _, err := os.Stat(filepath.Join(to, "first")); err == nil {
			t.Errorf("a refused archive (%q) left its first entry", bad.Name)
		}
	}
}
