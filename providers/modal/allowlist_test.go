//go:build linux

package modal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// TestCreateChecksAllowlists checks that the emulator refuses, as Modal
// does, an outbound allowlist entry that is not a CIDR or a domain name,
// and takes valid ones.
func TestCreateChecksAllowlists(t *testing.T) {
	h := newHarness(t)
	ctx, c, app := h.sdkApp(t, "allowlists", time.Minute)
	image := c.Images.FromRegistry("alpine:3.21", nil)
	for _, tc := range []struct {
		name           string
		cidrs, domains []string
		wantErr        string // empty: created
	}{
		{name: "valid", cidrs: []string{"10.0.0.0/8", "fd00::/8"}, domains: []string{"example.com", "*.github.com"}},
		{name: "bad CIDR", cidrs: []string{"not-an-ip/8"}, wantErr: "Invalid CIDR (outbound IPv4): not-an-ip/8"},
		{name: "bad domain", domains: []string{"not a valid domain!"}, wantErr: "Invalid domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := &modalsdk.SandboxCreateParams{}
			if tc.cidrs != nil {
				params.OutboundCIDRAllowlist = &modalsdk.Allowlist{Entries: tc.cidrs}
			}
			if tc.domains != nil {
				params.OutboundDomainAllowlist = &modalsdk.Allowlist{Entries: tc.domains}
			}
			sb, err := c.Sandboxes.Create(ctx, app, image, params)
			if err == nil {
				_, _ = sb.Terminate(context.WithoutCancel(ctx), nil)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Create: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Create error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
