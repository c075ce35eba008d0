package providertest

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// fileChecks checks the file operations and that files are shared with Exec.
func (s *suite) fileChecks(t *testing.T) {
	id := s.create(t, "files").ID
	const base = "/workspace/pt-files"

	roundTrips := []struct {
		name string
		path string
		data []byte
	}{
		{"text", base + "/rt/hello.txt", []byte("hello, sandbox\nsecond line\n")},
		{"empty", base + "/rt/empty.txt", []byte{}},
		{"binary-1MiB", base + "/rt/random.bin", randomBytes(1, 1<<20)},
	}
	for _, tc := range roundTrips {
		t.Run("roundtrip-"+tc.name, func(t *testing.T) {
			t.Parallel()
			s.mustWrite(t, id, tc.path, tc.data)
			got, err := s.readAll(t, id, tc.path)
			if err != nil {
				t.Fatalf("ReadFile(%s) after WriteFile: %v", tc.path, err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Errorf("ReadFile(%s): got %d bytes, want the %d bytes written (%s)", tc.path, len(got), len(tc.data), firstDiff(got, tc.data))
			}
			fi, err := s.stat(t, id, tc.path)
			if err != nil {
				t.Fatalf("Stat(%s): %v", tc.path, err)
			}
			if fi.Size != int64(len(tc.data)) || !fi.Mode.IsRegular() || fi.IsDir() {
				t.Errorf("Stat(%s) = size %d, mode %v; want size %d, a regular file", tc.path, fi.Size, fi.Mode, len(tc.data))
			}
		})
	}

	t.Run("overwrite", func(t *testing.T) {
		t.Parallel()
		p := base + "/overwrite.txt"
		s.mustWrite(t, id, p, []byte("a much longer first version\n"))
		s.mustWrite(t, id, p, []byte("short\n"))
		if got, err := s.readAll(t, id, p); err != nil || string(got) != "short\n" {
			t.Errorf("ReadFile(%s) after a second WriteFile = %q, %v; want %q (the file is replaced, not patched)", p, got, err, "short\n")
		}
	})

	t.Run("creates-parents", func(t *testing.T) {
		t.Parallel()
		p := base + "/parents/a/b/c/file.txt"
		s.mustWrite(t, id, p, []byte("deep\n"))
		for _, dir := range []string{base + "/parents/a", base + "/parents/a/b", base + "/parents/a/b/c"} {
			fi, err := s.stat(t, id, dir)
			if err != nil {
				t.Errorf("Stat(%s) after WriteFile(%s): %v; want the parent created", dir, p, err)
				continue
			}
			if !fi.IsDir() {
				t.Errorf("Stat(%s).Mode = %v, want a directory", dir, fi.Mode)
			}
		}
	})

	t.Run("stat", func(t *testing.T) {
		t.Parallel()
		dir := base + "/stat"
		p := dir + "/f.txt"
		s.mustWrite(t, id, p, []byte("12345"))
		fi, err := s.stat(t, id, p)
		if err != nil {
			t.Fatalf("Stat(%s): %v", p, err)
		}
		if fi.Path != p || fi.Name != "f.txt" || fi.Size != 5 || !fi.Mode.IsRegular() {
			t.Errorf("Stat(%s) = %+v; want Path %s, Name f.txt, Size 5, a regular file", p, fi, p)
		}
		if fi.ModTime.IsZero() {
			t.Errorf("Stat(%s).ModTime is zero", p)
		}
		di, err := s.stat(t, id, dir)
		if err != nil {
			t.Fatalf("Stat(%s): %v", dir, err)
		}
		if !di.IsDir() || di.Path != dir || di.Name != "stat" {
			t.Errorf("Stat(%s) = %+v; want a directory with Path %s, Name stat", dir, di, dir)
		}
	})

	t.Run("missing-path", func(t *testing.T) {
		t.Parallel()
		p := base + "/no/such/file.txt"
		if _, err := s.readAll(t, id, p); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("ReadFile(%s): err = %v, want one matching ErrNotFound", p, err)
		}
		if _, err := s.stat(t, id, p); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat(%s): err = %v, want one matching ErrNotFound", p, err)
		}
		ctx, cancel := callCtx(t)
		defer cancel()
		if _, err := s.p.ListDir(ctx, id, base+"/no/such", 1); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("ListDir(%s): err = %v, want one matching ErrNotFound", base+"/no/such", err)
		}
	})

	t.Run("listdir", func(t *testing.T) {
		t.Parallel()
		dir := base + "/list"
		s.mustWrite(t, id, dir+"/a.txt", []byte("a"))
		s.mustWrite(t, id, dir+"/sub/b.txt", []byte("bb"))
		s.mustWrite(t, id, dir+"/sub/deeper/c.txt", []byte("ccc"))
		s.mustMkdir(t, id, dir+"/empty")

		want := map[int][]string{
			1: {dir + "/a.txt", dir + "/empty", dir + "/sub"},
			2: {dir + "/a.txt", dir + "/empty", dir + "/sub", dir + "/sub/b.txt", dir + "/sub/deeper"},
			3: {dir + "/a.txt", dir + "/empty", dir + "/sub", dir + "/sub/b.txt", dir + "/sub/deeper", dir + "/sub/deeper/c.txt"},
		}
		sizes := map[string]int64{dir + "/a.txt": 1, dir + "/sub/b.txt": 2, dir + "/sub/deeper/c.txt": 3}
		dirs := map[string]bool{dir + "/empty": true, dir + "/sub": true, dir + "/sub/deeper": true}
		for depth := 1; depth <= 3; depth++ {
			ctx, cancel := callCtx(t)
			got, err := s.p.ListDir(ctx, id, dir, depth)
			cancel()
			if err != nil {
				t.Fatalf("ListDir(%s, depth %d): %v", dir, depth, err)
			}
			var paths []string
			for _, fi := range got {
				paths = append(paths, fi.Path)
				if fi.Name != path.Base(fi.Path) {
					t.Errorf("ListDir(%s, depth %d): entry %s has Name %q, want %q", dir, depth, fi.Path, fi.Name, path.Base(fi.Path))
				}
				if fi.IsDir() != dirs[fi.Path] {
					t.Errorf("ListDir(%s, depth %d): entry %s IsDir = %v, want %v", dir, depth, fi.Path, fi.IsDir(), dirs[fi.Path])
				}
				if size, ok := sizes[fi.Path]; ok && fi.Size != size {
					t.Errorf("ListDir(%s, depth %d): entry %s Size = %d, want %d", dir, depth, fi.Path, fi.Size, size)
				}
			}
			slices.Sort(paths)
			if !slices.Equal(paths, want[depth]) {
				t.Errorf("ListDir(%s, depth %d) paths =\n  %s\nwant\n  %s", dir, depth, strings.Join(paths, "\n  "), strings.Join(want[depth], "\n  "))
			}
		}
	})

	t.Run("mkdir", func(t *testing.T) {
		t.Parallel()
		dir := base + "/mkdir/x/y/z"
		s.mustMkdir(t, id, dir)
		fi, err := s.stat(t, id, dir)
		if err != nil || !fi.IsDir() {
			t.Fatalf("Stat(%s) after Mkdir = %+v, %v; want a directory", dir, fi, err)
		}
		ctx, cancel := callCtx(t)
		defer cancel()
		if err := s.p.Mkdir(ctx, id, dir); err != nil {
			t.Errorf("Mkdir(%s) of an existing directory: %v; want nil (Mkdir creates missing parents, like mkdir -p)", dir, err)
		}
	})

	t.Run("rename", func(t *testing.T) {
		t.Parallel()
		dir := base + "/rename"
		from, to := dir+"/from.txt", dir+"/to.txt"
		s.mustWrite(t, id, from, []byte("moved\n"))
		ctx, cancel := callCtx(t)
		defer cancel()
		if err := s.p.Rename(ctx, id, from, to); err != nil {
			t.Fatalf("Rename(%s, %s): %v", from, to, err)
		}
		if _, err := s.stat(t, id, from); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat(%s) after Rename: err = %v, want one matching ErrNotFound", from, err)
		}
		if got, err := s.readAll(t, id, to); err != nil || string(got) != "moved\n" {
			t.Errorf("ReadFile(%s) after Rename = %q, %v; want %q", to, got, err, "moved\n")
		}
		// A directory moves with its contents.
		s.mustWrite(t, id, dir+"/d1/inner.txt", []byte("inner\n"))
		if err := s.p.Rename(ctx, id, dir+"/d1", dir+"/d2"); err != nil {
			t.Fatalf("Rename(%s, %s): %v", dir+"/d1", dir+"/d2", err)
		}
		if got, err := s.readAll(t, id, dir+"/d2/inner.txt"); err != nil || string(got) != "inner\n" {
			t.Errorf("ReadFile(%s) after renaming its directory = %q, %v; want %q", dir+"/d2/inner.txt", got, err, "inner\n")
		}
		if _, err := s.stat(t, id, dir+"/d1"); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat(%s) after Rename: err = %v, want one matching ErrNotFound", dir+"/d1", err)
		}
	})

	t.Run("remove", func(t *testing.T) {
		t.Parallel()
		dir := base + "/remove"
		file := dir + "/file.txt"
		s.mustWrite(t, id, file, []byte("x"))
		s.mustWrite(t, id, dir+"/tree/sub/leaf.txt", []byte("y"))
		ctx, cancel := callCtx(t)
		defer cancel()
		if err := s.p.Remove(ctx, id, file, false); err != nil {
			t.Fatalf("Remove(%s, recursive=false): %v", file, err)
		}
		if _, err := s.stat(t, id, file); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat(%s) after Remove: err = %v, want one matching ErrNotFound", file, err)
		}
		tree := dir + "/tree"
		if err := s.p.Remove(ctx, id, tree, false); err == nil {
			t.Errorf("Remove(%s, recursive=false) of a non-empty directory succeeded, want an error", tree)
		}
		if fi, err := s.stat(t, id, dir+"/tree/sub/leaf.txt"); err != nil || fi.Size != 1 {
			t.Errorf("Stat(%s) after a refused Remove = %+v, %v; want the file intact", dir+"/tree/sub/leaf.txt", fi, err)
		}
		if err := s.p.Remove(ctx, id, tree, true); err != nil {
			t.Fatalf("Remove(%s, recursive=true): %v", tree, err)
		}
		if _, err := s.stat(t, id, tree); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat(%s) after a recursive Remove: err = %v, want one matching ErrNotFound", tree, err)
		}
	})

	t.Run("visible-to-exec", func(t *testing.T) {
		t.Parallel()
		p := base + "/shared/from-api.txt"
		s.mustWrite(t, id, p, []byte("written by WriteFile\n"))
		req := providers.ExecRequest{Argv: []string{"cat", p}}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 || out.stdout != "written by WriteFile\n" {
			t.Errorf("Exec(%s) = stdout %q, exit %d, err %v, stderr %q; want the file WriteFile wrote", describe(req), out.stdout, out.res.ExitCode, out.err, out.stderr)
		}
	})

	t.Run("written-by-exec", func(t *testing.T) {
		t.Parallel()
		dir := base + "/from-exec"
		s.mustMkdir(t, id, dir)
		p := dir + "/out.txt"
		req := providers.ExecRequest{Shell: "echo written by exec > " + p}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 {
			t.Fatalf("Exec(%s): exit %d, err %v, stderr %q", describe(req), out.res.ExitCode, out.err, out.stderr)
		}
		if got, err := s.readAll(t, id, p); err != nil || string(got) != "written by exec\n" {
			t.Errorf("ReadFile(%s) = %q, %v; want what Exec wrote (%q)", p, got, err, "written by exec\n")
		}
	})
}

// firstDiff describes where two byte slices first differ.
func firstDiff(got, want []byte) string {
	n := min(len(got), len(want))
	for i := range n {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d: got %#02x, want %#02x", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("equal for the first %d bytes", n)
	}
	return "identical"
}
