package fake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

func newSandbox(t *testing.T, spec providers.Spec) (*fake.Provider, string) {
	t.Helper()
	p := fake.New()
	info, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return p, info.ID
}

func TestRegistration(t *testing.T) {
	t.Parallel()
	reg := fake.Registration()
	if reg.Name != "fake" || !reg.Hidden {
		t.Errorf("Registration = %+v, want a hidden provider named fake", reg)
	}
	p, err := reg.New(providers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Capabilities() != reg.Capabilities {
		t.Errorf("Capabilities() = %+v, Registration says %+v", p.Capabilities(), reg.Capabilities)
	}
	want := providers.Capabilities{Network: true, TTL: true, Labels: true, Stdin: true, Image: true}
	if reg.Capabilities != want {
		t.Errorf("Capabilities = %+v, want %+v", reg.Capabilities, want)
	}
	if _, ok := p.(providers.Grepper); !ok {
		t.Errorf("the fake should implement providers.Grepper")
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t, providers.Spec{Env: map[string]string{"B": "spec", "A": "1"}})
	if err := p.WriteFile(t.Context(), id, "/workspace/f.txt", strings.NewReader("file body\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		req       providers.ExecRequest
		stdout    string
		stderrHas string
		code      int
		then      string // a file whose contents are checked afterwards
		thenBody  string
	}{
		{name: "true", req: providers.ExecRequest{Argv: []string{"true"}}},
		{name: "false", req: providers.ExecRequest{Argv: []string{"false"}}, code: 1},
		{name: "exit", req: providers.ExecRequest{Shell: "exit 7"}, code: 7},
		{name: "exit-stops", req: providers.ExecRequest{Shell: "echo a; exit 2; echo b"}, stdout: "a\n", code: 2},
		{name: "exit-argv", req: providers.ExecRequest{Argv: []string{"exit", "3"}}, code: 127, stderrHas: "command not found"},
		{name: "echo", req: providers.ExecRequest{Argv: []string{"echo", "a", "b c"}}, stdout: "a b c\n"},
		{name: "echo-n", req: providers.ExecRequest{Shell: "echo -n x"}, stdout: "x"},
		{name: "quotes", req: providers.ExecRequest{Shell: `echo 'a  b' "c;d"`}, stdout: "a  b c;d\n"},
		{name: "cat-stdin", req: providers.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("in")}, stdout: "in"},
		{name: "cat-file", req: providers.ExecRequest{Argv: []string{"cat", "f.txt"}}, stdout: "file body\n"},
		{name: "cat-missing", req: providers.ExecRequest{Argv: []string{"cat", "nope"}}, code: 1, stderrHas: "nope"},
		{name: "pwd", req: providers.ExecRequest{Argv: []string{"pwd"}}, stdout: "/workspace\n"},
		{name: "pwd-cwd", req: providers.ExecRequest{Argv: []string{"pwd"}, Cwd: "/tmp"}, stdout: "/tmp\n"},
		{name: "env", req: providers.ExecRequest{Argv: []string{"env"}, Env: map[string]string{"B": "req", "C": "3"}}, stdout: "A=1\nB=req\nC=3\n"},
		{name: "sequence", req: providers.ExecRequest{Shell: "echo a; false\necho b"}, stdout: "a\nb\n"},
		{name: "sequence-status", req: providers.ExecRequest{Shell: "true; false"}, code: 1},
		{name: "not-found", req: providers.ExecRequest{Argv: []string{"python3"}}, code: 127, stderrHas: "python3: command not found"},
		{name: "pipe", req: providers.ExecRequest{Shell: "echo a | cat"}, code: 2, stderrHas: "not supported"},
		{name: "redirect", req: providers.ExecRequest{Shell: "echo hi > out.txt"}, then: "/workspace/out.txt", thenBody: "hi\n"},
		{name: "redirect-append", req: providers.ExecRequest{Shell: "echo 1 > app.txt; echo 2 >>app.txt"}, then: "/workspace/app.txt", thenBody: "1\n2\n"},
		{name: "redirect-no-dir", req: providers.ExecRequest{Shell: "echo hi > /no/dir/x"}, code: 2, stderrHas: "cannot create"},
		{name: "sleep", req: providers.ExecRequest{Shell: "sleep 0.01; echo done"}, stdout: "done\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			tc.req.Stdout, tc.req.Stderr = &stdout, &stderr
			res, err := p.Exec(t.Context(), id, tc.req)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if res.ExitCode != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderrHas) {
				t.Errorf("Exec = exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
					res.ExitCode, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderrHas)
			}
			if tc.then != "" {
				rc, err := p.ReadFile(t.Context(), id, tc.then)
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				var body bytes.Buffer
				_, _ = body.ReadFrom(rc)
				if body.String() != tc.thenBody {
					t.Errorf("%s = %q, want %q", tc.then, body.String(), tc.thenBody)
				}
			}
		})
	}
}

func TestExecErrors(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t, providers.Spec{})
	tests := []struct {
		name string
		req  providers.ExecRequest
		ctx  func() context.Context
		want error
	}{
		{name: "fail-start", req: providers.ExecRequest{Argv: []string{"fail-start"}}, want: providers.ErrUnavailable},
		{name: "timeout", req: providers.ExecRequest{Shell: "sleep 30", Timeout: 20 * time.Millisecond}, want: providers.ErrTimeout},
		{name: "cancel", req: providers.ExecRequest{Argv: []string{"sleep", "30s"}}, want: context.Canceled, ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx
		}},
		{name: "no-command", req: providers.ExecRequest{}, want: providers.ErrInvalid},
		{name: "both", req: providers.ExecRequest{Argv: []string{"true"}, Shell: "true"}, want: providers.ErrInvalid},
		{name: "missing-cwd", req: providers.ExecRequest{Argv: []string{"pwd"}, Cwd: "/nope"}, want: providers.ErrNotFound},
		{name: "missing-sandbox", req: providers.ExecRequest{Argv: []string{"true"}}, want: providers.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			sb := id
			if tc.name == "missing-sandbox" {
				sb = "fake-999"
			}
			start := time.Now()
			_, err := p.Exec(ctx, sb, tc.req)
			if !errors.Is(err, tc.want) {
				t.Errorf("Exec = %v, want an error matching %v", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Exec took %v", d)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	p := fake.New()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	p.SetClock(func() time.Time { return now })
	ctx := t.Context()
	a, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"k": "a"}, TTL: time.Hour, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"k": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "fake-1" || b.ID != "fake-2" || !a.CreatedAt.Equal(now) || !a.ExpiresAt.Equal(now.Add(time.Hour)) || a.Image != "img" {
		t.Errorf("Create = %+v, %+v", a, b)
	}
	all, _ := p.List(ctx, providers.Filter{})
	if got := []string{all[0].ID, all[1].ID}; !slices.Equal(got, []string{"fake-1", "fake-2"}) || len(all) != 2 {
		t.Errorf("List = %v", all)
	}
	some, _ := p.List(ctx, providers.Filter{Labels: map[string]string{"k": "b"}})
	if len(some) != 1 || some[0].ID != "fake-2" {
		t.Errorf("List(k=b) = %v", some)
	}
	// Returned labels are copies.
	a.Labels["k"] = "changed"
	if got, _ := p.Get(ctx, "fake-1"); got.Labels["k"] != "a" {
		t.Errorf("Get after mutating a returned Info: labels %v", got.Labels)
	}
	// The TTL expires with the clock.
	now = now.Add(2 * time.Hour)
	if _, err := p.Get(ctx, "fake-1"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Get of an expired sandbox = %v, want ErrNotFound", err)
	}
	if _, err := p.Create(ctx, providers.Spec{Resources: providers.Resources{CPUs: 1}}); !errors.Is(err, providers.ErrUnsupported) {
		t.Errorf("Create with Resources = %v, want ErrUnsupported", err)
	}
}

func TestFailNextAndCalls(t *testing.T) {
	t.Parallel()
	p := fake.New()
	ctx := t.Context()
	boom := errors.New("boom")
	p.FailNext("Create", boom)
	p.FailNext("Create", providers.ErrQuota)
	if _, err := p.Create(ctx, providers.Spec{}); !errors.Is(err, boom) {
		t.Errorf("first Create = %v, want boom", err)
	}
	if _, err := p.Create(ctx, providers.Spec{}); !errors.Is(err, providers.ErrQuota) {
		t.Errorf("second Create = %v, want ErrQuota", err)
	}
	info, err := p.Create(ctx, providers.Spec{})
	if err != nil {
		t.Fatalf("third Create = %v, want success", err)
	}
	p.ResetCalls()
	var buf bytes.Buffer
	if err := p.Download(ctx, info.ID, "/workspace", &buf); err != nil {
		t.Fatal(err)
	}
	if err := p.Upload(ctx, info.ID, "/workspace/x", &buf); err != nil {
		t.Fatal(err)
	}
	if got := p.Calls(); !slices.Equal(got, []string{"Download", "Upload"}) {
		t.Errorf("Calls = %v, want [Download Upload] (internal file operations are not recorded)", got)
	}
	p.FailNext("WriteFile", providers.ErrAuth)
	if err := p.WriteFile(ctx, info.ID, "/workspace/a", strings.NewReader("a"), 0o644); !errors.Is(err, providers.ErrAuth) {
		t.Errorf("WriteFile = %v, want ErrAuth", err)
	}
	if _, err := p.Stat(ctx, info.ID, "/workspace/a"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("a failed WriteFile still wrote (Stat err %v)", err)
	}
}

func TestSymlinksNotFollowed(t *testing.T) {
	t.Parallel()
	p, id := newSandbox(t, providers.Spec{})
	ctx := t.Context()
	if err := p.WriteFile(ctx, id, "/workspace/real/a.txt", strings.NewReader("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Symlink(ctx, id, "/workspace/real", "/workspace/link"); err != nil {
		t.Fatal(err)
	}
	fi, err := p.Stat(ctx, id, "/workspace/link")
	if err != nil || fi.Target != "/workspace/real" || fi.IsDir() {
		t.Errorf("Stat(link) = %+v, %v", fi, err)
	}
	if _, err := p.ReadFile(ctx, id, "/workspace/link/a.txt"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("ReadFile through a symlink = %v, want ErrNotFound", err)
	}
	if err := p.WriteFile(ctx, id, "/workspace/link/b.txt", strings.NewReader("b"), 0o644); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("WriteFile through a symlink = %v, want ErrInvalid", err)
	}
	if _, err := p.ReadFile(ctx, id, "/workspace/link"); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ReadFile of a symlink = %v, want ErrInvalid", err)
	}
}

// TestConcurrent is for the race detector.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	p := fake.New()
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			info, err := p.Create(ctx, providers.Spec{Labels: map[string]string{"i": fmt.Sprint(i)}})
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 20 {
				path := fmt.Sprintf("/workspace/%d.txt", j)
				if err := p.WriteFile(ctx, info.ID, path, strings.NewReader("x"), 0o644); err != nil {
					t.Error(err)
				}
				if _, err := p.Exec(ctx, info.ID, providers.ExecRequest{Shell: "cat " + path + " > copy.txt"}); err != nil {
					t.Error(err)
				}
				_, _ = p.List(ctx, providers.Filter{})
				_ = p.Calls()
			}
			if err := p.Delete(ctx, info.ID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
