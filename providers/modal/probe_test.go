//go:build linux

package modal_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// TestReadinessProbe checks that WaitUntilReady through the official Go
// SDK returns once the sandbox's exec probe exits 0 (not before), times
// out while it keeps failing, and that a sandbox without a probe is ready
// at once.
func TestReadinessProbe(t *testing.T) {
	h := newHarness(t)
	ctx, c, app := h.sdkApp(t, "probes", 2*time.Minute)
	image := c.Images.FromRegistry("alpine:3.21", nil)
	probe := func(argv ...string) *modalsdk.Probe {
		p, err := modalsdk.NewExecProbe(argv, &modalsdk.ExecProbeParams{Interval: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("NewExecProbe: %v", err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		command []string
		probe   *modalsdk.Probe
		timeout time.Duration
		// ready says WaitUntilReady succeeds; then marker, when set, is
		// a file the entrypoint makes that must exist by then.
		ready  bool
		marker string
	}{
		{name: "no probe", timeout: 10 * time.Second, ready: true},
		{name: "probe passes after the entrypoint's setup",
			command: []string{"sh", "-c", "sleep 1; touch /tmp/probe-ready; sleep 60"},
			probe:   probe("test", "-f", "/tmp/probe-ready"), timeout: 30 * time.Second, ready: true, marker: "/tmp/probe-ready"},
		{name: "probe never passes", probe: probe("false"), timeout: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := c.Sandboxes.Create(ctx, app, image, &modalsdk.SandboxCreateParams{Command: tc.command, ReadinessProbe: tc.probe})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			defer func() { _, _ = sb.Terminate(context.WithoutCancel(ctx), nil) }()
			start := time.Now()
			err = sb.WaitUntilReady(ctx, tc.timeout, nil)
			took := time.Since(start)
			if !tc.ready {
				var to modalsdk.TimeoutError
				if !errors.As(err, &to) {
					t.Fatalf("WaitUntilReady with a failing probe = %v (%T), want a TimeoutError", err, err)
				}
				if took < tc.timeout-500*time.Millisecond || took > tc.timeout+10*time.Second {
					t.Errorf("WaitUntilReady(%v) gave up after %v", tc.timeout, took)
				}
				return
			}
			if err != nil {
				t.Fatalf("WaitUntilReady: %v", err)
			}
			if tc.marker == "" {
				return
			}
			p, err := sb.Exec(ctx, []string{"test", "-f", tc.marker}, nil)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			_, _ = io.ReadAll(p.Stdout)
			if code, err := p.Wait(ctx, nil); err != nil || code != 0 {
				t.Errorf("ready after %v but %s is missing (test -f: %d, %v)", took, tc.marker, code, err)
			}
		})
	}
}
