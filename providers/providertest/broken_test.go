package providertest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
	"github.com/agentbox/sandbox/providers/providertest"
)

// brokenEnv selects a broken provider in the helper process.
const brokenEnv = "PROVIDERTEST_BROKEN"

// broken wraps the fake with one deliberate contract violation.
type broken struct {
	*fake.Provider
	mode string
}

func (b broken) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	switch b.mode {
	case "buffered-exec":
		out := req.Stdout
		var buf bytes.Buffer
		req.Stdout = &buf
		res, err := b.Provider.Exec(ctx, id, req)
		if out != nil {
			_, _ = out.Write(buf.Bytes())
		}
		return res, err
	case "swallows-timeout":
		res, err := b.Provider.Exec(ctx, id, req)
		if errors.Is(err, providers.ErrTimeout) {
			return providers.ExecResult{ExitCode: 137}, nil
		}
		return res, err
	}
	return b.Provider.Exec(ctx, id, req)
}

func (b broken) List(ctx context.Context, f providers.Filter) ([]providers.Info, error) {
	if b.mode == "list-ignores-filter" {
		f = providers.Filter{}
	}
	return b.Provider.List(ctx, f)
}

func (b broken) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	fi, err := b.Provider.Stat(ctx, id, path)
	if b.mode == "untyped-errors" && err != nil {
		return fi, errors.New(err.Error()) // the kind is lost
	}
	return fi, err
}

func (b broken) Download(ctx context.Context, id, src string, w io.Writer) error {
	if b.mode == "truncated-download" {
		var buf bytes.Buffer
		if err := b.Provider.Download(ctx, id, src, &buf); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes()[:buf.Len()/2])
		return err
	}
	return b.Provider.Download(ctx, id, src, w)
}

func (b broken) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	if b.mode == "tmp-per-call" && strings.HasPrefix(path, "/tmp/") {
		// As if every call had a /tmp of its own.
		return nil, providers.Errorf(providers.ErrNotFound, "broken", "read", "%s: no such file", path)
	}
	return b.Provider.ReadFile(ctx, id, path)
}

func (b broken) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	code, err := b.Provider.Logs(ctx, id, pid, follow, w)
	if b.mode == "logs-without-status" {
		code = nil
	}
	return code, err
}

// TestBrokenHelper runs the suite against a broken provider when the
// parent test asks for it; otherwise it does nothing.
func TestBrokenHelper(t *testing.T) {
	mode := os.Getenv(brokenEnv)
	if mode == "" {
		return
	}
	providertest.Run(t, providertest.Options{New: func(*testing.T) providers.Provider {
		return broken{Provider: fake.New(), mode: mode}
	}})
}

// TestSuiteCatchesBrokenProviders proves the suite fails, with a useful
// message, for providers that break the contract in typical ways.
func TestSuiteCatchesBrokenProviders(t *testing.T) {
	t.Parallel()
	if os.Getenv(brokenEnv) != "" {
		return
	}
	tests := []struct {
		mode string
		want []string
	}{
		{"buffered-exec", []string{"--- FAIL: TestBrokenHelper/exec/streaming", "want it streamed"}},
		{"swallows-timeout", []string{"--- FAIL: TestBrokenHelper/exec/timeout", "want one matching ErrTimeout"}},
		{"list-ignores-filter", []string{"--- FAIL: TestBrokenHelper/lifecycle/list", "whose labels do not match"}},
		{"untyped-errors", []string{"--- FAIL: TestBrokenHelper/files/missing-path", "--- FAIL: TestBrokenHelper/files/rename", "want one matching ErrNotFound"}},
		{"truncated-download", []string{"--- FAIL: TestBrokenHelper/transfer/download-dir", "unreadable tar"}},
		{"tmp-per-call", []string{"--- FAIL: TestBrokenHelper/machine/running/tmp-persists/exec-then-ReadFile", "a sandbox's /tmp stays from one call to the next"}},
		{"logs-without-status", []string{"--- FAIL: TestBrokenHelper/machine/running/processes-signal-logs", "exit status none, want 143"}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenHelper$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a provider with %s; output:\n%s", tc.mode, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("suite output for %s lacks %q; output:\n%s", tc.mode, w, out)
				}
			}
		})
	}
}
