//go:build linux

package modal_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/agentbox/sandbox/providers"
)

// TestSandboxByName checks that our provider finds a sandbox by the name
// another program (here the official SDK) gave it in the app, for every
// operation, and that the Info it returns carries the id.
func TestSandboxByName(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, testSecret)
	ctx, c, app := h.sdkApp(t, "tests", 2*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry("alpine:3.21", nil), &modalsdk.SandboxCreateParams{
		Name: "named-one",
		Tags: map[string]string{"who": "sdk"},
	})
	if err != nil {
		t.Fatalf("Sandboxes.Create: %v", err)
	}
	defer func() { _, _ = sb.Terminate(context.WithoutCancel(ctx), nil) }()

	info, err := p.Get(ctx, "named-one")
	if err != nil || info.ID != sb.SandboxID || info.Labels["who"] != "sdk" {
		t.Fatalf("Get(named-one) = %+v, %v; want id %s and label who=sdk", info, err, sb.SandboxID)
	}
	var out bytes.Buffer
	if res, err := p.Exec(ctx, "named-one", providers.ExecRequest{Shell: "echo by-name", Stdout: &out}); err != nil || res.ExitCode != 0 || out.String() != "by-name\n" {
		t.Errorf("Exec(named-one) = %+v, %v, stdout %q", res, err, out.String())
	}
	for _, ref := range []string{"nobody-here", "sb-" + "0000000000000000000000"} {
		if _, err := p.Get(ctx, ref); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", ref, err)
		}
	}
	if err := p.Delete(ctx, "named-one"); err != nil {
		t.Fatalf("Delete(named-one): %v", err)
	}
	if code, err := sb.Poll(ctx, nil); err != nil || code == nil {
		t.Errorf("Poll after Delete by name = %v, %v; want an exit code", code, err)
	}
	if _, err := p.Get(ctx, "named-one"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Get(named-one) after Delete: %v, want ErrNotFound", err)
	}
}
