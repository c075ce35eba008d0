//go:build linux

package local

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/archive"
)

func TestFileOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})

	writeString(t, p, id, "/workspace/a/b/c.txt", "hello\n")
	if got, err := readAll(t, p, id, "a/b/c.txt"); err != nil || string(got) != "hello\n" {
		t.Fatalf("ReadFile (relative path) = %q, %v", got, err)
	}
	if err := p.WriteFile(ctx, id, "/workspace/mode.sh", strings.NewReader("#!/bin/sh\necho run\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, p, id, "./mode.sh"); got != "run\n" {
		t.Errorf("file written with mode 0755 runs: %q", got)
	}
	fi, err := p.Stat(ctx, id, "/workspace/a/b/c.txt")
	if err != nil || fi.Size != 6 || fi.Name != "c.txt" || fi.Path != "/workspace/a/b/c.txt" || !fi.Mode.IsRegular() {
		t.Errorf("Stat = %+v, %v", fi, err)
	}
	mustRun(t, p, id, "ln -s c.txt /workspace/a/b/link")
	if fi, err := p.Stat(ctx, id, "/workspace/a/b/link"); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != "c.txt" {
		t.Errorf("Stat(link) = %+v, %v; want the link itself", fi, err)
	}
	if err := p.Mkdir(ctx, id, "/workspace/m/n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Mkdir(ctx, id, "/workspace/a/b/c.txt"); !errors.Is(err, providers.ErrExists) {
		t.Errorf("Mkdir over a file = %v, want ErrExists", err)
	}
	list, err := p.ListDir(ctx, id, "/workspace", 2)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range list {
		paths = append(paths, e.Path)
	}
	want := "/workspace/a /workspace/a/b /workspace/m /workspace/m/n /workspace/mode.sh"
	if strings.Join(paths, " ") != want {
		t.Errorf("ListDir depth 2 = %v, want %s", paths, want)
	}
	if _, err := p.ListDir(ctx, id, "/workspace/mode.sh", 1); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ListDir of a file = %v, want ErrInvalid", err)
	}
	if err := p.Rename(ctx, id, "/workspace/a", "/workspace/z"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stat(ctx, id, "/workspace/a"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Stat after rename = %v, want ErrNotFound", err)
	}
	if err := p.Remove(ctx, id, "/workspace/z", false); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("Remove(dir, non-recursive) = %v, want ErrInvalid", err)
	}
	if err := p.Remove(ctx, id, "/workspace/z", true); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove(ctx, id, "/workspace/z", true); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Remove(missing) = %v, want ErrNotFound", err)
	}
	if _, err := readAll(t, p, id, "/workspace"); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ReadFile(dir) = %v, want ErrInvalid", err)
	}
	if _, err := readAll(t, p, id, "/workspace/../etc/passwd"); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ReadFile(..) = %v, want ErrInvalid", err)
	}
	_, err = readAll(t, p, id, "/workspace/missing")
	if !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "/workspace/missing") {
		t.Errorf("ReadFile(missing) = %v, want ErrNotFound naming the path", err)
	}
	// Writes land in the sandbox layer, never on the host.
	writeString(t, p, id, "/etc/sandbox-written-"+id, "x")
	if _, err := os.Stat("/etc/sandbox-written-" + id); err == nil {
		t.Error("WriteFile to /etc reached the host")
	}
	// Unreadable, or for root the sandbox's own copy without hashes.
	if b, err := readAll(t, p, id, "/etc/shadow"); err == nil && (os.Getuid() != 0 || hasPasswordHash(b)) {
		t.Errorf("ReadFile(/etc/shadow) = %q", b)
	}
	if err := p.WriteFile(ctx, id, "/proc/self/comm", strings.NewReader("x"), 0o644); err == nil {
		t.Error("WriteFile under /proc succeeded")
	}
}

func TestReadThroughPlantedSymlinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "inside-host-dir"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, id, "ln -s /etc/hostname h && ln -s "+secret+" s && ln -s "+p.home+" d && ln -s "+hostDir+" hd && echo mine > ~/home-file")

	if got, err := readAll(t, p, id, "/workspace/h"); err != nil || string(got) != "sandbox\n" {
		t.Errorf("ReadFile(link to /etc/hostname) = %q, %v; want the sandbox's %q", got, err, "sandbox\n")
	}
	got, err := readAll(t, p, id, "/workspace/s")
	if err == nil || bytes.Contains(got, []byte("host secret")) {
		t.Errorf("ReadFile(link to a host file) = %q, %v; want an error", got, err)
	}
	list, err := p.ListDir(ctx, id, "/workspace/d", 1)
	if err != nil || len(list) != 1 || list[0].Name != "home-file" {
		t.Errorf("ListDir(link to HOME) = %+v, %v; want the sandbox's HOME, not the host's", list, err)
	}
	if _, err := p.ListDir(ctx, id, "/workspace/hd", 1); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("ListDir(link to a host dir) = %v, want ErrNotFound", err)
	}
	var buf bytes.Buffer
	if err := p.Download(ctx, id, "/workspace/s", &buf); err == nil {
		t.Error("Download(link to a host file) succeeded")
	}
	// Writing through a link never reaches the host either (the atomic
	// write replaces the link itself).
	if err := p.WriteFile(ctx, id, "/workspace/s", strings.NewReader("overwritten"), 0o644); err != nil {
		t.Logf("WriteFile through the link: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("the host file changed: %q", b)
	}
}

// errReader fails after delivering some bytes.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(b []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(b, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestWriteFileFailingReaderLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	writeString(t, p, id, "/workspace/keep.txt", "original\n")
	boom := errors.New("boom")
	for _, path := range []string{"/workspace/keep.txt", "/workspace/new.txt"} {
		err := p.WriteFile(ctx, id, path, &errReader{data: bytes.Repeat([]byte("x"), 100<<10), err: boom}, 0o644)
		if !errors.Is(err, boom) {
			t.Errorf("WriteFile(%s) with a failing reader = %v, want the reader's error", path, err)
		}
	}
	if got, _ := readAll(t, p, id, "/workspace/keep.txt"); string(got) != "original\n" {
		t.Errorf("keep.txt = %q after a failed overwrite", got)
	}
	entries, _ := os.ReadDir(workspacePath(filepath.Join(p.dir, id)))
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("workspace holds %v, want only keep.txt", names)
	}
}

// blockingReader delivers data, then blocks until closed.
type blockingReader struct {
	data []byte
	stop chan struct{}
}

func (r *blockingReader) Read(b []byte) (int, error) {
	if len(r.data) > 0 {
		n := copy(b, r.data)
		r.data = r.data[n:]
		return n, nil
	}
	<-r.stop
	return 0, io.ErrUnexpectedEOF
}

func TestUploadCancelLeavesNoPartialFile(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "done.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("ok"))
	_ = tw.WriteHeader(&tar.Header{Name: "big.bin", Mode: 0o644, Size: 10 << 20, Typeflag: tar.TypeReg})
	_, _ = tw.Write(make([]byte, 1<<20)) // only a tenth of it
	r := &blockingReader{data: buf.Bytes(), stop: make(chan struct{})}
	defer close(r.stop)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	err := p.Upload(ctx, id, "/workspace/up", r)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Upload = %v, want context.Canceled", err)
	}
	entries, _ := os.ReadDir(filepath.Join(workspacePath(filepath.Join(p.dir, id)), "up"))
	for _, e := range entries {
		if e.Name() != "done.txt" {
			t.Errorf("after a cancelled upload the destination holds %s", e.Name())
		}
	}
}

// tarOf builds an archive from entries.
func tarOf(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUploadRefusesEscapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	tests := []struct {
		name    string
		entries []*tar.Header
		escaped string // a sandbox path that must not exist afterwards
	}{
		{"dotdot", []*tar.Header{{Name: "../escaped-dotdot", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg}}, "/workspace/escaped-dotdot"},
		{"absolute", []*tar.Header{{Name: "/workspace/escaped-abs", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg}}, "/workspace/escaped-abs"},
		{"through-symlink", []*tar.Header{
			{Name: "ln", Linkname: "/workspace", Typeflag: tar.TypeSymlink},
			{Name: "ln/escaped-link", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg},
		}, "/workspace/escaped-link"},
		{"relative-symlink", []*tar.Header{
			{Name: "up", Linkname: "..", Typeflag: tar.TypeSymlink},
			{Name: "up/escaped-rel", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg},
		}, "/workspace/escaped-rel"},
		{"hardlink", []*tar.Header{{Name: "hl", Linkname: "../../etc/passwd", Typeflag: tar.TypeLink}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := "/workspace/dst-" + tc.name
			err := p.Upload(ctx, id, dst, bytes.NewReader(tarOf(t, tc.entries...)))
			if err == nil {
				t.Errorf("Upload accepted an escaping archive")
			}
			if tc.escaped != "" {
				if _, err := p.Stat(ctx, id, tc.escaped); !errors.Is(err, providers.ErrNotFound) {
					t.Errorf("Stat(%s) = %v: the archive escaped its destination", tc.escaped, err)
				}
			}
		})
	}
}

func TestUploadDownloadRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	big := make([]byte, 20<<20)
	_, _ = rand.Read(big)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []struct {
		h    tar.Header
		data []byte
	}{
		{tar.Header{Name: "./tree/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{tar.Header{Name: "tree/big.bin", Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(big))}, big},
		{tar.Header{Name: "tree/sub/small.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 6}, []byte("small\n")},
		{tar.Header{Name: "tree/link", Typeflag: tar.TypeSymlink, Linkname: "sub/small.txt"}, nil},
	}
	for _, e := range hdrs {
		if err := tw.WriteHeader(&e.h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if err := p.Upload(ctx, id, "/workspace/in", &buf); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if got := mustRun(t, p, id, "cat in/tree/link; stat -c %a in/tree/big.bin"); got != "small\n600\n" {
		t.Errorf("after upload: %q", got)
	}
	var out bytes.Buffer
	if err := p.Download(ctx, id, "/workspace/in", &out); err != nil {
		t.Fatalf("Download: %v", err)
	}
	tr := tar.NewReader(&out)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = true
		if strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "..") {
			t.Errorf("download entry %q is not relative", h.Name)
		}
		switch h.Name {
		case "tree/big.bin":
			got, _ := io.ReadAll(tr)
			if !bytes.Equal(got, big) {
				t.Errorf("big.bin came back with %d bytes, different", len(got))
			}
		case "tree/link":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != "sub/small.txt" {
				t.Errorf("link came back as %+v", h)
			}
		}
	}
	for _, name := range []string{"tree/", "tree/big.bin", "tree/sub/", "tree/sub/small.txt", "tree/link"} {
		if !seen[name] {
			t.Errorf("download lacks %s (got %v)", name, seen)
		}
	}
	out.Reset()
	if err := p.Download(ctx, id, "/workspace/in/tree/sub/small.txt", &out); err != nil {
		t.Fatal(err)
	}
	if h, err := tar.NewReader(&out).Next(); err != nil || h.Name != "small.txt" {
		t.Errorf("single-file download: %+v, %v", h, err)
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	writeString(t, p, id, "/workspace/g/a.go", "package a\nfunc Needle() {}\n")
	writeString(t, p, id, "/workspace/g/deep/b.txt", "needle\nNEEDLE\n")
	if err := p.WriteFile(ctx, id, "/workspace/g/bin.dat", bytes.NewReader([]byte("needle\x00binary")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  providers.GrepRequest
		want int
	}{
		{providers.GrepRequest{Pattern: "needle", Path: "/workspace/g"}, 1},
		{providers.GrepRequest{Pattern: "needle", Path: "/workspace/g", IgnoreCase: true}, 3},
		{providers.GrepRequest{Pattern: "needle", Path: "/workspace/g", IgnoreCase: true, Glob: "*.go"}, 1},
		{providers.GrepRequest{Pattern: "needle", Path: "/workspace/g", IgnoreCase: true, Glob: "deep/**"}, 2},
		{providers.GrepRequest{Pattern: "needle", Path: "/workspace/g", IgnoreCase: true, MaxMatches: 2}, 2},
	}
	for _, tc := range tests {
		got, err := p.Grep(ctx, id, tc.req)
		if err != nil || len(got) != tc.want {
			t.Errorf("Grep(%+v) = %v, %v; want %d matches", tc.req, got, err, tc.want)
		}
	}
	if _, err := p.Grep(ctx, id, providers.GrepRequest{Pattern: "("}); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("Grep with a bad pattern = %v, want ErrInvalid", err)
	}
	if _, err := p.Grep(ctx, id, providers.GrepRequest{Pattern: "x", Path: "/workspace/none"}); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Grep in a missing dir = %v, want ErrNotFound", err)
	}
}

// TestDeleteSweepsTrash: trees a reaper never finished (it was killed, or
// the host went down) are removed by the reaper of the next delete, and a
// delete returns before the tree is gone.
func TestDeleteSweepsTrash(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	left := filepath.Join(p.dir, trashDir, "sb-leftover.1")
	if err := os.MkdirAll(filepath.Join(left, "upper", "etc", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "upper", "etc", "deep", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, info.ID, "echo x > /etc/some-file")
	if err := p.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := p.List(context.Background(), providers.Filter{}); err != nil || len(list) != 0 {
		t.Errorf("List after Delete = %v, %v", list, err)
	}
	waitTrashEmpty(t, p)
}

func TestDeleteKeepsHostDirs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	info, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	hostFile := filepath.Join(hostDir, "precious")
	if err := os.WriteFile(hostFile, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := workspacePath(filepath.Join(p.dir, info.ID))
	if err := os.Symlink(hostDir, filepath.Join(ws, "hostlink")); err != nil {
		t.Fatal(err)
	}
	// Leave the layers in the odd states overlayfs produces: whiteouts,
	// opaque directories, a mode-000 directory.
	mustRun(t, p, info.ID, "rm -rf /usr/share/doc /etc/motd; mkdir -p /workspace/locked/inner && chmod 000 /workspace/locked/inner /workspace/locked")
	if err := p.Delete(ctx, info.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if b, err := os.ReadFile(hostFile); err != nil || string(b) != "keep" {
		t.Errorf("host file after Delete: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(p.dir, info.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("sandbox directory still there: %v", err)
	}
	// The tree went to the trash, which a detached reaper empties,
	// mode-000 directories included, without following the link.
	waitTrashEmpty(t, p)
	if b, err := os.ReadFile(hostFile); err != nil || string(b) != "keep" {
		t.Errorf("host file after the reaper: %q, %v", b, err)
	}
	if _, err := p.Get(ctx, info.ID); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}
	if err := p.Delete(ctx, info.ID); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("second Delete = %v", err)
	}
}

func TestRemoveTreeUnlocksDirs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(tree, "a", "b"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(tree, "a", "out")); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(outside, 0o555)
	_ = os.Chmod(filepath.Join(tree, "a", "b"), 0)
	_ = os.Chmod(filepath.Join(tree, "a"), 0)
	unlockDirs(tree)
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o555 {
		t.Errorf("unlockDirs followed a symlink: outside has mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Lstat(filepath.Join(tree, "a", "b")); fi.Mode().Perm() != 0o700 {
		t.Errorf("inner directory mode %v, want 0700", fi.Mode().Perm())
	}
	if err := removeTree(tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("outside removed: %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	a := newSandbox(t, p, providers.Spec{Labels: map[string]string{"team": "x", "n": "1"}})
	b := newSandbox(t, p, providers.Spec{Labels: map[string]string{"team": "x", "n": "2"}, Network: providers.NetworkOn})
	got, err := p.List(ctx, providers.Filter{Labels: map[string]string{"team": "x"}})
	if err != nil || len(got) != 2 {
		t.Fatalf("List(team=x) = %v, %v", got, err)
	}
	got, _ = p.List(ctx, providers.Filter{Labels: map[string]string{"n": "2"}})
	if len(got) != 1 || got[0].ID != b || got[0].Network != providers.NetworkOn {
		t.Errorf("List(n=2) = %+v", got)
	}
	info, err := p.Get(ctx, a)
	if err != nil || info.Network != providers.NetworkOff || info.Labels["n"] != "1" || info.State != providers.StateRunning {
		t.Errorf("Get = %+v, %v", info, err)
	}
	if _, err := p.Create(ctx, providers.Spec{Image: "ubuntu"}); !errors.Is(err, providers.ErrUnsupported) {
		t.Errorf("Create with an image = %v, want ErrUnsupported", err)
	}
	for _, bad := range []string{"", "sb-", "../x", "sb-AAAAAAAAAA", "sb-aaaaaaaaaa/../x"} {
		if _, err := p.Get(ctx, bad); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", bad, err)
		}
	}
}

// hostTree writes a random file of size bytes and a small one under a new
// directory and returns the directory, opened as a root, and the big
// file's contents.
func hostTree(t *testing.T, size int) (*os.Root, []byte) {
	t.Helper()
	dir := t.TempDir()
	big := make([]byte, size)
	_, _ = rand.Read(big)
	if err := os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tree", "big.bin"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tree", "sub", "small.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, big
}

// TestUploadDownloadPipes: an upload packed into a pipe (archive.Stream)
// is read by the init itself, and a download goes to a pipe the init
// writes; both splice file contents. Run as a sandbox's first operation
// (a cold init) and through its holder.
func TestUploadDownloadPipes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	src, big := hostTree(t, 9<<20+3)
	for i, dst := range []string{"/workspace/cold", "/workspace/warm"} {
		s, err := archive.PackPipe(ctx, src, "tree", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Upload(ctx, id, dst, s)
		s.Close()
		if err != nil {
			t.Fatalf("Upload %d: %v", i, err)
		}
		if err := s.Wait(); err != nil {
			t.Fatalf("packing %d: %v", i, err)
		}
		if got := mustRun(t, p, id, "cat "+dst+"/sub/small.txt; stat -c %s "+dst+"/big.bin"); got != "small\n9437187\n" {
			t.Errorf("after upload %d: %q", i, got)
		}

		out := t.TempDir()
		root, err := os.OpenRoot(out)
		if err != nil {
			t.Fatal(err)
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			err := p.Download(ctx, id, dst, pw)
			pw.Close()
			errc <- err
		}()
		_, xerr := archive.Extract(ctx, pr, root, ".", archive.ExtractOptions{})
		pr.Close()
		root.Close()
		if err := <-errc; err != nil || xerr != nil {
			t.Fatalf("Download %d: %v; extract: %v", i, err, xerr)
		}
		if got, err := os.ReadFile(filepath.Join(out, "big.bin")); err != nil || !bytes.Equal(got, big) {
			t.Errorf("big.bin after the round trip %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestUploadPipeFailures: a packing that fails half-way leaves no partial
// file (the init waits for the host's commit, which never comes), and an
// upload the sandbox refuses returns promptly while the packing, blocked
// on a full pipe, ends once the stream is closed.
func TestUploadPipeFailures(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	src, _ := hostTree(t, 16<<20)

	ctx, cancel := context.WithCancel(context.Background())
	s, err := archive.PackPipe(ctx, src, "tree", "", func(int64) { cancel() })
	if err != nil {
		t.Fatal(err)
	}
	err = p.Upload(context.Background(), id, "/workspace/half", s)
	s.Close()
	if err == nil {
		t.Error("Upload of a stream whose packing failed = nil")
	}
	if s.Wait() == nil {
		t.Error("the packing did not fail")
	}
	// Entries completed before the failure may stay (see
	// TestUploadCancelLeavesNoPartialFile); the file being written may not,
	// under its name or a temporary one.
	if got := mustRun(t, p, id, "ls -A /workspace/half 2>/dev/null"); strings.Contains(got, "big") || strings.Contains(got, ".sandbox") {
		t.Errorf("a failed upload left a partial file: %q", got)
	}

	mustRun(t, p, id, "echo file > /workspace/plain")
	s, err = archive.PackPipe(context.Background(), src, "tree", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Upload(context.Background(), id, "/workspace/plain/under", s); err == nil {
		t.Error("Upload under a regular file = nil")
	}
	s.Close()
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the packing of a refused upload ended without an error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the packing of a refused upload never ended")
	}
}

// TestReaperLeavesStuckTrees: a tree the reaper cannot remove is tried
// once and left to the next reaper; the reaper ends, and removes the rest.
func TestReaperLeavesStuckTrees(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("making a file immutable needs root; the CI runs this as root")
		return
	}
	trash := t.TempDir()
	if err := os.WriteFile(filepath.Join(trash, trashLock), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"stuck.1", "ok.2"} {
		if err := os.MkdirAll(filepath.Join(trash, d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(trash, d, "sub", "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stuck := filepath.Join(trash, "stuck.1", "sub", "f")
	setImmutable(t, stuck, true)
	defer setImmutable(t, stuck, false)
	done := make(chan int, 1)
	go func() { done <- runReaper(trash, nil, false) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("runReaper = %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reaper kept trying a tree it cannot remove")
	}
	if left := trashEntries(trash); len(left) != 1 || left[0] != "stuck.1" {
		t.Errorf("trash after the reaper: %v, want only the stuck tree", left)
	}
}

// setImmutable sets or clears a file's immutable attribute.
func setImmutable(t *testing.T, name string, on bool) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	const immutable = 0x10 // FS_IMMUTABLE_FL in linux/fs.h
	if on {
		flags |= immutable
	} else {
		flags &^= immutable
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		t.Fatal(err)
	}
}

// TestDownloadFileDirect: DownloadFile copies a sandbox file into a host
// file, from the host file's offset, in a stopped and a running sandbox;
// it reads inside the sandbox's view (a link to a host file the sandbox
// does not see finds nothing) and refuses a directory.
func TestDownloadFileDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 3<<16)
	want = append(want, "tail\n"...)
	for _, cold := range []bool{true, false} {
		p := newTestProvider(t)
		id := newSandbox(t, p, providers.Spec{})
		if err := p.WriteFile(ctx, id, "/workspace/f.bin", bytes.NewReader(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if cold {
			stopSandbox(t, p, id)
		}
		mustRun(t, p, id, "ln -s "+secret+" /workspace/link")
		dst, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dst.WriteString("x"); err != nil {
			t.Fatal(err)
		}
		if err := p.DownloadFile(ctx, id, "/workspace/f.bin", dst); err != nil {
			t.Fatalf("cold %v: DownloadFile: %v", cold, err)
		}
		if got, err := os.ReadFile(dst.Name()); err != nil || !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("cold %v: the host file holds %d bytes, %v; want x and the %d of the sandbox's file", cold, len(got), err, len(want))
		}
		if err := p.DownloadFile(ctx, id, "/workspace/link", dst); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("cold %v: DownloadFile of a link to a host file = %v, want ErrNotFound", cold, err)
		}
		if err := p.DownloadFile(ctx, id, "/workspace", dst); err == nil {
			t.Errorf("cold %v: DownloadFile of a directory succeeded", cold)
		}
		dst.Close()
		assertMachine(t, p, id)
	}
}

// TestUploadFileDirect: UploadFile copies a host file, from its offset,
// into the sandbox with its mode and time, in a stopped and a running
// sandbox, creating the parents and leaving no temporary file; a link
// planted in the workspace resolves inside the sandbox's view.
func TestUploadFileDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := bytes.Repeat([]byte("fedcba9876543210"), 3<<16)
	src, err := os.Create(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Write(append([]byte("skipped"), want...)); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, cold := range []bool{true, false} {
		p := newTestProvider(t)
		id := newSandbox(t, p, providers.Spec{})
		mustRun(t, p, id, "mkdir -p $HOME/elsewhere && ln -s $HOME/elsewhere /workspace/link")
		if cold {
			stopSandbox(t, p, id)
		}
		if _, err := src.Seek(int64(len("skipped")), io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if err := p.UploadFile(ctx, id, "/workspace/a/b/f.bin", src, 0o640, mtime); err != nil {
			t.Fatalf("cold %v: UploadFile: %v", cold, err)
		}
		got := mustRun(t, p, id, "stat -c '%a %s %Y' /workspace/a/b/f.bin; sha256sum < /workspace/a/b/f.bin; ls -A /workspace/a/b")
		sum := sha256.Sum256(want)
		wantOut := fmt.Sprintf("640 %d %d\n%s  -\nf.bin\n", len(want), mtime.Unix(), hex.EncodeToString(sum[:]))
		if got != wantOut {
			t.Errorf("cold %v: after UploadFile:\n%s\nwant:\n%s", cold, got, wantOut)
		}
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if err := p.UploadFile(ctx, id, "/workspace/link/x", src, 0o644, time.Time{}); err != nil {
			t.Fatalf("cold %v: UploadFile through a link: %v", cold, err)
		}
		if got := mustRun(t, p, id, "wc -c < $HOME/elsewhere/x"); strings.TrimSpace(got) != strconv.Itoa(len("skipped")+len(want)) {
			t.Errorf("cold %v: the file written through the link holds %q bytes", cold, got)
		}
		assertMachine(t, p, id)
	}
}

// TestAborted: a direct write counts as aborted once the host closed the
// control pipe, and only then.
func TestAborted(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if aborted(int(r.Fd())) {
		t.Error("aborted while the host holds the pipe open")
	}
	w.Close()
	if !aborted(int(r.Fd())) {
		t.Error("not aborted after the host closed the pipe")
	}
}
