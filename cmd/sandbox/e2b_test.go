package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServeE2B starts `sandbox serve --api e2b` from the built binary
// and returns the E2B_* variables it printed.
func startServeE2B(t *testing.T, c *runner, key string) map[string]string {
	t.Helper()
	env, _ := startServe(t, c, 3, "--api", "e2b", "--api-key", key)
	if env["E2B_API_URL"] == "" || env["E2B_SANDBOX_URL"] != env["E2B_API_URL"] || env["E2B_API_KEY"] != key {
		t.Fatalf("serve printed %v, want E2B_API_URL, E2B_SANDBOX_URL and the key", env)
	}
	return env
}

// startServe starts `sandbox serve` with args (and a free loopback
// address) from c's binary, stopped with SIGINT when the test ends, and
// returns the first n variables it printed as export lines, and its pid.
func startServe(t *testing.T, c *runner, n int, args ...string) (map[string]string, int) {
	t.Helper()
	serve := c.command(append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve after SIGINT: %v, want a clean exit", err)
			}
		case <-time.After(20 * time.Second):
			_ = serve.Process.Kill()
			t.Error("serve did not stop within 20s of SIGINT")
		}
	})
	env := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for len(env) < n && sc.Scan() {
		kv, ok := strings.CutPrefix(sc.Text(), "export ")
		if k, v, ok2 := strings.Cut(kv, "="); ok && ok2 {
			env[k] = v
		}
	}
	return env, serve.Process.Pid
}

// TestE2BCredentialExitCodes starts `sandbox serve --api e2b` from the built
// binary and checks the exit status of the e2b provider with a missing, a
// rejected and a good key.
func TestE2BCredentialExitCodes(t *testing.T) {
	bin := buildBinary(t)
	c := newRunner(t, bin)
	const key = "e2b_00112233445566778899aabbccddeeff00112233"
	env := startServeE2B(t, c, key)
	run := func(apiKey string, args ...string) (int, string) {
		cmd := c.command(append([]string{"--sandbox", "e2b"}, args...)...)
		cmd.Env = append(cmd.Env, "E2B_API_URL="+env["E2B_API_URL"], "E2B_SANDBOX_URL="+env["E2B_SANDBOX_URL"])
		if apiKey != "" {
			cmd.Env = append(cmd.Env, "E2B_API_KEY="+apiKey)
		}
		out, err := cmd.CombinedOutput()
		return exitCodeOf(err), string(out)
	}
	tests := []struct {
		name, key string
		code      int
		want      string
	}{
		{"missing key", "", 4, "set E2B_API_KEY"},
		{"rejected key", "e2b_not_the_key", 4, "credentials rejected: check E2B_API_KEY"},
		{"good key", key, 0, "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := run(tt.key, "exec", "--", "echo", "hello")
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output %q; want exit %d and %q", code, out, tt.code, tt.want)
			}
		})
	}
	c.assertNoLeak()
}

// TestTUIOnE2B opens the TUI with --sandbox e2b against `sandbox serve --api
// e2b`: the status line names the provider, a command's output streams
// back through our E2B client, a /write asks with its diff, and quitting
// deletes the E2B sandbox it created.
func TestTUIOnE2B(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	const key = "e2b_0123456789abcdef0123456789abcdef01234567"
	env := startServeE2B(t, c, key)
	termEnv := c.command().Env
	for k, v := range env {
		termEnv = append(termEnv, k+"="+v)
	}
	policy := filepath.Join(c.dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("default: ask\nallow: [\"exec:echo *\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startTmuxSized(t, c.dir, termEnv, c.bin+" --sandbox e2b --policy "+policy, 120, 40)
	scr := s.waitForRe(`ready: e2b sandbox [a-z0-9]+\.`)
	id := regexp.MustCompile(`ready: e2b sandbox ([a-z0-9]+)\.`).FindStringSubmatch(scr)[1]
	if status := strings.SplitN(scr, "\n", 2)[0]; !strings.Contains(status, "e2b") || !strings.Contains(status, id) {
		t.Fatalf("status line %q lacks the provider or the id %s", status, id)
	}

	s.typeLine("!echo through-e2b")
	s.waitForRe(`(?m)^through-e2b\s*$`)

	s.typeLine("/write /workspace/n.txt first-line")
	scr = s.waitFor("user wants to write")
	for _, want := range []string{"+++ b/workspace/n.txt", "+first-line", "[y] allow once"} {
		if !strings.Contains(scr, want) {
			t.Fatalf("the dialog lacks %q:\n%s", want, scr)
		}
	}
	s.answer("y")
	s.waitFor("wrote /workspace/n.txt")

	list := func() string {
		cmd := c.command("--sandbox", "e2b", "list")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("e2b list: %v\n%s", err, out)
		}
		return string(out)
	}
	if !strings.Contains(list(), id) {
		t.Fatalf("e2b list lacks %s while the TUI is open", id)
	}
	s.typeLine("/quit")
	s.waitFor("Delete it?")
	s.answer("d")
	if scr := s.waitFor("EXIT="); !strings.Contains(scr, "EXIT=0") {
		t.Fatalf("want exit 0 after quitting; screen:\n%s", scr)
	}
	if out := list(); strings.Contains(out, id) {
		t.Fatalf("e2b sandbox %s still listed after quitting with delete:\n%s", id, out)
	}
}
