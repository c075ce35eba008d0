//go:build linux

package modal_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// sdkApp returns the official SDK's client pointed at the harness, a
// context that ends after timeout (or with the test), and the app name,
// created if missing.
func (h *harness) sdkApp(t *testing.T, name string, timeout time.Duration) (context.Context, *modalsdk.Client, *modalsdk.App) {
	t.Helper()
	c := h.sdkClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	app, err := c.Apps.FromName(ctx, name, &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatalf("Apps.FromName(%s): %v", name, err)
	}
	return ctx, c, app
}

// sdkClient returns Modal's official Go SDK client, unchanged, pointed at
// the harness the way a user points it: MODAL_SERVER_URL and the token.
func (h *harness) sdkClient(t *testing.T) *modalsdk.Client {
	t.Helper()
	t.Setenv("MODAL_SERVER_URL", h.url)
	t.Setenv("MODAL_CONFIG_PATH", t.TempDir()+"/none.toml")
	t.Setenv("MODAL_TOKEN_ID", "ak-test")
	t.Setenv("MODAL_TOKEN_SECRET", testSecret)
	c, err := modalsdk.NewClient()
	if err != nil {
		t.Fatalf("modal.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestSDKFlow drives the official Go SDK through the sandbox operations a
// user's program makes: create with tags and env, exec with streams,
// stdin and exit codes, the filesystem API, tags, list, lookup by name
// and id, and terminate.
func TestSDKFlow(t *testing.T) {
	h := newHarness(t)
	c := h.sdkClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	app, err := c.Apps.FromName(ctx, "sdk-flow", &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatalf("Apps.FromName: %v", err)
	}
	if _, err := c.Apps.FromName(ctx, "no-such-app", nil); err == nil {
		t.Errorf("Apps.FromName(no-such-app) without CreateIfMissing: no error")
	}
	image := c.Images.FromRegistry("alpine:3.21", nil)
	sb, err := c.Sandboxes.Create(ctx, app, image, &modalsdk.SandboxCreateParams{
		Name: "flow",
		Tags: map[string]string{"team": "a"},
		Env:  map[string]string{"FROM_CREATE": "yes"},
	})
	if err != nil {
		t.Fatalf("Sandboxes.Create: %v", err)
	}
	defer func() { _, _ = sb.Terminate(context.WithoutCancel(ctx), nil) }()

	t.Run("exec", func(t *testing.T) {
		cases := []struct {
			name           string
			argv           []string
			params         *modalsdk.SandboxExecParams
			stdin          string
			stdout, stderr string
			code           int
		}{
			{name: "streams and exit code", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, stdout: "out\n", stderr: "err\n", code: 3},
			{name: "stdin", argv: []string{"cat"}, stdin: "piped\n", stdout: "piped\n"},
			{name: "env from create and exec", argv: []string{"sh", "-c", "echo $FROM_CREATE $FROM_EXEC"},
				params: &modalsdk.SandboxExecParams{Env: map[string]string{"FROM_EXEC": "too"}}, stdout: "yes too\n"},
			{name: "workdir", argv: []string{"pwd"}, params: &modalsdk.SandboxExecParams{Workdir: "/tmp"}, stdout: "/tmp\n"},
			{name: "missing program", argv: []string{"no-such-program-here"}, code: 127},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := sb.Exec(ctx, tc.argv, tc.params)
				if err != nil {
					t.Fatalf("Exec(%q): %v", tc.argv, err)
				}
				if tc.stdin != "" {
					if _, err := p.Stdin.Write([]byte(tc.stdin)); err != nil {
						t.Fatalf("stdin write: %v", err)
					}
				}
				if err := p.Stdin.Close(); err != nil {
					t.Fatalf("stdin close: %v", err)
				}
				stdout, err := io.ReadAll(p.Stdout)
				if err != nil {
					t.Fatalf("read stdout: %v", err)
				}
				stderr, err := io.ReadAll(p.Stderr)
				if err != nil {
					t.Fatalf("read stderr: %v", err)
				}
				code, err := p.Wait(ctx, nil)
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
				if code != tc.code || string(stdout) != tc.stdout || (tc.stderr != "" && string(stderr) != tc.stderr) {
					t.Errorf("Exec(%q) = exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q",
						tc.argv, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
				}
			})
		}
	})

	t.Run("filesystem", func(t *testing.T) {
		fsys := sb.Filesystem
		if err := fsys.WriteText(ctx, "hello modal", "/tmp/flow/a.txt", nil); err != nil {
			t.Fatalf("WriteText: %v", err)
		}
		if got, err := fsys.ReadText(ctx, "/tmp/flow/a.txt", nil); err != nil || got != "hello modal" {
			t.Errorf("ReadText = %q, %v; want %q", got, err, "hello modal")
		}
		_, err := fsys.ReadText(ctx, "/tmp/flow/missing.txt", nil)
		var nf modalsdk.SandboxFilesystemNotFoundError
		if !errors.As(err, &nf) {
			t.Errorf("ReadText(missing) error = %v (%T), want SandboxFilesystemNotFoundError", err, err)
		}
		if err := fsys.MakeDirectory(ctx, "/tmp/flow/sub/deeper", nil); err != nil {
			t.Fatalf("MakeDirectory: %v", err)
		}
		entries, err := fsys.ListFiles(ctx, "/tmp/flow", nil)
		if err != nil {
			t.Fatalf("ListFiles: %v", err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name+":"+string(e.Type))
		}
		if want := []string{"a.txt:file", "sub:directory"}; !slices.Equal(names, want) {
			t.Errorf("ListFiles = %v, want %v", names, want)
		}
		st, err := fsys.Stat(ctx, "/tmp/flow/a.txt", nil)
		if err != nil || st.Size != int64(len("hello modal")) || st.Type != modalsdk.FileTypeFile {
			t.Errorf("Stat = %+v, %v; want a file of %d bytes", st, err, len("hello modal"))
		}
		if err := fsys.Remove(ctx, "/tmp/flow/sub", nil); err == nil {
			t.Errorf("Remove(non-empty directory) without Recursive: no error")
		}
		if err := fsys.Remove(ctx, "/tmp/flow/sub", &modalsdk.SandboxFilesystemRemoveParams{Recursive: true}); err != nil {
			t.Errorf("Remove(recursive): %v", err)
		}
		if _, err := fsys.Stat(ctx, "/tmp/flow/sub", nil); !errors.As(err, &nf) {
			t.Errorf("Stat after Remove: %v, want SandboxFilesystemNotFoundError", err)
		}
	})

	t.Run("tags and list", func(t *testing.T) {
		if err := sb.SetTags(ctx, map[string]string{"team": "b", "env": "test"}, nil); err != nil {
			t.Fatalf("SetTags: %v", err)
		}
		tags, err := sb.GetTags(ctx, nil)
		if want := map[string]string{"team": "b", "env": "test"}; err != nil || !maps.Equal(tags, want) {
			t.Errorf("GetTags = %v, %v; want %v", tags, err, want)
		}
		count := func(tags map[string]string) int {
			seq, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{AppID: app.AppID, Tags: tags})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			n := 0
			for got, err := range seq {
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				if got.SandboxID == sb.SandboxID {
					n++
				}
			}
			return n
		}
		if n := count(map[string]string{"team": "b"}); n != 1 {
			t.Errorf("List(team=b) found the sandbox %d times, want 1", n)
		}
		if n := count(map[string]string{"team": "a"}); n != 0 {
			t.Errorf("List(team=a) found the sandbox after its tags were replaced")
		}
	})

	t.Run("lookup", func(t *testing.T) {
		byName, err := c.Sandboxes.FromName(ctx, "sdk-flow", "flow", nil)
		if err != nil || byName.SandboxID != sb.SandboxID {
			t.Fatalf("FromName = %v, %v; want %s", byName, err, sb.SandboxID)
		}
		var nf modalsdk.NotFoundError
		if _, err := c.Sandboxes.FromName(ctx, "sdk-flow", "nobody", nil); !errors.As(err, &nf) {
			t.Errorf("FromName(nobody) error = %v, want NotFoundError", err)
		}
		byID, err := c.Sandboxes.FromID(ctx, sb.SandboxID, nil)
		if err != nil {
			t.Fatalf("FromID: %v", err)
		}
		p, err := byID.Exec(ctx, []string{"echo", "again"}, nil)
		if err != nil {
			t.Fatalf("Exec through FromID: %v", err)
		}
		out, _ := io.ReadAll(p.Stdout)
		if strings.TrimSpace(string(out)) != "again" {
			t.Errorf("Exec through FromID printed %q", out)
		}
		if code, err := byID.Poll(ctx, nil); err != nil || code != nil {
			t.Errorf("Poll of a running sandbox = %v, %v; want nil, nil", code, err)
		}
	})

	t.Run("entrypoint", func(t *testing.T) {
		cases := []struct {
			name   string
			params *modalsdk.SandboxCreateParams
			stdin  string
			stdout string
			code   int
		}{
			{name: "cat echoes stdin", params: &modalsdk.SandboxCreateParams{Command: []string{"cat"}}, stdin: "to main\n", stdout: "to main\n"},
			{name: "exit code and workdir", params: &modalsdk.SandboxCreateParams{Command: []string{"sh", "-c", "pwd; exit 5"}, Workdir: "/tmp/wd"}, stdout: "/tmp/wd\n", code: 5},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				main, err := c.Sandboxes.Create(ctx, app, image, tc.params)
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				defer func() { _, _ = main.Terminate(context.WithoutCancel(ctx), nil) }()
				if tc.stdin != "" {
					if _, err := main.Stdin.Write([]byte(tc.stdin)); err != nil {
						t.Fatalf("stdin: %v", err)
					}
				}
				if err := main.Stdin.Close(); err != nil {
					t.Fatalf("stdin close: %v", err)
				}
				out, err := io.ReadAll(main.Stdout)
				if err != nil {
					t.Fatalf("read stdout: %v", err)
				}
				code, err := main.Wait(ctx, nil)
				if err != nil || code != tc.code || string(out) != tc.stdout {
					t.Errorf("entrypoint %q: exit %d (%v), stdout %q; want exit %d, stdout %q", tc.params.Command, code, err, out, tc.code, tc.stdout)
				}
			})
		}
	})

	t.Run("terminate", func(t *testing.T) {
		code, err := sb.Terminate(ctx, &modalsdk.SandboxTerminateParams{Wait: true})
		if err != nil || code != 137 {
			t.Fatalf("Terminate{Wait} = %d, %v; want 137", code, err)
		}
		if _, err := sb.Terminate(ctx, nil); err != nil {
			t.Errorf("a second Terminate: %v", err)
		}
		if code, err := sb.Poll(ctx, nil); err != nil || code == nil || *code != 137 {
			t.Errorf("Poll after Terminate = %v, %v; want 137", code, err)
		}
	})
}
