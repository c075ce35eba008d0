package main

import (
	"bufio"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2BCredentialExitCodes starts `sandbox serve --api e2b` from the built
// binary and checks the exit status of the e2b provider with a missing, a
// rejected and a good key.
func TestE2BCredentialExitCodes(t *testing.T) {
	bin := buildBinary(t)
	c := newRunner(t, bin)
	const key = "e2b_00112233445566778899aabbccddeeff00112233"
	serve := c.command("serve", "--api", "e2b", "--addr", "127.0.0.1:0", "--api-key", key)
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
	for len(env) < 3 && sc.Scan() {
		kv, ok := strings.CutPrefix(sc.Text(), "export ")
		if k, v, ok2 := strings.Cut(kv, "="); ok && ok2 {
			env[k] = v
		}
	}
	if env["E2B_API_URL"] == "" || env["E2B_SANDBOX_URL"] != env["E2B_API_URL"] || env["E2B_API_KEY"] != key {
		t.Fatalf("serve printed %v, want E2B_API_URL, E2B_SANDBOX_URL and the key", env)
	}
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
