//go:build linux

package local

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/providers"
)

// Path rules against symlinks made inside a real sandbox: the gate decides
// on where a path leads in the sandbox, and the operation then follows no
// symlink, so a link swapped in after the decision cannot redirect it.

// linkSetup plants, in /workspace, a secret and links to it of every
// shape, links out of the workspace and into .git, and a link to an
// ordinary directory.
const linkSetup = `set -e
cd /workspace
mkdir -p secrets/inner pub .git/hooks outside
echo topsecret > secrets/key
echo public > pub/a.txt
echo hello > a.txt
ln -s /workspace/secrets alias
ln -s secrets relalias
ln -s chain2 chain1
ln -s /workspace/chain3 chain2
ln -s ./relalias chain3
ln -s /workspace/secrets/inner deep
ln -s deep/.. up
ln -s /etc etclink
ln -s .git gitalias
ln -s pub public
ln -s ../../workspace/./secrets/../secrets dotted
ln -s loop loop
ln -s secrets/key keylink
`

// linkPolicy denies the secrets and .git, allows writing in the workspace
// only, and asks about anything else an agent wants to change.
const linkPolicy = `default: ask
allow: ["write:/workspace/**", "upload:/workspace/**", "delete:/workspace/**", "edit:/workspace/**"]
deny: ["read:/workspace/secrets/**", "list:/workspace/secrets", "list:/workspace/secrets/**",
       "download:/workspace/secrets", "download:/workspace/secrets/**",
       "write:/workspace/secrets/**", "delete:/workspace/secrets/**", "edit:/workspace/secrets/**",
       "write:/workspace/.git/**", "upload:/workspace/.git/**"]
`

// oneFile is a tar stream of one regular file of 8 bytes.
func oneFile(t *testing.T, name string) io.Reader {
	t.Helper()
	return bytes.NewReader(tarOf(t, &tar.Header{Name: name, Mode: 0o644, Size: 8, Typeflag: tar.TypeReg}))
}

func TestSymlinkRulesLocalGate(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, linkSetup)

	var mu sync.Mutex
	var asked []approval.Request
	g := approval.NewGate(p, approval.GateOptions{
		Policy: mustParsePolicy(t, linkPolicy),
		Approver: approval.ApproverFunc(func(ctx context.Context, req approval.Request) (approval.Decision, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req)
			return approval.Decision{Reason: "no"}, nil
		}),
	})
	ctx := approval.WithSource(context.Background(), approval.SourceAgent)
	read := func(path string) func() error {
		return func() error {
			rc, err := g.ReadFile(ctx, id, path)
			if err != nil {
				return err
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if bytes.Contains(b, []byte("topsecret")) {
				t.Errorf("ReadFile(%s) returned the secret", path)
			}
			return err
		}
	}
	write := func(path string) func() error {
		return func() error { return g.WriteFile(ctx, id, path, strings.NewReader("pwned\n"), 0o644) }
	}
	cases := []struct {
		name string
		call func() error
		// ask: the approver is asked (and refuses), shown where the
		// path resolves; otherwise a denial without asking.
		ask      bool
		resolved string
	}{
		{"read through absolute link", read("/workspace/alias/key"), false, "/workspace/secrets/key"},
		{"read through relative link", read("/workspace/relalias/key"), false, "/workspace/secrets/key"},
		{"read through a chain of links", read("/workspace/chain1/key"), false, "/workspace/secrets/key"},
		{"read with .. after a link", read("/workspace/up/key"), false, "/workspace/secrets/key"},
		{"read through a link with . and ..", read("/workspace/dotted/key"), false, "/workspace/secrets/key"},
		{"read of a final link", read("/workspace/keylink"), false, "/workspace/secrets/key"},
		{"stat through link", func() error { _, err := g.Stat(ctx, id, "/workspace/alias/key"); return err }, false, "/workspace/secrets/key"},
		{"ls of a linked dir", func() error { _, err := g.ListDir(ctx, id, "/workspace/chain1", 1); return err }, false, "/workspace/secrets"},
		{"glob root through link", func() error { _, err := g.Glob(ctx, id, "/workspace/alias", "**"); return err }, false, "/workspace/secrets"},
		{"grep root through link", func() error {
			_, err := g.Grep(ctx, id, providers.GrepRequest{Pattern: "top", Path: "/workspace/up"})
			return err
		}, false, "/workspace/secrets"},
		{"download through link", func() error {
			var buf bytes.Buffer
			err := g.Download(ctx, id, "/workspace/relalias", &buf)
			if bytes.Contains(buf.Bytes(), []byte("topsecret")) {
				t.Error("Download returned the secret")
			}
			return err
		}, false, "/workspace/secrets"},
		{"write through link out of the tree", write("/workspace/etclink/pwned"), true, "/etc/pwned"},
		{"write through link into .git/hooks", write("/workspace/gitalias/hooks/pre-commit"), false, "/workspace/.git/hooks/pre-commit"},
		{"write through link into the secrets", write("/workspace/chain1/key"), false, "/workspace/secrets/key"},
		{"edit through link", func() error { _, err := g.Edit(ctx, id, "/workspace/alias/key", "top", "no", false); return err }, false, "/workspace/secrets/key"},
		{"mkdir through link", func() error { return g.Mkdir(ctx, id, "/workspace/etclink/pwned.d") }, true, "/etc/pwned.d"},
		{"remove through link", func() error { return g.Remove(ctx, id, "/workspace/alias/key", false) }, false, "/workspace/secrets/key"},
		{"rename source through link", func() error { return g.Rename(ctx, id, "/workspace/relalias/key", "/workspace/stolen") }, false, "/workspace/secrets/key"},
		{"rename destination through link", func() error {
			return g.Rename(ctx, id, "/workspace/a.txt", "/workspace/gitalias/hooks/post-checkout")
		}, false, "/workspace/.git/hooks/post-checkout"},
		{"rename destination out of the tree", func() error { return g.Rename(ctx, id, "/workspace/a.txt", "/workspace/etclink/pwned") }, true, "/etc/pwned"},
		{"upload into linked dir", func() error { return g.Upload(ctx, id, "/workspace/gitalias/hooks", oneFile(t, "pre-push")) }, false, "/workspace/.git/hooks"},
		{"upload into a link out of the tree", func() error { return g.Upload(ctx, id, "/workspace/etclink", oneFile(t, "pwned")) }, true, "/etc"},
	}
	for _, c := range cases {
		mu.Lock()
		asked = nil
		mu.Unlock()
		err := c.call()
		var denied *approval.DeniedError
		if !errors.As(err, &denied) {
			t.Errorf("%s: error = %v, want a denial", c.name, err)
			continue
		}
		mu.Lock()
		n := len(asked)
		var shown approval.Details
		if n > 0 {
			shown = asked[0].Details
		}
		mu.Unlock()
		switch {
		case c.ask && n != 1:
			t.Errorf("%s: the approver was asked %d times, want once", c.name, n)
		case c.ask && shown.Resolved+shown.ResolvedDest != c.resolved:
			t.Errorf("%s: the approver was shown %q, %q; want %q", c.name, shown.Resolved, shown.ResolvedDest, c.resolved)
		case !c.ask && n != 0:
			t.Errorf("%s: asked about a request a deny rule matches: %+v", c.name, asked)
		case !c.ask && denied.Request.Details.Resolved+denied.Request.Details.ResolvedDest != c.resolved:
			t.Errorf("%s: the denial names %+v, want it resolved to %q", c.name, denied.Request.Details, c.resolved)
		}
	}
	// Nothing changed where the rules or the approver said no.
	mustRun(t, p, id, `set -e
test "$(cat /workspace/secrets/key)" = topsecret
test "$(cat /workspace/a.txt)" = hello
test ! -e /etc/pwned && test ! -e /etc/pwned.d
test -z "$(ls -A /workspace/.git/hooks)"
test ! -e /workspace/stolen`)

	// What the rules allow runs on the resolved path, and reports the
	// typed one.
	if b, err := readGate(ctx, g, id, "/workspace/public/a.txt"); err != nil || b != "public\n" {
		t.Errorf("ReadFile through an allowed link = %q, %v", b, err)
	}
	if err := g.WriteFile(ctx, id, "/workspace/public/new.txt", strings.NewReader("new\n"), 0o644); err != nil {
		t.Errorf("WriteFile through an allowed link: %v", err)
	}
	list, err := g.ListDir(ctx, id, "/workspace/public", 1)
	if err != nil || len(list) != 2 || list[0].Path != "/workspace/public/a.txt" || list[1].Path != "/workspace/public/new.txt" {
		t.Errorf("ListDir(/workspace/public) = %+v, %v", list, err)
	}
	if got := mustRun(t, p, id, "cat /workspace/pub/new.txt"); got != "new\n" {
		t.Errorf("the write through the link landed elsewhere: %q", got)
	}
	// A write replaces a final symlink rather than writing through it.
	mustRun(t, p, id, "ln -s /etc/hostname /workspace/final")
	if err := g.WriteFile(ctx, id, "/workspace/final", strings.NewReader("mine\n"), 0o644); err != nil {
		t.Errorf("WriteFile over a final link: %v", err)
	}
	mustRun(t, p, id, `test ! -L /workspace/final && test "$(cat /etc/hostname)" = sandbox`)
	// Resolving a loop fails, and nothing runs.
	if _, err := readGate(ctx, g, id, "/workspace/loop/x"); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ReadFile through a loop = %v, want ErrInvalid", err)
	}
}

// readGate reads a whole file through the gate.
func readGate(ctx context.Context, g *approval.Gate, id, path string) (string, error) {
	rc, err := g.ReadFile(ctx, id, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// readCtx reads a whole file with ctx, and fails if it is the secret.
func readCtx(ctx context.Context, p *Provider, id, path string) error {
	rc, err := p.ReadFile(ctx, id, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if bytes.Contains(b, []byte("topsecret")) {
		return errors.New("read the secret")
	}
	return err
}

// mustParsePolicy parses a policy file or fails.
func mustParsePolicy(t testing.TB, text string) *approval.Policy {
	t.Helper()
	pol, err := approval.ParsePolicy("policy.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func TestSymlinkResolvePathLocal(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, linkSetup)
	ctx := context.Background()
	cases := []struct{ path, want string }{
		{"/workspace/alias/key", "/workspace/secrets/key"},
		{"/workspace/relalias/key", "/workspace/secrets/key"},
		{"/workspace/chain1", "/workspace/secrets"},
		{"/workspace/keylink", "/workspace/secrets/key"},
		{"/workspace/up/key", "/workspace/secrets/key"},
		{"/workspace/dotted/key", "/workspace/secrets/key"},
		{"/workspace/alias/missing/deeper", "/workspace/secrets/missing/deeper"},
		{"/workspace/etclink/passwd", "/etc/passwd"},
		{"/workspace/gitalias/hooks/pre-commit", "/workspace/.git/hooks/pre-commit"},
		{"/workspace/a.txt", "/workspace/a.txt"},
		{"/workspace/a.txt/below", "/workspace/a.txt/below"},
		{"/", "/"},
	}
	for _, c := range cases {
		if got, err := p.ResolvePath(ctx, id, c.path); err != nil || got != c.want {
			t.Errorf("ResolvePath(%s) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	if got, err := p.ResolvePath(ctx, id, "/workspace/loop/x"); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ResolvePath(loop) = %q, %v; want ErrInvalid", got, err)
	}
}

func TestSymlinkNoFollowLocal(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, linkSetup)
	ctx := providers.WithNoFollow(context.Background())
	// Every operation on a path with a symlink in it fails, whatever the
	// component; none reaches the link's target.
	cases := []struct {
		name string
		call func() error
	}{
		{"read", func() error { return readCtx(ctx, p, id, "/workspace/alias/key") }},
		{"read through a link out", func() error { return readCtx(ctx, p, id, "/workspace/etclink/hostname") }},
		{"read of a final link", func() error { return readCtx(ctx, p, id, "/workspace/keylink") }},
		{"download file", func() error {
			var buf bytes.Buffer
			return p.Download(ctx, id, "/workspace/relalias/key", &buf)
		}},
		{"download dir", func() error {
			var buf bytes.Buffer
			return p.Download(ctx, id, "/workspace/alias", &buf)
		}},
		{"write", func() error { return p.WriteFile(ctx, id, "/workspace/etclink/pwned", strings.NewReader("x"), 0o644) }},
		{"write in a new dir below a link", func() error {
			return p.WriteFile(ctx, id, "/workspace/etclink/pwned.d/x", strings.NewReader("x"), 0o644)
		}},
		{"stat", func() error { _, err := p.Stat(ctx, id, "/workspace/chain1/key"); return err }},
		{"list", func() error { _, err := p.ListDir(ctx, id, "/workspace/alias", 1); return err }},
		{"grep", func() error {
			_, err := p.Grep(ctx, id, providers.GrepRequest{Pattern: "top", Path: "/workspace/up"})
			return err
		}},
		{"mkdir", func() error { return p.Mkdir(ctx, id, "/workspace/etclink/pwned.d") }},
		{"remove", func() error { return p.Remove(ctx, id, "/workspace/alias/key", false) }},
		{"remove recursive", func() error { return p.Remove(ctx, id, "/workspace/alias/inner", true) }},
		{"rename source", func() error { return p.Rename(ctx, id, "/workspace/relalias/key", "/workspace/stolen") }},
		{"rename destination", func() error { return p.Rename(ctx, id, "/workspace/a.txt", "/workspace/gitalias/hooks/x") }},
		{"upload", func() error { return p.Upload(ctx, id, "/workspace/gitalias/hooks", oneFile(t, "pre-push")) }},
		{"upload to a link", func() error { return p.Upload(ctx, id, "/workspace/etclink", oneFile(t, "pwned")) }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("%s: error = %v, want ErrInvalid (a symlink in the path)", c.name, err)
		}
	}
	mustRun(t, p, id, `set -e
test "$(cat /workspace/secrets/key)" = topsecret
test -d /workspace/secrets/inner
test "$(cat /workspace/a.txt)" = hello
test ! -e /etc/pwned && test ! -e /etc/pwned.d
test -z "$(ls -A /workspace/.git/hooks)"
test ! -e /workspace/stolen`)

	// The final component itself: stat, remove and rename act on the
	// link, write replaces it.
	fi, err := p.Stat(ctx, id, "/workspace/alias")
	if err != nil || fi.Target != "/workspace/secrets" {
		t.Errorf("Stat(link) = %+v, %v", fi, err)
	}
	if err := p.Rename(ctx, id, "/workspace/alias", "/workspace/alias2"); err != nil {
		t.Errorf("Rename(link): %v", err)
	}
	if err := p.Remove(ctx, id, "/workspace/alias2", false); err != nil {
		t.Errorf("Remove(link): %v", err)
	}
	mustRun(t, p, id, `test ! -e /workspace/alias2 && test -f /workspace/secrets/key`)
}

// TestSymlinkRaceLocal swaps, in the sandbox, a directory of the approved
// tree for a symlink out of it and back, as fast as a shell can, while the
// gate reads, writes and uploads through it: nothing ever lands outside
// the approved tree or comes from the denied one.
func TestSymlinkRaceLocal(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, `set -e
mkdir -p /workspace/allowed/d /workspace/outside /workspace/secrets
echo topsecret > /workspace/secrets/f
echo decoy > /workspace/allowed/d/f`)
	g := approval.NewGate(p, approval.GateOptions{Policy: mustParsePolicy(t, `default: deny
allow: ["write:/workspace/allowed/**", "upload:/workspace/allowed/**"]
deny: ["read:/workspace/secrets/**"]
`)})

	swapCtx, stopSwap := context.WithCancel(context.Background())
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		// Directory, absolute link out, directory, relative link into
		// the secrets, again and again.
		_, _ = p.Exec(swapCtx, id, providers.ExecRequest{Shell: `cd /workspace/allowed
while :; do
  rm -rf d; mkdir d; echo decoy > d/f
  rm -rf d; ln -s /workspace/outside d
  rm -rf d; mkdir d; echo decoy > d/f
  rm -rf d; ln -s ../secrets d
done`})
	}()
	defer func() {
		stopSwap()
		<-swapped
	}()

	ctx := context.Background()
	var wrote, read, uploaded, refused int
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 150 && time.Now().Before(deadline); i++ {
		switch i % 3 {
		case 0:
			if err := g.WriteFile(ctx, id, "/workspace/allowed/d/f", strings.NewReader("written\n"), 0o644); err == nil {
				wrote++
			} else {
				refused++
			}
		case 1:
			b, err := readGate(ctx, g, id, "/workspace/allowed/d/f")
			if strings.Contains(b, "topsecret") {
				t.Fatalf("read %d returned the secret through a swapped link", i)
			}
			if err == nil {
				read++
			} else {
				refused++
			}
		case 2:
			if err := g.Upload(ctx, id, "/workspace/allowed/d", oneFile(t, "f")); err == nil {
				uploaded++
			} else {
				refused++
			}
		}
	}
	stopSwap()
	<-swapped
	t.Logf("wrote %d, read %d, uploaded %d, refused or failed %d", wrote, read, uploaded, refused)
	out := mustRun(t, p, id, `ls -A /workspace/outside; cat /workspace/secrets/f; ls -A /workspace/secrets`)
	if out != "topsecret\nf\n" {
		t.Fatalf("something landed outside the approved tree:\n%s", out)
	}
	if wrote+read+uploaded == 0 {
		t.Fatal("no operation succeeded: the race was never lost by the swapper")
	}
}

// TestSymlinkStrictFSWeakAnchors runs the in-sandbox half on host paths, as
// the weak mode does: the host's path to the workspace may hold symlinks
// (it is trusted and followed), what lies below it may not.
func TestSymlinkStrictFSWeakAnchors(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	real := filepath.Join(base, "real")
	for _, d := range []string{"ws/sub", "ws/secrets"} {
		if err := os.MkdirAll(filepath.Join(real, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(real, filepath.Join(base, "link")))
	must(os.Symlink("secrets", filepath.Join(real, "ws/alias")))
	must(os.Symlink(filepath.Join(real, "ws/secrets"), filepath.Join(real, "ws/abs")))
	must(os.WriteFile(filepath.Join(real, "ws/sub/f"), []byte("x"), 0o644))
	ws := filepath.Join(base, "link", "ws") // as configured, through a symlink
	s := newStrictFS(&initConfig{Weak: true, Workspace: ws})

	for in, want := range map[string]string{
		ws + "/alias/x":  ws + "/secrets/x",
		ws + "/abs/x":    ws + "/secrets/x",
		ws + "/sub/f":    ws + "/sub/f",
		ws:               ws,
		ws + "/alias/..": ws,
	} {
		if got, err := s.resolvePath(in); err != nil || got != want {
			t.Errorf("resolvePath(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	if f, err := s.openFile(ws+"/sub/f", unix.O_RDONLY, 0); err != nil {
		t.Errorf("open below the anchor: %v", err)
	} else {
		f.Close()
	}
	if _, err := s.openFile(ws+"/alias/x", unix.O_RDONLY, 0); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("open through a link below the anchor = %v, want ELOOP", err)
	}
	fd, err := s.mkdirAll(ws + "/new/dir")
	if err != nil {
		t.Errorf("mkdirAll below the anchor: %v", err)
	} else {
		unix.Close(fd)
	}
	if _, err := s.mkdirAll(ws + "/abs/new"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("mkdirAll through a link = %v, want ELOOP", err)
	}
	if _, err := os.Stat(filepath.Join(real, "ws/secrets/new")); err == nil {
		t.Error("mkdirAll went through the link")
	}
	r, err := s.root(ws + "/sub")
	if err != nil {
		t.Fatalf("root: %v", err)
	}
	r.Close()
}

// TestSymlinkOpenWalk checks the fallback for kernels without openat2
// against openat2 itself.
func TestSymlinkOpenWalk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "d/e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"lnk": "d", "d/flink": "e", "abs": dir} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "d/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	cases := []struct {
		rel   string
		flags int
		want  error
	}{
		{"d/f", unix.O_RDONLY, nil},
		{"d/e", unix.O_PATH | unix.O_DIRECTORY, nil},
		{".", unix.O_PATH | unix.O_DIRECTORY, nil},
		{"lnk/f", unix.O_RDONLY, unix.ELOOP},
		{"abs/d/f", unix.O_RDONLY, unix.ELOOP},
		{"lnk", unix.O_PATH | unix.O_DIRECTORY, unix.ELOOP},
		{"d/flink", unix.O_PATH, unix.ELOOP},
		{"d/flink", unix.O_RDONLY, unix.ELOOP},
		{"missing/f", unix.O_RDONLY, unix.ENOENT},
	}
	for _, c := range cases {
		for name, open := range map[string]func(int, string, int, uint32) (int, error){"openat2": openBeneath, "walk": openWalk} {
			fd, err := open(dfd, c.rel, c.flags, 0)
			if err == nil {
				unix.Close(fd)
			}
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%s(%s) = %v, want %v", name, c.rel, err, c.want)
			}
		}
	}
}
