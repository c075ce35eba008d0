package providertest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// execChecks checks Exec: output, exit codes, cwd, env, stdin, streaming,
// timeouts and cancellation.
func (s *suite) execChecks(t *testing.T) {
	id := s.create(t, "exec").ID
	caps := s.p.Capabilities()

	outputs := []struct {
		name       string
		req        providers.ExecRequest
		wantStdout string
		wantCode   int
	}{
		{"echo-argv", providers.ExecRequest{Argv: []string{"echo", "hello"}}, "hello\n", 0},
		{"echo-shell", providers.ExecRequest{Shell: "echo hello"}, "hello\n", 0},
		{"sequence", providers.ExecRequest{Shell: "echo a; echo b"}, "a\nb\n", 0},
		{"true", providers.ExecRequest{Argv: []string{"true"}}, "", 0},
		{"false", providers.ExecRequest{Argv: []string{"false"}}, "", 1},
		{"exit-3", providers.ExecRequest{Shell: "exit 3"}, "", 3},
		{"output-then-exit", providers.ExecRequest{Shell: "echo out; exit 42"}, "out\n", 42},
	}
	for _, tc := range outputs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := s.exec(t, id, tc.req)
			if out.err != nil {
				t.Fatalf("Exec(%s): err = %v, want nil (a command that ran returns its status with a nil error)", describe(tc.req), out.err)
			}
			if out.res.ExitCode != tc.wantCode {
				t.Errorf("Exec(%s): ExitCode = %d, want %d (stderr %q)", describe(tc.req), out.res.ExitCode, tc.wantCode, out.stderr)
			}
			if out.stdout != tc.wantStdout {
				t.Errorf("Exec(%s): stdout = %q, want %q", describe(tc.req), out.stdout, tc.wantStdout)
			}
			if out.stderr != "" {
				t.Errorf("Exec(%s): stderr = %q, want it empty (stdout and stderr must stay separate)", describe(tc.req), out.stderr)
			}
		})
	}

	t.Run("missing-command", func(t *testing.T) {
		t.Parallel()
		name := "providertest-no-such-command-" + s.run
		for _, req := range []providers.ExecRequest{{Argv: []string{name}}, {Shell: name}} {
			out := s.exec(t, id, req)
			if out.err != nil {
				t.Errorf("Exec(%s): err = %v, want nil with exit code 127", describe(req), out.err)
				continue
			}
			if out.res.ExitCode != 127 {
				t.Errorf("Exec(%s): ExitCode = %d, want 127", describe(req), out.res.ExitCode)
			}
			if out.stdout != "" {
				t.Errorf("Exec(%s): stdout = %q, want it empty", describe(req), out.stdout)
			}
			if req.Shell != "" && out.stderr == "" {
				t.Errorf("Exec(%s): stderr is empty, want the shell's \"not found\" message there", describe(req))
			}
		}
	})

	t.Run("cwd", func(t *testing.T) {
		t.Parallel()
		req := providers.ExecRequest{Argv: []string{"pwd"}}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 {
			t.Fatalf("Exec(%s): exit %d, err %v", describe(req), out.res.ExitCode, out.err)
		}
		if out.stdout != providers.DefaultWorkdir+"\n" {
			t.Errorf("Exec(%s) with no Cwd: stdout = %q, want %q (the default working directory)", describe(req), out.stdout, providers.DefaultWorkdir+"\n")
		}
		dir := "/workspace/pt-cwd/nested"
		s.mustMkdir(t, id, dir)
		for _, req := range []providers.ExecRequest{{Argv: []string{"pwd"}, Cwd: dir}, {Shell: "pwd", Cwd: dir}} {
			out := s.exec(t, id, req)
			if out.err != nil || out.res.ExitCode != 0 {
				t.Fatalf("Exec(%s, Cwd %s): exit %d, err %v, stderr %q", describe(req), dir, out.res.ExitCode, out.err, out.stderr)
			}
			if out.stdout != dir+"\n" {
				t.Errorf("Exec(%s, Cwd %s): stdout = %q, want %q", describe(req), dir, out.stdout, dir+"\n")
			}
		}
	})

	t.Run("env", func(t *testing.T) {
		t.Parallel()
		req := providers.ExecRequest{Argv: []string{"env"}}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 {
			t.Fatalf("Exec(%s): exit %d, err %v", describe(req), out.res.ExitCode, out.err)
		}
		if got := envValues(out.stdout, specEnvKey); len(got) != 1 || got[0] != specEnvValue {
			t.Errorf("Exec(%s): %s = %q, want [%q] from Spec.Env; output:\n%s", describe(req), specEnvKey, got, specEnvValue, out.stdout)
		}
		req.Env = map[string]string{specEnvKey: "overridden", "PROVIDERTEST_REQ_VAR": "from-request"}
		out = s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 {
			t.Fatalf("Exec(%s with Env): exit %d, err %v", describe(req), out.res.ExitCode, out.err)
		}
		if got := envValues(out.stdout, specEnvKey); len(got) != 1 || got[0] != "overridden" {
			t.Errorf("Exec(%s with Env): %s = %q, want [\"overridden\"] (ExecRequest.Env overrides Spec.Env)", describe(req), specEnvKey, got)
		}
		if got := envValues(out.stdout, "PROVIDERTEST_REQ_VAR"); len(got) != 1 || got[0] != "from-request" {
			t.Errorf("Exec(%s with Env): PROVIDERTEST_REQ_VAR = %q, want [\"from-request\"]", describe(req), got)
		}
		// The override is per call: the next command sees the Spec value again.
		out = s.exec(t, id, providers.ExecRequest{Argv: []string{"env"}})
		if got := envValues(out.stdout, specEnvKey); len(got) != 1 || got[0] != specEnvValue {
			t.Errorf("Exec(env) after an override: %s = %q, want [%q] (ExecRequest.Env must not persist)", specEnvKey, got, specEnvValue)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		if !caps.Stdin {
			t.Logf("provider does not declare Stdin: checking that a request with Stdin is refused with ErrUnsupported")
			req := providers.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("x")}
			if out := s.exec(t, id, req); !errors.Is(out.err, providers.ErrUnsupported) {
				t.Errorf("Exec(%s with Stdin): err = %v, want one matching ErrUnsupported (Capabilities().Stdin is false)", describe(req), out.err)
			}
			return
		}
		text := "line one\nline two\n"
		req := providers.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader(text)}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 || out.stdout != text {
			t.Errorf("Exec(%s with Stdin %q): stdout %q, exit %d, err %v; want the input echoed", describe(req), text, out.stdout, out.res.ExitCode, out.err)
		}
		bin := randomBytes(3, 256<<10)
		req = providers.ExecRequest{Argv: []string{"cat"}, Stdin: bytes.NewReader(bin)}
		out = s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 || out.stdout != string(bin) {
			t.Errorf("Exec(%s with %d bytes of binary Stdin): got %d bytes (equal: %v), exit %d, err %v", describe(req), len(bin), len(out.stdout), out.stdout == string(bin), out.res.ExitCode, out.err)
		}
	})

	t.Run("nil-stdin", func(t *testing.T) {
		t.Parallel()
		req := providers.ExecRequest{Argv: []string{"cat"}}
		out := s.exec(t, id, req)
		if out.err != nil || out.res.ExitCode != 0 || out.stdout != "" {
			t.Errorf("Exec(%s with nil Stdin): stdout %q, exit %d, err %v; want an empty stdin (immediate EOF)", describe(req), out.stdout, out.res.ExitCode, out.err)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		t.Parallel()
		s.streaming(t, id)
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		req := providers.ExecRequest{Shell: "sleep 30", Timeout: 500 * time.Millisecond}
		out := s.exec(t, id, req)
		if !errors.Is(out.err, providers.ErrTimeout) {
			t.Errorf("Exec(%s, Timeout 500ms): err = %v (exit %d), want one matching ErrTimeout", describe(req), out.err, out.res.ExitCode)
		}
		if out.elapsed > 10*time.Second {
			t.Errorf("Exec(%s, Timeout 500ms) returned after %v, want well under 10s", describe(req), out.elapsed)
		}
		// The sandbox is still usable afterwards.
		if after := s.exec(t, id, providers.ExecRequest{Argv: []string{"echo", "after"}}); after.err != nil || after.stdout != "after\n" {
			t.Errorf("Exec(echo after) following a timeout: stdout %q, err %v", after.stdout, after.err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		timer := time.AfterFunc(500*time.Millisecond, cancel)
		defer timer.Stop()
		req := providers.ExecRequest{Shell: "sleep 30", Stdout: &Buffer{}, Stderr: &Buffer{}}
		start := time.Now()
		res, err := s.p.Exec(ctx, id, req)
		elapsed := time.Since(start)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Exec(%s) with ctx cancelled after 500ms: err = %v (exit %d), want one matching context.Canceled", describe(req), err, res.ExitCode)
		}
		if elapsed > 10*time.Second {
			t.Errorf("Exec(%s) with ctx cancelled after 500ms returned after %v, want well under 10s", describe(req), elapsed)
		}
	})
}

// streaming checks that output reaches the writer while the command still
// runs: the first line must arrive, and the command must still be sleeping
// for a good while after it did.
func (s *suite) streaming(t *testing.T, id string) {
	w := newSignalWriter()
	req := providers.ExecRequest{Shell: "echo a; sleep 2; echo b", Stdout: w, Stderr: &Buffer{}}
	type result struct {
		res providers.ExecResult
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	ctx, cancel := callCtx(t)
	defer cancel()
	start := time.Now()
	go func() {
		res, err := s.p.Exec(ctx, id, req)
		done <- result{res, err, time.Now()}
	}()

	var r result
	select {
	case <-w.fired:
		r = <-done
	case r = <-done:
		t.Fatalf("Exec(%s) returned (exit %d, err %v) before anything was written to Stdout, want the first line streamed while the command runs", describe(req), r.res.ExitCode, r.err)
	}
	if r.err != nil || r.res.ExitCode != 0 {
		t.Fatalf("Exec(%s): exit %d, err %v", describe(req), r.res.ExitCode, r.err)
	}
	first, firstAt := w.first()
	if !strings.HasPrefix(first, "a") || strings.Contains(first, "b") {
		t.Errorf("Exec(%s): first write to Stdout was %q, want it to hold the first line only", describe(req), first)
	}
	// Between the first line and the end the command sleeps 2s; a provider
	// that buffers until exit delivers both lines at the same moment.
	if gap := r.at.Sub(firstAt); gap < time.Second {
		t.Errorf("Exec(%s): first output arrived %v after the start and only %v before Exec returned; want it streamed about 2s before the end", describe(req), firstAt.Sub(start), gap)
	}
	if got := w.String(); got != "a\nb\n" {
		t.Errorf("Exec(%s): stdout = %q, want %q", describe(req), got, "a\nb\n")
	}
}

// signalWriter closes fired on the first non-empty write and remembers
// what that write held and when it happened.
type signalWriter struct {
	Buffer
	once       sync.Once
	fired      chan struct{}
	mu         sync.Mutex
	firstBytes string
	firstAt    time.Time
}

func newSignalWriter() *signalWriter { return &signalWriter{fired: make(chan struct{})} }

func (w *signalWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.once.Do(func() {
			w.mu.Lock()
			w.firstBytes, w.firstAt = string(p), time.Now()
			w.mu.Unlock()
			close(w.fired)
		})
	}
	return w.Buffer.Write(p)
}

func (w *signalWriter) first() (string, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstBytes, w.firstAt
}

// envValues returns the values of key in the output of env.
func envValues(out, key string) []string {
	var vals []string
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	var key [32]byte
	key[0] = byte(seed)
	r := rand.NewChaCha8(key)
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}
