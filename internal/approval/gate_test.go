package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	ev "github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// fakeProvider is an in-memory provider that records every call.
type fakeProvider struct {
	mu      sync.Mutex
	calls   []string
	files   map[string]string
	modes   map[string]fs.FileMode
	entries []providers.FileInfo

	execs      []providers.ExecRequest
	execStdout string
	execStderr string
	execCode   int
}

func newFake() *fakeProvider {
	return &fakeProvider{files: map[string]string{}, modes: map[string]fs.FileMode{}}
}

func (f *fakeProvider) record(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

func (f *fakeProvider) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeProvider) Name() string                         { return "fake" }
func (f *fakeProvider) Capabilities() providers.Capabilities { return providers.Capabilities{} }

func (f *fakeProvider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	f.record("Create")
	return providers.Info{ID: "sb-1", Provider: "fake"}, nil
}

func (f *fakeProvider) Get(ctx context.Context, id string) (providers.Info, error) {
	f.record("Get")
	return providers.Info{ID: id, Provider: "fake"}, nil
}

func (f *fakeProvider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	f.record("List")
	return nil, nil
}

func (f *fakeProvider) Delete(ctx context.Context, id string) error {
	f.record("Delete")
	return nil
}

func (f *fakeProvider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	f.record("Exec")
	f.mu.Lock()
	f.execs = append(f.execs, req)
	out, errOut, code := f.execStdout, f.execStderr, f.execCode
	f.mu.Unlock()
	if req.Stdout != nil {
		io.WriteString(req.Stdout, out)
	}
	if req.Stderr != nil {
		io.WriteString(req.Stderr, errOut)
	}
	return providers.ExecResult{ExitCode: code}, nil
}

func (f *fakeProvider) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	f.record("ReadFile")
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.files[path]
	if !ok {
		return nil, fmt.Errorf("read %s: %w", path, providers.ErrNotFound)
	}
	return io.NopCloser(strings.NewReader(s)), nil
}

func (f *fakeProvider) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	f.record("WriteFile")
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[path] = string(data)
	f.modes[path] = mode
	return nil
}

func (f *fakeProvider) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	f.record("Stat")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[path]; !ok {
		return providers.FileInfo{}, providers.ErrNotFound
	}
	return providers.FileInfo{Path: path, Mode: f.modes[path]}, nil
}

func (f *fakeProvider) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	f.record("ListDir")
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries), nil
}

func (f *fakeProvider) Mkdir(ctx context.Context, id, path string) error {
	f.record("Mkdir")
	return nil
}

func (f *fakeProvider) Remove(ctx context.Context, id, path string, recursive bool) error {
	f.record("Remove")
	return nil
}

func (f *fakeProvider) Rename(ctx context.Context, id, from, to string) error {
	f.record("Rename")
	return nil
}

func (f *fakeProvider) Upload(ctx context.Context, id, dst string, archive io.Reader) error {
	f.record("Upload")
	return nil
}

func (f *fakeProvider) Download(ctx context.Context, id, src string, w io.Writer) error {
	f.record("Download")
	return nil
}

// grepFake adds a native Grepper.
type grepFake struct {
	*fakeProvider
	got providers.GrepRequest
}

func (g *grepFake) Grep(ctx context.Context, id string, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	g.record("Grep")
	g.got = req
	return []providers.GrepMatch{{Path: "/workspace/a", Line: 1, Text: "x"}}, nil
}

var _ providers.Provider = (*fakeProvider)(nil)

// gatedCall is one gated method and the inner calls it makes when allowed.
type gatedCall struct {
	name  string
	call  func(ctx context.Context, g *Gate) error
	inner []string
}

func gatedCalls() []gatedCall {
	return []gatedCall{
		{"Exec", func(ctx context.Context, g *Gate) error {
			_, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "go test ./..."})
			return err
		}, []string{"Exec"}},
		{"ExecArgv", func(ctx context.Context, g *Gate) error {
			_, err := g.Exec(ctx, "sb", providers.ExecRequest{Argv: []string{"ls", "-la"}})
			return err
		}, []string{"Exec"}},
		{"ReadFile", func(ctx context.Context, g *Gate) error {
			rc, err := g.ReadFile(ctx, "sb", "/workspace/a.txt")
			if err == nil {
				rc.Close()
			}
			return err
		}, []string{"ReadFile"}},
		{"WriteFile", func(ctx context.Context, g *Gate) error {
			return g.WriteFile(ctx, "sb", "/workspace/new.txt", strings.NewReader("x"), 0o644)
		}, []string{"WriteFile"}},
		{"Stat", func(ctx context.Context, g *Gate) error {
			_, err := g.Stat(ctx, "sb", "/workspace/a.txt")
			return err
		}, []string{"Stat"}},
		{"ListDir", func(ctx context.Context, g *Gate) error {
			_, err := g.ListDir(ctx, "sb", "/workspace", 1)
			return err
		}, []string{"ListDir"}},
		{"Mkdir", func(ctx context.Context, g *Gate) error {
			return g.Mkdir(ctx, "sb", "/workspace/d")
		}, []string{"Mkdir"}},
		{"Remove", func(ctx context.Context, g *Gate) error {
			return g.Remove(ctx, "sb", "/workspace/a.txt", false)
		}, []string{"Remove"}},
		{"Rename", func(ctx context.Context, g *Gate) error {
			return g.Rename(ctx, "sb", "/workspace/a.txt", "/workspace/b.txt")
		}, []string{"Rename"}},
		{"Upload", func(ctx context.Context, g *Gate) error {
			return g.Upload(ctx, "sb", "/workspace/src", strings.NewReader(""))
		}, []string{"Upload"}},
		{"Download", func(ctx context.Context, g *Gate) error {
			return g.Download(ctx, "sb", "/workspace/out", io.Discard)
		}, []string{"Download"}},
		{"Edit", func(ctx context.Context, g *Gate) error {
			_, err := g.Edit(ctx, "sb", "/workspace/a.txt", "hello", "bye", false)
			return err
		}, []string{"ReadFile", "ReadFile", "Stat", "WriteFile"}},
		{"Glob", func(ctx context.Context, g *Gate) error {
			_, err := g.Glob(ctx, "sb", "/workspace", "**/*.go")
			return err
		}, []string{"ListDir"}},
		{"Grep", func(ctx context.Context, g *Gate) error {
			_, err := g.Grep(ctx, "sb", providers.GrepRequest{Pattern: "x", Path: "/workspace"})
			return err
		}, []string{"Exec"}},
	}
}

func seededFake() *fakeProvider {
	f := newFake()
	f.files["/workspace/a.txt"] = "hello world\n"
	f.modes["/workspace/a.txt"] = 0o600
	return f
}

func mustPolicy(t *testing.T, text string) *Policy {
	t.Helper()
	p, err := ParsePolicy("policy.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGateDeniedNeverReachesProvider(t *testing.T) {
	t.Parallel()
	denyAll := "deny: [\"*\"]\n"
	setups := []struct {
		name     string
		policy   string
		approver func() Approver
		source   Source
		// allowedInner are inner calls permitted before the approver
		// is asked (Edit reads the file to show the diff).
		allowedInner map[string][]string
	}{
		{name: "deny rule", policy: denyAll, source: SourceUser},
		{name: "deny rule with approver", policy: denyAll, approver: func() Approver {
			return ApproverFunc(func(context.Context, Request) (Decision, error) { return Decision{Allow: true}, nil })
		}, source: SourceAgent},
		{name: "default deny", policy: "default: deny\ndeny: [read, list]\n", source: SourceUser},
		{name: "non-interactive ask", policy: "ask: [\"*\"]\n", source: SourceAgent},
		{name: "deny-all approver", policy: "ask: [\"*\"]\n", approver: DenyAll, source: SourceAgent,
			allowedInner: map[string][]string{"Edit": {"ReadFile"}}},
		{name: "user says no", policy: "ask: [\"*\"]\n", approver: func() Approver {
			return ApproverFunc(func(context.Context, Request) (Decision, error) {
				return Decision{Reason: "not today"}, nil
			})
		}, source: SourceScript, allowedInner: map[string][]string{"Edit": {"ReadFile"}}},
	}
	for _, s := range setups {
		for _, c := range gatedCalls() {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				fake := seededFake()
				opts := GateOptions{Policy: mustPolicy(t, s.policy)}
				if s.approver != nil {
					opts.Approver = s.approver()
				}
				g := NewGate(fake, opts)
				err := c.call(WithSource(context.Background(), s.source), g)
				var denied *DeniedError
				if !errors.As(err, &denied) {
					t.Fatalf("%s: error = %v, want a *DeniedError", c.name, err)
				}
				if denied.Hint == "" {
					t.Fatalf("%s: DeniedError without a hint: %v", c.name, err)
				}
				if got, want := fake.Calls(), s.allowedInner[c.name]; !slices.Equal(got, want) {
					t.Fatalf("%s: denied call reached the provider: %v (allowed %v)", c.name, got, want)
				}
			})
		}
	}
}

func TestGateAllowedReachesProvider(t *testing.T) {
	t.Parallel()
	for _, c := range gatedCalls() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := seededFake()
			g := NewGate(fake, GateOptions{Policy: &Policy{Yes: true}})
			if err := c.call(WithSource(context.Background(), SourceAgent), g); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got := fake.Calls(); !slices.Equal(got, c.inner) {
				t.Fatalf("%s: inner calls = %v, want %v", c.name, got, c.inner)
			}
		})
	}
}

func TestGateApproverAllows(t *testing.T) {
	t.Parallel()
	for _, c := range gatedCalls() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := seededFake()
			var mu sync.Mutex
			var asked []Request
			g := NewGate(fake, GateOptions{
				Policy: mustPolicy(t, "ask: [\"*\"]\n"),
				Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, req)
					return Decision{Allow: true}, nil
				}),
			})
			if err := c.call(WithSource(context.Background(), SourceAgent), g); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if len(asked) != 1 {
				t.Fatalf("%s: approver asked %d times, want once", c.name, len(asked))
			}
			if asked[0].Provider != "fake" || asked[0].Sandbox != "sb" || asked[0].Source != SourceAgent {
				t.Fatalf("%s: request = %+v", c.name, asked[0])
			}
		})
	}
}

func TestGateLifecyclePassesThrough(t *testing.T) {
	t.Parallel()
	fake := newFake()
	// Even a deny-everything policy does not govern the lifecycle.
	g := NewGate(fake, GateOptions{Policy: mustPolicy(t, "deny: [\"*\"]\n")})
	ctx := context.Background()
	if _, err := g.Create(ctx, providers.Spec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Get(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.List(ctx, providers.Filter{}); err != nil {
		t.Fatal(err)
	}
	if err := g.Delete(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if got := fake.Calls(); !slices.Equal(got, []string{"Create", "Get", "List", "Delete"}) {
		t.Fatalf("calls = %v", got)
	}
	if g.Name() != "fake" {
		t.Fatalf("Name = %q", g.Name())
	}
}

func TestGateRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []Request
	g := NewGate(seededFake(), GateOptions{
		Policy: &Policy{Yes: true},
		OnEvent: func(e Event) {
			if e.Type == EventDecision {
				mu.Lock()
				got = append(got, e.Request)
				mu.Unlock()
			}
		},
	})
	ctx := WithSource(context.Background(), SourceScript)
	g.Exec(ctx, "sb", providers.ExecRequest{Argv: []string{"echo", "a b"}, Cwd: "/workspace/x"})
	g.Exec(ctx, "sb", providers.ExecRequest{Shell: "echo hi && ls"})
	g.Rename(ctx, "sb", "a", "/workspace/b")
	g.WriteFile(WithDetails(ctx, Details{Diff: "+x", Dest: "/ignored"}), "sb", "rel/f", strings.NewReader(""), 0o644)
	g.Glob(ctx, "sb", "/workspace", "*.go")
	want := []Request{
		{Source: SourceScript, Kind: KindExec, Provider: "fake", Sandbox: "sb", Target: "echo 'a b'", Argv: []string{"echo", "a b"}, Details: Details{Cwd: "/workspace/x"}},
		{Source: SourceScript, Kind: KindExec, Provider: "fake", Sandbox: "sb", Target: "echo hi && ls"},
		{Source: SourceScript, Kind: KindWrite, Provider: "fake", Sandbox: "sb", Target: "/workspace/a", Details: Details{Dest: "/workspace/b"}},
		{Source: SourceScript, Kind: KindWrite, Provider: "fake", Sandbox: "sb", Target: "/workspace/rel/f", Details: Details{Diff: "+x"}},
		{Source: SourceScript, Kind: KindList, Provider: "fake", Sandbox: "sb", Target: "/workspace", Details: Details{Pattern: "*.go"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		a, _ := json.Marshal(got[i])
		b, _ := json.Marshal(want[i])
		if !bytes.Equal(a, b) {
			t.Errorf("request %d:\n got %s\nwant %s", i, a, b)
		}
	}
}

func TestGateRejectsBadInput(t *testing.T) {
	t.Parallel()
	fake := seededFake()
	g := NewGate(fake, GateOptions{Policy: &Policy{Yes: true}})
	ctx := context.Background()
	if _, err := g.Exec(ctx, "sb", providers.ExecRequest{Argv: []string{"ls"}, Shell: "rm -rf /"}); !errors.Is(err, providers.ErrInvalid) {
		t.Fatalf("argv and shell: %v", err)
	}
	if err := g.WriteFile(ctx, "sb", "/workspace/../etc/passwd", strings.NewReader(""), 0o644); !errors.Is(err, providers.ErrInvalid) {
		t.Fatalf("dot-dot path: %v", err)
	}
	if _, err := g.Glob(ctx, "sb", "/workspace", "["); !errors.Is(err, providers.ErrInvalid) {
		t.Fatalf("bad glob: %v", err)
	}
	if got := fake.Calls(); len(got) != 0 {
		t.Fatalf("bad input reached the provider: %v", got)
	}
}

func TestGateSessionRules(t *testing.T) {
	t.Parallel()
	fake := seededFake()
	var asks int
	var mu sync.Mutex
	g := NewGate(fake, GateOptions{
		Policy: mustPolicy(t, "deny: [\"exec:rm *\"]\n"),
		Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
			mu.Lock()
			defer mu.Unlock()
			asks++
			return Decision{Allow: true, SessionRule: strings.Join(SuggestRules(req), ", ")}, nil
		}),
	})
	ctx := WithSource(context.Background(), SourceAgent)
	for range 3 {
		if _, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "go test ./..."}); err != nil {
			t.Fatal(err)
		}
	}
	if asks != 1 {
		t.Fatalf("approver asked %d times, want 1", asks)
	}
	if got := g.SessionRules(); !slices.Equal(got, []string{"exec:go test *"}) {
		t.Fatalf("session rules = %v", got)
	}
	// A session rule does not beat a deny rule.
	if err := g.AllowForSession("exec:*"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "rm -rf /"}); !IsDenied(err) {
		t.Fatalf("rm after exec:* session rule: %v", err)
	}
	if err := g.AllowForSession("bogus:x"); err == nil {
		t.Fatal("AllowForSession accepted a bad rule")
	}
	// A path session rule.
	if err := g.AllowForSession("write:/workspace/**"); err != nil {
		t.Fatal(err)
	}
	if err := g.Mkdir(ctx, "sb", "/workspace/d"); err != nil {
		t.Fatal(err)
	}
	if asks != 1 {
		t.Fatalf("approver asked %d times, want 1", asks)
	}
}

func TestGateEdit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name     string
		content  string
		old, new string
		all      bool
		wantErr  string
		want     string
		wantN    int
		wantDiff string
	}{
		{name: "once", content: "a\nhello\nb\n", old: "hello", new: "bye", want: "a\nbye\nb\n", wantN: 1, wantDiff: "--- a/workspace/f\n+++ b/workspace/f\n@@ -1,3 +1,3 @@\n a\n-hello\n+bye\n b\n"},
		{name: "absent", content: "a\n", old: "hello", new: "bye", wantErr: "not found"},
		{name: "twice", content: "x x\n", old: "x", new: "y", wantErr: "occurs 2 times: add surrounding context to make it unique, or pass --all"},
		{name: "all", content: "x x x\n", old: "x", new: "y", all: true, want: "y y y\n", wantN: 3, wantDiff: "--- a/workspace/f\n+++ b/workspace/f\n@@ -1 +1 @@\n-x x x\n+y y y\n"},
		{name: "empty old", content: "x", old: "", new: "y", wantErr: "empty"},
		{name: "same", content: "x", old: "x", new: "x", wantErr: "same"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			fake.files["/workspace/f"] = tt.content
			fake.modes["/workspace/f"] = 0o755
			var diffs []string
			g := NewGate(fake, GateOptions{
				Policy: mustPolicy(t, "ask: [edit]\n"),
				Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
					if req.Kind != KindEdit {
						t.Errorf("kind = %s, want edit", req.Kind)
					}
					diffs = append(diffs, req.Details.Diff)
					return Decision{Allow: true}, nil
				}),
			})
			res, err := g.Edit(ctx, "sb", "f", tt.old, tt.new, tt.all)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, providers.ErrInvalid) {
					t.Fatalf("Edit error = %v, want ErrInvalid containing %q", err, tt.wantErr)
				}
				if slices.Contains(fake.Calls(), "WriteFile") || len(diffs) != 0 {
					t.Fatalf("failed edit wrote or asked: %v %v", fake.Calls(), diffs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fake.files["/workspace/f"] != tt.want || res.Replacements != tt.wantN {
				t.Fatalf("file = %q, n = %d; want %q, %d", fake.files["/workspace/f"], res.Replacements, tt.want, tt.wantN)
			}
			if fake.modes["/workspace/f"] != 0o755 {
				t.Fatalf("mode = %v, want 0755", fake.modes["/workspace/f"])
			}
			if len(diffs) != 1 || diffs[0] != res.Diff || res.Diff != tt.wantDiff {
				t.Fatalf("diff = %q (asked with %q)", res.Diff, diffs)
			}
		})
	}
}

func TestGateEditFileChangedWhileAsking(t *testing.T) {
	t.Parallel()
	fake := newFake()
	fake.files["/workspace/f"] = "old\n"
	g := NewGate(fake, GateOptions{
		Policy: mustPolicy(t, "ask: [edit]\n"),
		Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
			fake.mu.Lock()
			fake.files["/workspace/f"] = "changed\n"
			fake.mu.Unlock()
			return Decision{Allow: true}, nil
		}),
	})
	if _, err := g.Edit(context.Background(), "sb", "/workspace/f", "old", "new", false); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("Edit error = %v", err)
	}
	if fake.files["/workspace/f"] != "changed\n" {
		t.Fatalf("file overwritten: %q", fake.files["/workspace/f"])
	}
}

func TestGateEditDeniedReadDoesNotRead(t *testing.T) {
	t.Parallel()
	fake := seededFake()
	g := NewGate(fake, GateOptions{Policy: mustPolicy(t, "allow: [edit]\ndeny: [\"read:/workspace/**\"]\n")})
	if _, err := g.Edit(context.Background(), "sb", "/workspace/a.txt", "hello", "bye", false); !IsDenied(err) {
		t.Fatalf("Edit error = %v", err)
	}
	if len(fake.Calls()) != 0 {
		t.Fatalf("calls = %v", fake.Calls())
	}
}

func TestGateGlob(t *testing.T) {
	t.Parallel()
	fake := newFake()
	for _, p := range []string{"/workspace/z.go", "/workspace/a/b.go", "/workspace/a/c.txt", "/workspace/a.go", "/other/x.go"} {
		fake.entries = append(fake.entries, providers.FileInfo{Path: p})
	}
	g := NewGate(fake, GateOptions{})
	tests := []struct {
		pattern string
		want    []string
	}{
		{"*.go", []string{"/workspace/a.go", "/workspace/z.go"}},
		{"**/*.go", []string{"/workspace/a.go", "/workspace/a/b.go", "/workspace/z.go"}},
		{"a/*", []string{"/workspace/a/b.go", "/workspace/a/c.txt"}},
		{"/workspace/a/*.txt", []string{"/workspace/a/c.txt"}},
		{"*.rs", nil},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			t.Parallel()
			got, err := g.Glob(context.Background(), "sb", "/workspace", tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, fi := range got {
				paths = append(paths, fi.Path)
			}
			if !slices.Equal(paths, tt.want) {
				t.Fatalf("Glob(%q) = %v, want %v", tt.pattern, paths, tt.want)
			}
		})
	}
}

func TestGateGrepFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		req      providers.GrepRequest
		stdout   string
		stderr   string
		code     int
		wantArgv []string
		want     []providers.GrepMatch
		wantErr  string
	}{
		{
			name:     "matches",
			req:      providers.GrepRequest{Pattern: "-x|y", Path: "/workspace", Glob: "*.go", IgnoreCase: true},
			stdout:   "/workspace/a.go:3:x := 1\n/workspace/b:c.go:10:y: z\n",
			wantArgv: []string{"grep", "-rnHIE", "-i", "--include=*.go", "--", "-x|y", "/workspace"},
			want:     []providers.GrepMatch{{Path: "/workspace/a.go", Line: 3, Text: "x := 1"}, {Path: "/workspace/b:c.go", Line: 10, Text: "y: z"}},
		},
		{
			name:     "no matches",
			req:      providers.GrepRequest{Pattern: "x", Path: "src"},
			code:     1,
			wantArgv: []string{"grep", "-rnHIE", "--", "x", "/workspace/src"},
		},
		{
			name:     "max matches",
			req:      providers.GrepRequest{Pattern: "x", MaxMatches: 1},
			stdout:   "/workspace/a:1:x\n/workspace/a:2:x\n",
			wantArgv: []string{"grep", "-rnHIE", "--", "x", "/workspace"},
			want:     []providers.GrepMatch{{Path: "/workspace/a", Line: 1, Text: "x"}},
		},
		{
			name:     "error",
			req:      providers.GrepRequest{Pattern: "x", Path: "/nope"},
			stderr:   "grep: /nope: No such file or directory\n",
			code:     2,
			wantArgv: []string{"grep", "-rnHIE", "--", "x", "/nope"},
			wantErr:  "No such file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			fake.execStdout, fake.execStderr, fake.execCode = tt.stdout, tt.stderr, tt.code
			var events []Event
			g := NewGate(fake, GateOptions{Policy: mustPolicy(t, "deny: [exec]\n"), OnEvent: func(e Event) { events = append(events, e) }})
			got, err := g.Grep(WithSource(context.Background(), SourceAgent), "sb", tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Grep error = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Grep = %+v, want %+v", got, tt.want)
			}
			if len(fake.execs) != 1 || !slices.Equal(fake.execs[0].Argv, tt.wantArgv) || fake.execs[0].Shell != "" {
				t.Fatalf("exec = %+v, want argv %q", fake.execs, tt.wantArgv)
			}
			// One list decision, not an exec one: the exec is the
			// implementation of an approved grep.
			if len(events) != 3 || events[0].Request.Kind != KindList || events[2].Type != EventOperation {
				t.Fatalf("events = %+v", events)
			}
		})
	}
}

func TestGateGrepNative(t *testing.T) {
	t.Parallel()
	fake := &grepFake{fakeProvider: newFake()}
	g := NewGate(fake, GateOptions{})
	got, err := g.Grep(context.Background(), "sb", providers.GrepRequest{Pattern: "x", Path: "a"})
	if err != nil || len(got) != 1 {
		t.Fatalf("Grep = %v, %v", got, err)
	}
	if fake.got.Path != "/workspace/a" || fake.got.MaxMatches != defaultMaxMatches {
		t.Fatalf("native grep got %+v", fake.got)
	}
	if slices.Contains(fake.Calls(), "Exec") {
		t.Fatal("native grep fell back to exec")
	}
}

func TestGateCancelWhileAsking(t *testing.T) {
	t.Parallel()
	fake := seededFake()
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	g := NewGate(fake, GateOptions{
		Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
			close(started)
			<-release // an approver that ignores ctx
			return Decision{Allow: true}, nil
		}),
	})
	ctx, cancel := context.WithCancel(WithSource(context.Background(), SourceAgent))
	go func() {
		<-started
		cancel()
	}()
	_, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "ls"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec error = %v, want context.Canceled", err)
	}
	if len(fake.Calls()) != 0 {
		t.Fatalf("calls = %v", fake.Calls())
	}
}

func TestGateAuditAndMask(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state", "audit.jsonl")
	audit, err := OpenAudit(file)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	fake := seededFake()
	fake.execCode = 7
	clock := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	var events []Event
	g := NewGate(fake, GateOptions{
		Policy: mustPolicy(t, "deny: [\"exec:curl *\"]\nallow: [\"exec:echo *\"]\n"),
		Audit:  audit,
		Mask:   func(s string) string { return strings.ReplaceAll(s, "s3cret", "***") },
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(250 * time.Millisecond)
			return clock
		},
		OnEvent: func(e Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
	})
	ctx := WithSource(context.Background(), SourceAgent)
	if res, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: "echo s3cret"}); err != nil || res.ExitCode != 7 {
		t.Fatalf("Exec = %v, %v", res, err)
	}
	_, err = g.Exec(ctx, "sb", providers.ExecRequest{Shell: "curl -H 'token: s3cret' x"})
	if !IsDenied(err) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("denied error = %v", err)
	}
	if _, err := g.ReadFile(ctx, "sb", "/workspace/s3cret.txt"); !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("ReadFile error = %v", err)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("s3cret")) {
		t.Fatalf("secret in audit log:\n%s", data)
	}
	recs := eventstest.New(t).Lines(t, data)
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Type+"/"+r.Status)
	}
	want := []string{
		"call.requested/", "call.decided/", "call.completed/failed",
		"call.requested/", "call.decided/", "call.completed/denied",
		"call.requested/", "call.decided/", "call.completed/error",
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("audit events %v, want %v:\n%s", kinds, want, data)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"exec target", recs[0].Target, "echo ***"},
		{"exec source", recs[0].Source, "agent"},
		{"exec provider", recs[0].Provider, "fake"},
		{"exec sandbox", recs[0].SandboxID, "sb"},
		{"exec allowed", *recs[1].Allow, true},
		{"exec rule", recs[1].Rule, `policy.yaml:2: allow "exec:echo *"`},
		{"exec exit code", *recs[2].ExitCode, 7},
		{"exec duration", *recs[2].DurationMS, int64(250)},
		{"one call id", recs[2].CallID, recs[0].CallID},
		{"curl target", recs[3].Target, "curl -H 'token: ***' x"},
		{"curl denied", *recs[4].Allow, false},
		{"curl by", recs[4].By, "policy"},
		{"read kind", recs[6].Kind, "read"},
		{"read target", recs[6].Target, "/workspace/***.txt"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if e := recs[8].Error; !strings.Contains(e, "not found") || strings.Contains(e, "s3cret") {
		t.Errorf("error = %v", e)
	}

	// In process: requested, decision, operation for each call.
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
		if b, _ := json.Marshal(e); bytes.Contains(b, []byte("s3cret")) {
			t.Errorf("secret in event %s", b)
		}
	}
	if want := []string{"requested", "decision", "operation", "requested", "decision", "requested", "decision", "operation"}; !slices.Equal(types, want) {
		t.Fatalf("event types = %v, want %v", types, want)
	}
	if e := events[2]; e.Type != EventOperation || *e.ExitCode != 7 || e.DurationMS != 250 || !e.Decision.Allow || e.CallID != events[0].CallID {
		t.Errorf("operation event %+v", e)
	}
}

func TestAuditConcurrent(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	// Two logs on one file stand in for two processes.
	a1, err := OpenAudit(file)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := OpenAudit(file)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 10000)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			a := a1
			if i%2 == 1 {
				a = a2
			}
			if err := a.Write(ev.Event{Type: ev.CallRequested, Target: long, SandboxID: fmt.Sprint(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	a1.Close()
	a2.Close()
	if err := a1.Write(ev.Event{}); err == nil {
		t.Fatal("write after close succeeded")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 40 {
		t.Fatalf("got %d lines, want 40", len(lines))
	}
	for _, l := range lines {
		var rec ev.Event
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Target != long {
			t.Fatalf("corrupt line (%v): %.80s", err, l)
		}
	}
	var nilLog *AuditLog
	if err := nilLog.Write(ev.Event{}); err != nil {
		t.Fatal(err)
	}
}

func TestGateConcurrent(t *testing.T) {
	t.Parallel()
	audit, err := OpenAudit(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	fake := seededFake()
	g := NewGate(fake, GateOptions{
		Audit: audit,
		Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
			return Decision{Allow: true, SessionRule: strings.Join(SuggestRules(req), ", ")}, nil
		}),
	})
	ctx := WithSource(context.Background(), SourceAgent)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := g.Exec(ctx, "sb", providers.ExecRequest{Shell: fmt.Sprintf("go test ./p%d", i%3)}); err != nil {
				t.Error(err)
			}
			if err := g.WriteFile(ctx, "sb", fmt.Sprintf("/workspace/d%d/f", i%2), strings.NewReader("x"), 0o644); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(fake.Calls()); n != 40 {
		t.Fatalf("calls = %d, want 40", n)
	}
}
