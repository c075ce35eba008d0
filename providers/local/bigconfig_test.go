//go:build linux

package local

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// TestBigConfiguration: an operation whose configuration is far larger
// than a pipe's buffer (many arguments, a large environment, a 1 MB argv)
// runs, or fails with a clear error, and never hangs: a timeout ends it.
func TestBigConfiguration(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	many := []string{"sh", "-c", `echo $#`, "sh"}
	for i := range 12000 {
		many = append(many, "arg"+strconv.Itoa(i))
	}
	bigEnv := map[string]string{"BIG": strings.Repeat("e", 100<<10)}
	huge := []string{"sh", "-c", `echo ${#1}`, "sh", strings.Repeat("a", 1<<20)}
	tests := []struct {
		name string
		req  providers.ExecRequest
		want string
		// tooBig: the kernel refuses it (E2BIG): a clear error instead.
		tooBig bool
	}{
		{"12000 arguments", providers.ExecRequest{Argv: many}, "12000\n", false},
		{"100 KB environment", providers.ExecRequest{Shell: `echo ${#BIG}`, Env: bigEnv}, "102400\n", false},
		{"1 MB argument", providers.ExecRequest{Argv: huge}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var out, errb strings.Builder
			tt.req.Stdout, tt.req.Stderr = &out, &errb
			res, err := p.Exec(ctx, id, tt.req)
			if ctx.Err() != nil {
				t.Fatalf("the exec hung until the test's deadline")
			}
			if tt.tooBig {
				// A single argument over the kernel's 128 KiB limit
				// cannot be executed: it says so, it does not hang.
				if err == nil && res.ExitCode == 0 {
					t.Fatalf("a 1 MB argument ran: %q", out.String())
				}
				if msg := errb.String() + errMsg(err); !strings.Contains(msg, "argument list too long") {
					t.Errorf("a 1 MB argument: exit %d, err %v, stderr %q; want the kernel's reason", res.ExitCode, err, errb.String())
				}
				return
			}
			if err != nil || res.ExitCode != 0 || out.String() != tt.want {
				t.Errorf("got %q (exit %d, err %v, stderr %q), want %q", out.String(), res.ExitCode, err, errb.String(), tt.want)
			}
		})
	}
	// A timeout ends an operation whose configuration is still being
	// written (a 64 MiB environment the runner reads slowly or not at all).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errb strings.Builder
	res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "true", Timeout: 2 * time.Second, Stderr: &errb,
		Env: map[string]string{"HUGE": strings.Repeat("h", 64<<20)}})
	if ctx.Err() != nil {
		t.Fatal("a 64 MiB configuration hung past its timeout")
	}
	if err == nil && (res.ExitCode == 0 || !strings.Contains(errb.String(), "too long")) {
		t.Errorf("a 64 MiB environment: exit %d, stderr %q; want the kernel's refusal", res.ExitCode, errb.String())
	} else if err != nil && !errors.Is(err, providers.ErrTimeout) {
		t.Errorf("a 64 MiB environment: %v, want a timeout or the kernel's refusal", err)
	}
}

// errMsg is err's text, or "" for nil.
func errMsg(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
