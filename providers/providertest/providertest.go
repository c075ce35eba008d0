// Package providertest is the conformance suite every sandbox provider must
// pass: the local provider directly, and each cloud client against its
// emulator.
//
// A provider's test calls Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Options{
//			New: func(t *testing.T) providers.Provider { return newProvider(t) },
//		})
//	}
//
// The suite creates its own sandboxes, each carrying a label unique to the
// run so that parallel runs against one backend do not see each other's
// sandboxes, and deletes them with t.Cleanup. Every check is a subtest with a
// message that names the operation, what was expected and what came back.
//
// The commands the suite executes are limited to echo, cat, sleep, pwd, env,
// exit N, true and false, sequences of them separated by ";", and a trailing
// "> FILE" redirection, so that the in-memory fake provider can run them too;
// the session checks add cd and export.
//
// A provider whose sandboxes are machines (it implements providers.Machine,
// or declares Options.Machine) runs the machine checks too: what one call
// starts or writes is there for the next and for a concurrent one, and a
// session keeps its state among them; providers.Machine's methods (Start,
// Stop, Processes, Signal, Logs) are checked when it implements them. Their
// commands stay within the fake's vocabulary too, but for the one that a
// provider declaring only Options.Machine sends to the background: a shell
// loop ending in `&`.
// A capability the provider does not declare is not exercised; where the
// contract says what an undeclared capability must do (ErrUnsupported), the
// suite checks that instead.
package providertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Options configures one run of the suite.
type Options struct {
	// New returns the provider under test. It is called once per Run;
	// anything it starts should be stopped with t.Cleanup.
	New func(t *testing.T) providers.Provider
	// Spec is the base of every sandbox the suite creates. The suite adds
	// its own labels and one environment variable to copies of it.
	Spec providers.Spec
	// Machine declares that the provider's sandboxes are machines (what
	// one command starts keeps running, /tmp stays from one call to the
	// next) although it does not implement providers.Machine: the
	// machine checks then run with `&` in a shell instead of
	// ExecRequest.Background. A provider implementing providers.Machine
	// runs them whatever this says.
	Machine bool
}

// Label keys the suite puts on every sandbox it creates.
const (
	// LabelRun carries a value unique to one call of Run.
	LabelRun = "providertest-run"
	// LabelGroup names the group of checks that created the sandbox.
	LabelGroup = "providertest-group"
)

// specEnvKey and specEnvValue are added to the Spec's environment so the
// exec checks can see it.
const (
	specEnvKey   = "PROVIDERTEST_SPEC_VAR"
	specEnvValue = "from-spec"
)

// callTimeout bounds every single provider call the suite makes, so that a
// provider that hangs fails the suite instead of stalling it.
const callTimeout = 2 * time.Minute

// Run runs the whole conformance suite against the provider returned by
// opts.New. It stops at the first group that cannot create a sandbox.
func Run(t *testing.T, opts Options) {
	t.Helper()
	if opts.New == nil {
		t.Fatal("providertest: Options.New is nil")
	}
	p := opts.New(t)
	if p == nil {
		t.Fatal("providertest: Options.New returned a nil provider")
	}
	s := &suite{p: p, base: opts.Spec, run: uniqueToken(t), machine: opts.Machine}
	t.Logf("providertest: provider %q, run label %s=%s, capabilities %+v", p.Name(), LabelRun, s.run, p.Capabilities())

	t.Run("lifecycle", s.lifecycle)
	t.Run("exec", s.execChecks)
	t.Run("files", s.fileChecks)
	t.Run("transfer", s.transferChecks)
	t.Run("grep", s.grepChecks)
	t.Run("session", s.sessionChecks)
	t.Run("machine", s.machineChecks)
}

// suite holds what every group shares.
type suite struct {
	p    providers.Provider
	base providers.Spec
	run  string
	// machine is Options.Machine.
	machine bool
}

// spec returns a copy of the base Spec labelled for group.
func (s *suite) spec(group string) providers.Spec {
	sp := s.base
	sp.Labels = maps.Clone(s.base.Labels)
	if sp.Labels == nil {
		sp.Labels = map[string]string{}
	}
	sp.Labels[LabelRun] = s.run
	sp.Labels[LabelGroup] = group
	sp.Env = maps.Clone(s.base.Env)
	if sp.Env == nil {
		sp.Env = map[string]string{}
	}
	sp.Env[specEnvKey] = specEnvValue
	return sp
}

// create makes a sandbox for group and deletes it when t ends.
func (s *suite) create(t *testing.T, group string) providers.Info {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	info, err := s.p.Create(ctx, s.spec(group))
	if err != nil {
		t.Fatalf("Create(%s sandbox): %v", group, err)
	}
	if info.ID == "" {
		t.Fatalf("Create(%s sandbox) returned an Info with an empty ID: %+v", group, info)
	}
	s.cleanup(t, info.ID)
	return info
}

// cleanup deletes id when t ends; a sandbox that is already gone is fine.
func (s *suite) cleanup(t *testing.T, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := s.p.Delete(ctx, id); err != nil && !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("cleanup: Delete(%s): %v", id, err)
		}
	})
}

// callCtx returns a context for one provider call.
func callCtx(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), callTimeout)
}

// uniqueToken returns a short random token for labels and names.
func uniqueToken(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("providertest: random token: %v", err)
	}
	return hex.EncodeToString(b[:])
}

// execOut is everything one Exec produced.
type execOut struct {
	stdout, stderr string
	res            providers.ExecResult
	err            error
	elapsed        time.Duration
}

// exec runs req in id, capturing stdout and stderr unless req already
// carries writers.
func (s *suite) exec(t *testing.T, id string, req providers.ExecRequest) execOut {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	var stdout, stderr Buffer
	if req.Stdout == nil {
		req.Stdout = &stdout
	}
	if req.Stderr == nil {
		req.Stderr = &stderr
	}
	start := time.Now()
	res, err := s.p.Exec(ctx, id, req)
	return execOut{stdout: stdout.String(), stderr: stderr.String(), res: res, err: err, elapsed: time.Since(start)}
}

// describe names a request in failure messages.
func describe(req providers.ExecRequest) string {
	if req.Shell != "" {
		return "shell " + quote(req.Shell)
	}
	return "argv " + quote(strings.Join(req.Argv, " "))
}

func quote(s string) string { return "`" + s + "`" }

// Buffer is a bytes.Buffer safe for a provider that writes from another
// goroutine while the test reads; provider tests use it for exec output.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readAll reads a whole file through the provider.
func (s *suite) readAll(t *testing.T, id, path string) ([]byte, error) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	rc, err := s.p.ReadFile(ctx, id, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// mustWrite writes data to path or fails the test.
func (s *suite) mustWrite(t *testing.T, id, path string, data []byte) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := s.p.WriteFile(ctx, id, path, bytes.NewReader(data), 0o644); err != nil {
		t.Fatalf("WriteFile(%s, %d bytes): %v", path, len(data), err)
	}
}

// mustMkdir creates a directory or fails the test.
func (s *suite) mustMkdir(t *testing.T, id, path string) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := s.p.Mkdir(ctx, id, path); err != nil {
		t.Fatalf("Mkdir(%s): %v", path, err)
	}
}

// stat describes path through the provider.
func (s *suite) stat(t *testing.T, id, path string) (providers.FileInfo, error) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	return s.p.Stat(ctx, id, path)
}
