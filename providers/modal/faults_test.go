//go:build linux

package modal_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/modal"
	mdemu "github.com/agentbox/sandbox/providers/modal/emulator"
)

// TestCredentials checks that a missing or rejected token is ErrAuth and
// names the variables to set (the CLI exits 4 on it).
func TestCredentials(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, secret string
		rejected     bool
	}{
		{name: "rejected", secret: "wrong", rejected: true},
		{name: "missing", secret: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.client(t, tc.secret)
			_, err := p.List(t.Context(), providers.Filter{})
			var ce *providers.CredentialError
			if !errors.As(err, &ce) || !errors.Is(err, providers.ErrAuth) {
				t.Fatalf("List with token secret %q: err = %v, want a *providers.CredentialError", tc.secret, err)
			}
			if ce.Rejected != tc.rejected || !strings.Contains(err.Error(), "MODAL_TOKEN_ID") || !strings.Contains(err.Error(), "MODAL_TOKEN_SECRET") {
				t.Errorf("error %q (rejected %v) does not name MODAL_TOKEN_ID and MODAL_TOKEN_SECRET or says rejected=%v", err, ce.Rejected, tc.rejected)
			}
		})
	}
}

// faultHarness is a harness whose gRPC fault hook answers the methods of
// fail with a status, times times each.
func faultHarness(t *testing.T, method string, code codes.Code, times int32) (*harness, *atomic.Int32) {
	t.Helper()
	backend := emulatortest.LocalBackend(t)
	var hits atomic.Int32
	faults := emulator.NewFaults()
	srv := mdemu.New(backend, mdemu.Options{APIKey: testSecret, Wrap: faults.Wrap,
		Intercept: func(_ context.Context, m string) error {
			if strings.HasSuffix(m, "/"+method) && hits.Add(1) <= times {
				return status.Error(code, "injected fault")
			}
			return nil
		}})
	t.Cleanup(func() { _ = srv.Close() })
	return &harness{url: emulatortest.Serve(t, srv), faults: faults, server: srv}, &hits
}

// TestFaults checks how the SDK and our error mapping meet server faults:
// UNAVAILABLE is retried by the SDK (and a retried create makes one
// sandbox), RESOURCE_EXHAUSTED is a quota error, NOT_FOUND and
// PERMISSION_DENIED keep their kinds.
func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		method string
		code   codes.Code
		times  int32
		want   error // nil: the call succeeds
	}{
		{method: "SandboxCreateV2", code: codes.Unavailable, times: 2},
		{method: "SandboxCreateV2", code: codes.ResourceExhausted, times: 1, want: providers.ErrQuota},
		{method: "AppGetOrCreate", code: codes.PermissionDenied, times: 1, want: providers.ErrDenied},
		{method: "SandboxCreateV2", code: codes.InvalidArgument, times: 1, want: providers.ErrInvalid},
	} {
		t.Run(tc.method+"/"+tc.code.String(), func(t *testing.T) {
			h, hits := faultHarness(t, tc.method, tc.code, tc.times)
			p := h.client(t, testSecret)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			label := map[string]string{"fault": tc.code.String()}
			info, err := p.Create(ctx, providers.Spec{Labels: label})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Create with %v on %s: err = %v, want one matching %v", tc.code, tc.method, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create with %d× %v on %s: %v (the SDK should retry)", tc.times, tc.code, tc.method, err)
			}
			defer p.Delete(context.WithoutCancel(ctx), info.ID)
			if n := hits.Load(); n <= tc.times {
				t.Errorf("%s was called %d times, want more than the %d faults", tc.method, n, tc.times)
			}
			list, err := p.List(ctx, providers.Filter{Labels: label})
			if err != nil || len(list) != 1 {
				t.Errorf("List after retried create = %d sandboxes, %v; want exactly 1", len(list), err)
			}
		})
	}
}

// TestExecOutputSurvivesCutStreams cuts the first output streams mid-way:
// the SDK resumes them from the byte offset it had, and the command's
// output arrives whole, once.
func TestExecOutputSurvivesCutStreams(t *testing.T) {
	h := newHarness(t)
	p, id := newSandbox(t, h)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h.faults.Add(emulator.Fault{Path: "/modal.task_command_router.TaskCommandRouter/TaskExecStdioRead", CutAfter: 100, Times: 2})
	var out bytes.Buffer
	res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "seq 1 20000", Stdout: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	if out.String() != want.String() {
		t.Errorf("output of seq 1 20000 after cut streams: %d bytes, want %d", out.Len(), want.Len())
	}
}

// TestExecTimeout checks that a command past its timeout is killed and
// the error matches ErrTimeout.
func TestExecTimeout(t *testing.T) {
	h := newHarness(t)
	p, id := newSandbox(t, h)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "sleep 30", Timeout: time.Second})
	if !errors.Is(err, providers.ErrTimeout) {
		t.Fatalf("Exec(sleep 30, timeout 1s): err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Exec with a 1s timeout returned after %v", d)
	}
}

// newSandbox returns our provider on h and a sandbox it made, deleted when
// the test ends.
func newSandbox(t *testing.T, h *harness) (*modal.Provider, string) {
	t.Helper()
	p := h.client(t, testSecret)
	info, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), info.ID) })
	return p, info.ID
}
