package approval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// linkFake is a provider whose sandbox holds symlinks (links: path →
// target), resolved as `realpath -m` does. It logs each inner operation
// with the paths it got and whether it was asked to follow no symlink.
type linkFake struct {
	*fakeProvider
	links map[string]string

	mu  sync.Mutex
	ops []string
}

func newLinkFake(links map[string]string) *linkFake {
	f := &linkFake{fakeProvider: seededFake(), links: links}
	for _, p := range []string{"/etc/hosts", "/workspace/secrets/key", "/workspace/pub/a.txt"} {
		f.files[p] = "a\n"
	}
	return f
}

func (f *linkFake) log(ctx context.Context, op string, paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := op + " " + strings.Join(paths, " ")
	if providers.NoFollow(ctx) {
		s += " (nofollow)"
	}
	f.ops = append(f.ops, s)
}

func (f *linkFake) Ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ops)
}

func (f *linkFake) ResolvePath(ctx context.Context, id, p string) (string, error) {
	f.log(ctx, "resolve", p)
	todo := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur, n := "/", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		target, ok := f.links[next]
		if !ok {
			cur = next
			continue
		}
		if n++; n > 40 {
			return "", fmt.Errorf("resolve %s: %w", p, syscall.ELOOP)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

func (f *linkFake) ReadFile(ctx context.Context, id, p string) (io.ReadCloser, error) {
	f.log(ctx, "read", p)
	return f.fakeProvider.ReadFile(ctx, id, p)
}

func (f *linkFake) WriteFile(ctx context.Context, id, p string, r io.Reader, mode fs.FileMode) error {
	f.log(ctx, "write", p)
	return f.fakeProvider.WriteFile(ctx, id, p, r, mode)
}

func (f *linkFake) Stat(ctx context.Context, id, p string) (providers.FileInfo, error) {
	f.log(ctx, "stat", p)
	return f.fakeProvider.Stat(ctx, id, p)
}

func (f *linkFake) ListDir(ctx context.Context, id, p string, depth int) ([]providers.FileInfo, error) {
	f.log(ctx, "list", p)
	return []providers.FileInfo{{Path: p + "/a.go", Name: "a.go"}, {Path: p + "/sub/b.go", Name: "b.go"}}, nil
}

func (f *linkFake) Mkdir(ctx context.Context, id, p string) error {
	f.log(ctx, "mkdir", p)
	return nil
}

func (f *linkFake) Remove(ctx context.Context, id, p string, recursive bool) error {
	f.log(ctx, "remove", p)
	return nil
}

func (f *linkFake) Rename(ctx context.Context, id, from, to string) error {
	f.log(ctx, "rename", from, to)
	return nil
}

func (f *linkFake) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	f.log(ctx, "upload", dst)
	return nil
}

func (f *linkFake) Download(ctx context.Context, id, src string, w io.Writer) error {
	f.log(ctx, "download", src)
	return nil
}

func (f *linkFake) Grep(ctx context.Context, id string, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	f.log(ctx, "grep", req.Path)
	return []providers.GrepMatch{{Path: req.Path + "/x.txt", Line: 1, Text: "x"}}, nil
}

var (
	_ providers.PathResolver = (*linkFake)(nil)
	_ providers.Grepper      = (*linkFake)(nil)
)

// Symlinks of the sandbox in the tests.
var testLinks = map[string]string{
	"/workspace/alias":    "/workspace/secrets", // absolute, to a denied directory
	"/workspace/relalias": "secrets",            // relative
	"/workspace/chain1":   "chain2",             // a chain ending in secrets
	"/workspace/chain2":   "/workspace/chain3",
	"/workspace/chain3":   "./relalias",
	"/workspace/up":       "/workspace/deep/..", // ".." after a link: physical
	"/workspace/deep":     "/workspace/secrets/inner",
	"/workspace/etclink":  "/etc",
	"/workspace/gitalias": ".git",
	"/workspace/public":   "/workspace/pub",
	"/workspace/s":        "/etc/passwd", // a final symlink
	"/workspace/loop":     "loop",
}

// symlinkPolicy denies the secrets and .git, and allows writing only in
// the workspace; everything else an agent asks for is asked about.
const symlinkPolicy = `default: ask
allow: ["write:/workspace/**", "upload:/workspace/**", "delete:/workspace/**", "edit:/workspace/**"]
deny: ["read:/workspace/secrets/**", "list:/workspace/secrets", "list:/workspace/secrets/**",
       "download:/workspace/secrets/**", "download:/workspace/secrets",
       "write:/workspace/secrets/**", "delete:/workspace/secrets/**",
       "write:/workspace/.git/**", "upload:/workspace/.git/**", "read:/workspace/typed-deny/**"]
`

func TestGateSymlinkRules(t *testing.T) {
	t.Parallel()
	read := func(p string) func(context.Context, *Gate) error {
		return func(ctx context.Context, g *Gate) error {
			rc, err := g.ReadFile(ctx, "sb", p)
			if err == nil {
				rc.Close()
			}
			return err
		}
	}
	write := func(p string) func(context.Context, *Gate) error {
		return func(ctx context.Context, g *Gate) error {
			return g.WriteFile(ctx, "sb", p, strings.NewReader("x"), 0o644)
		}
	}
	cases := []struct {
		name string
		call func(context.Context, *Gate) error
		// denied: a *DeniedError, asked: the approver's request
		// (approver refuses); neither: it ran.
		denied bool
		// resolved is the Details.Resolved (and ResolvedDest) the
		// approver or the denial shows.
		resolved, resolvedDest string
		// ops are the inner operations, after resolving.
		ops []string
		// preRead: reading before asking is expected (an edit's diff).
		preRead bool
		// policy replaces symlinkPolicy; allow makes the approver allow.
		policy string
		allow  bool
		// noResolve: denied on the typed path, the provider is not even
		// asked where it leads.
		noResolve bool
		// hint is part of the denial's hint.
		hint string
	}{
		{name: "read through absolute link to denied dir", call: read("/workspace/alias/key"), denied: true, resolved: "/workspace/secrets/key"},
		{name: "read through relative link", call: read("/workspace/relalias/key"), denied: true, resolved: "/workspace/secrets/key"},
		{name: "read through a chain of links", call: read("/workspace/chain1/key"), denied: true, resolved: "/workspace/secrets/key"},
		{name: "read with .. after a link", call: read("/workspace/up/key"), denied: true, resolved: "/workspace/secrets/key"},
		{name: "read of a final link into a denied dir", call: read("/workspace/alias"), denied: true, resolved: "/workspace/secrets"},
		{name: "read through a link to an allowed dir runs on the resolved path", call: read("/workspace/public/a.txt"),
			ops: []string{"read /workspace/pub/a.txt (nofollow)"}},
		{name: "typed deny still denies", call: read("/workspace/typed-deny/x"), denied: true, noResolve: true},
		{name: "an ask rule on the typed path does not undo a default deny of the resolved one", call: write("/workspace/etclink/passwd"),
			policy: "default: deny\nask: [\"write:/workspace/**\"]\n", allow: true, denied: true, resolved: "/etc/passwd",
			hint: `--allow "write:/etc/**"`},
		{name: "stat through link", call: func(ctx context.Context, g *Gate) error {
			_, err := g.Stat(ctx, "sb", "/workspace/alias/key")
			return err
		}, denied: true, resolved: "/workspace/secrets/key"},
		{name: "ls of a linked denied dir", call: func(ctx context.Context, g *Gate) error {
			_, err := g.ListDir(ctx, "sb", "/workspace/alias", 1)
			return err
		}, denied: true, resolved: "/workspace/secrets"},
		{name: "glob root through link", call: func(ctx context.Context, g *Gate) error {
			_, err := g.Glob(ctx, "sb", "/workspace/relalias", "**")
			return err
		}, denied: true, resolved: "/workspace/secrets"},
		{name: "grep root through link", call: func(ctx context.Context, g *Gate) error {
			_, err := g.Grep(ctx, "sb", providers.GrepRequest{Pattern: "k", Path: "/workspace/chain1"})
			return err
		}, denied: true, resolved: "/workspace/secrets"},
		{name: "write through link out of the allowed tree asks", call: write("/workspace/etclink/passwd"), resolved: "/etc/passwd"},
		{name: "write through link to .git is denied", call: write("/workspace/gitalias/hooks/pre-commit"), denied: true,
			resolved: "/workspace/.git/hooks/pre-commit"},
		{name: "write replaces a final link, not its target", call: write("/workspace/s"),
			ops: []string{"write /workspace/s (nofollow)"}},
		{name: "mkdir through link asks", call: func(ctx context.Context, g *Gate) error {
			return g.Mkdir(ctx, "sb", "/workspace/etclink/cron.d")
		}, resolved: "/etc/cron.d"},
		{name: "remove through link", call: func(ctx context.Context, g *Gate) error {
			return g.Remove(ctx, "sb", "/workspace/alias/key", false)
		}, denied: true, resolved: "/workspace/secrets/key"},
		{name: "remove of a final link removes the link", call: func(ctx context.Context, g *Gate) error {
			return g.Remove(ctx, "sb", "/workspace/alias", false)
		}, ops: []string{"remove /workspace/alias (nofollow)"}},
		{name: "rename source through link", call: func(ctx context.Context, g *Gate) error {
			return g.Rename(ctx, "sb", "/workspace/relalias/key", "/workspace/stolen")
		}, denied: true, resolved: "/workspace/secrets/key"},
		{name: "rename destination through link", call: func(ctx context.Context, g *Gate) error {
			return g.Rename(ctx, "sb", "/workspace/a.txt", "/workspace/gitalias/hooks/post-checkout")
		}, denied: true, resolvedDest: "/workspace/.git/hooks/post-checkout"},
		{name: "rename destination out of the tree asks", call: func(ctx context.Context, g *Gate) error {
			return g.Rename(ctx, "sb", "/workspace/a.txt", "/workspace/etclink/profile")
		}, resolvedDest: "/etc/profile"},
		{name: "rename within allowed links runs on resolved paths", call: func(ctx context.Context, g *Gate) error {
			return g.Rename(ctx, "sb", "/workspace/public/a", "/workspace/public/b")
		}, ops: []string{"rename /workspace/pub/a /workspace/pub/b (nofollow)"}},
		{name: "upload into linked dir asks", call: func(ctx context.Context, g *Gate) error {
			return g.Upload(ctx, "sb", "/workspace/etclink", strings.NewReader(""))
		}, resolved: "/etc"},
		{name: "upload into linked denied dir", call: func(ctx context.Context, g *Gate) error {
			return g.Upload(ctx, "sb", "/workspace/gitalias/hooks", strings.NewReader(""))
		}, denied: true, resolved: "/workspace/.git/hooks"},
		{name: "download through linked dir", call: func(ctx context.Context, g *Gate) error {
			return g.Download(ctx, "sb", "/workspace/alias", io.Discard)
		}, denied: true, resolved: "/workspace/secrets"},
		{name: "edit through link out of the tree", call: func(ctx context.Context, g *Gate) error {
			_, err := g.Edit(ctx, "sb", "/workspace/etclink/hosts", "a", "b", false)
			return err
		}, resolved: "/etc/hosts", preRead: true},
		{name: "edit reading a denied file through a link", call: func(ctx context.Context, g *Gate) error {
			_, err := g.Edit(ctx, "sb", "/workspace/alias/key", "a", "b", false)
			return err
		}, denied: true, resolved: "/workspace/secrets/key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := newLinkFake(testLinks)
			var mu sync.Mutex
			var asked []Request
			policy := symlinkPolicy
			if c.policy != "" {
				policy = c.policy
			}
			g := NewGate(fake, GateOptions{
				Policy: mustPolicy(t, policy),
				Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, req)
					return Decision{Allow: c.allow, Reason: "no"}, nil
				}),
			})
			err := c.call(WithSource(context.Background(), SourceAgent), g)
			var denied *DeniedError
			isDenied := errors.As(err, &denied)
			ran := slices.ContainsFunc(fake.Ops(), func(op string) bool {
				return !strings.HasPrefix(op, "resolve ") && !(c.preRead && strings.HasPrefix(op, "read "))
			})
			switch {
			case c.ops != nil:
				if err != nil {
					t.Fatalf("error = %v, want it to run", err)
				}
			case c.denied:
				if !isDenied || len(asked) != 0 {
					t.Fatalf("error = %v, asked %d times; want a denial without asking", err, len(asked))
				}
				if got := denied.Request.Details; got.Resolved != c.resolved || got.ResolvedDest != c.resolvedDest {
					t.Errorf("denied request resolves to %q, %q; want %q, %q", got.Resolved, got.ResolvedDest, c.resolved, c.resolvedDest)
				}
				if !strings.Contains(denied.Hint, c.hint) {
					t.Errorf("hint %q does not say %q", denied.Hint, c.hint)
				}
			default:
				if len(asked) != 1 || !isDenied {
					t.Fatalf("asked %d times, error %v; want one question, then a denial", len(asked), err)
				}
				if got := asked[0].Details; got.Resolved != c.resolved || got.ResolvedDest != c.resolvedDest {
					t.Errorf("the approver was shown %q, %q; want %q, %q", got.Resolved, got.ResolvedDest, c.resolved, c.resolvedDest)
				}
				if !strings.Contains(describe(asked[0]), "resolves to: "+c.resolved+c.resolvedDest) {
					t.Errorf("the prompt does not show where the path resolves:\n%s", describe(asked[0]))
				}
			}
			if c.noResolve && len(fake.Ops()) != 0 {
				t.Fatalf("a request its typed path denies reached the provider: %v", fake.Ops())
			}
			if c.ops == nil && ran {
				t.Fatalf("a refused operation reached the provider: %v", fake.Ops())
			}
			if c.ops != nil {
				var got []string
				for _, op := range fake.Ops() {
					if !strings.HasPrefix(op, "resolve ") {
						got = append(got, op)
					}
				}
				if !slices.Equal(got, c.ops) {
					t.Fatalf("inner operations = %q, want %q", got, c.ops)
				}
			}
		})
	}
}

func TestGateSymlinkResultsKeepTypedPaths(t *testing.T) {
	t.Parallel()
	fake := newLinkFake(testLinks)
	g := NewGate(fake, GateOptions{Policy: &Policy{Yes: true}})
	ctx := context.Background()
	list, err := g.ListDir(ctx, "sb", "/workspace/public", 2)
	if err != nil || len(list) != 2 || list[0].Path != "/workspace/public/a.go" || list[1].Path != "/workspace/public/sub/b.go" {
		t.Errorf("ListDir = %+v, %v; want paths below the typed directory", list, err)
	}
	globbed, err := g.Glob(ctx, "sb", "/workspace/public", "**/b.go")
	if err != nil || len(globbed) != 1 || globbed[0].Path != "/workspace/public/sub/b.go" {
		t.Errorf("Glob = %+v, %v", globbed, err)
	}
	matches, err := g.Grep(ctx, "sb", providers.GrepRequest{Pattern: "x", Path: "/workspace/public"})
	if err != nil || len(matches) != 1 || matches[0].Path != "/workspace/public/x.txt" {
		t.Errorf("Grep = %+v, %v", matches, err)
	}
	want := []string{
		"resolve /workspace/public", "list /workspace/pub (nofollow)",
		"resolve /workspace/public", "list /workspace/pub (nofollow)",
		"resolve /workspace/public", "grep /workspace/pub (nofollow)",
	}
	if got := fake.Ops(); !slices.Equal(got, want) {
		t.Errorf("operations = %q, want %q", got, want)
	}
}

func TestGateSymlinkSessionRuleCoversResolved(t *testing.T) {
	t.Parallel()
	fake := newLinkFake(testLinks)
	asked := 0
	g := NewGate(fake, GateOptions{
		Policy: mustPolicy(t, "default: ask\n"),
		Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
			asked++
			rules := SuggestRules(req)
			return Decision{Allow: true, SessionRule: rules[0], SessionRules: rules[1:]}, nil
		}),
	})
	ctx := WithSource(context.Background(), SourceAgent)
	for range 2 {
		if err := g.WriteFile(ctx, "sb", "/workspace/etclink/x", strings.NewReader("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if asked != 1 {
		t.Fatalf("asked %d times; the session rules of the answer should cover both paths", asked)
	}
	if got, want := g.SessionRules(), []string{"write:/workspace/etclink/**", "write:/etc/**"}; !slices.Equal(got, want) {
		t.Fatalf("session rules = %q, want %q", got, want)
	}
}

func TestGateSymlinkResolveErrors(t *testing.T) {
	t.Parallel()
	fake := newLinkFake(testLinks)
	g := NewGate(fake, GateOptions{Policy: &Policy{Yes: true}})
	_, err := g.ReadFile(context.Background(), "sb", "/workspace/loop/x")
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("ReadFile through a loop = %v, want ELOOP", err)
	}
	for _, op := range fake.Ops() {
		if !strings.HasPrefix(op, "resolve ") {
			t.Fatalf("the operation ran: %v", fake.Ops())
		}
	}
}

func TestGateSymlinkAudit(t *testing.T) {
	t.Parallel()
	var events []Event
	fake := newLinkFake(testLinks)
	g := NewGate(fake, GateOptions{
		Policy:  &Policy{Yes: true},
		Mask:    func(s string) string { return strings.ReplaceAll(s, "passwd", "***") },
		OnEvent: func(e Event) { events = append(events, e) },
	})
	if err := g.WriteFile(context.Background(), "sb", "/workspace/etclink/passwd", strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[0].Request.Details.Resolved != "/etc/***" {
		t.Fatalf("events = %+v; want the resolved path, masked", events)
	}
	if HiddenWarning(Request{Kind: KindRead, Target: "/x", Details: Details{Resolved: "/a\u202eb"}}) == "" {
		t.Error("hidden characters in a resolved path are not warned about")
	}
}

func TestRequestPathsWithResolved(t *testing.T) {
	t.Parallel()
	cases := []struct {
		req  Request
		want []string
	}{
		{Request{Kind: KindRead, Target: "/a"}, []string{"/a"}},
		{Request{Kind: KindRead, Target: "/a", Details: Details{Resolved: "/b"}}, []string{"/a", "/b"}},
		{Request{Kind: KindRead, Target: "/a", Details: Details{Resolved: "/a"}}, []string{"/a"}},
		{Request{Kind: KindWrite, Target: "/a", Details: Details{Dest: "/c", Resolved: "/b", ResolvedDest: "/d"}}, []string{"/a", "/c", "/b", "/d"}},
		// Dest of an upload is only shown; so is a stray ResolvedDest.
		{Request{Kind: KindUpload, Target: "/a", Details: Details{Dest: "/host", ResolvedDest: "/d"}}, []string{"/a"}},
		{Request{Kind: KindExec, Target: "ls", Details: Details{Resolved: "/b"}}, nil},
	}
	for _, c := range cases {
		if got := c.req.Paths(); !slices.Equal(got, c.want) {
			t.Errorf("Paths(%+v) = %q, want %q", c.req, got, c.want)
		}
	}
}

func TestRebase(t *testing.T) {
	t.Parallel()
	cases := []struct{ p, from, to, want string }{
		{"/workspace/pub/a", "/workspace/pub", "/workspace/public", "/workspace/public/a"},
		{"/workspace/pub", "/workspace/pub", "/workspace/public", "/workspace/public"},
		{"/workspace/pubx", "/workspace/pub", "/workspace/public", "/workspace/pubx"},
		{"/etc/x", "/", "/root", "/root/etc/x"},
		{"/x", "/a", "/", "/x"},
		{"/a/x", "/a", "/", "/x"},
		{"/a/x", "/a", "/a", "/a/x"},
	}
	for _, c := range cases {
		if got := rebase(c.p, c.from, c.to); got != c.want {
			t.Errorf("rebase(%q, %q, %q) = %q, want %q", c.p, c.from, c.to, got, c.want)
		}
	}
}
