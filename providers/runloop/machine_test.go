//go:build linux

package runloop_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/runloop"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
)

// TestResumeOnUse checks that an operation on a suspended devbox, which
// Runloop refuses, resumes it and succeeds: a devbox suspended by its
// idle policy wakes at its next use.
func TestResumeOnUse(t *testing.T) {
	h := newHarness(t, rlemu.Options{})
	p := h.client(t, nil)
	id := create(t, p, map[string]string{"machine-test": t.Name()})
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: replayed whole
	tests := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"exec", func(ctx context.Context) error {
			var out bytes.Buffer
			res, err := p.Exec(ctx, id, providers.ExecRequest{Argv: []string{"cat", "/workspace/kept"}, Stdout: &out})
			if err == nil && (res.ExitCode != 0 || out.String() != "kept\n") {
				t.Errorf("Exec(cat) = %q, exit %d; want the kept file", out.String(), res.ExitCode)
			}
			return err
		}},
		{"read", func(ctx context.Context) error {
			rc, err := p.ReadFile(ctx, id, "/workspace/kept")
			if err != nil {
				return err
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err == nil && string(b) != "kept\n" {
				t.Errorf("ReadFile = %q, want the kept file", b)
			}
			return err
		}},
		{"write", func(ctx context.Context) error {
			if err := p.WriteFile(ctx, id, "/workspace/big", bytes.NewReader(big), 0o644); err != nil {
				return err
			}
			if got := run(t, p, id, "wc -c < /workspace/big"); strings.TrimSpace(got) != "1048576" {
				t.Errorf("the file written on the suspended devbox has %s bytes, want 1048576", got)
			}
			return nil
		}},
		{"stat", func(ctx context.Context) error {
			fi, err := p.Stat(ctx, id, "/workspace/kept")
			if err == nil && fi.Size != 5 {
				t.Errorf("Stat = %+v, want 5 bytes", fi)
			}
			return err
		}},
		{"background", func(ctx context.Context) error {
			res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "cat /workspace/kept", Background: true})
			if err != nil {
				return err
			}
			var out bytes.Buffer
			code, err := p.Logs(ctx, id, res.PID, true, &out)
			if err == nil && (code == nil || *code != 0 || out.String() != "kept\n") {
				t.Errorf("Logs(%d, follow) = %q, exit %v; want the kept file and 0", res.PID, out.String(), code)
			}
			return err
		}},
	}
	run(t, p, id, "echo kept > /workspace/kept")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Stop(t.Context(), id); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			wantState(t, p, id, providers.StateStopped)
			if err := tc.op(t.Context()); err != nil {
				t.Fatalf("%s on the suspended devbox: %v", tc.name, err)
			}
			wantState(t, p, id, providers.StateRunning)
		})
	}
}

// wantState fails t unless Get reports id in state want.
func wantState(t *testing.T, p *runloop.Provider, id string, want providers.State) {
	t.Helper()
	in, err := p.Get(t.Context(), id)
	if err != nil || in.State != want {
		t.Fatalf("Get(%s) = %+v, %v; want state %s", id, in, err, want)
	}
}
