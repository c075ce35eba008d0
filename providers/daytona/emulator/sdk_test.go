//go:build linux

package emulator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

// TestOfficialSDK runs Daytona's official TypeScript SDK, unchanged,
// through the whole flow of conformance/sdk-flow.mjs against the emulator
// backed by real local sandboxes. The SDK finds the emulator through the
// variables users set: DAYTONA_API_URL and DAYTONA_API_KEY. The script
// must exit by itself: the SDK's Socket.IO connection to the emulator's
// events gateway has to let the process end.
func TestOfficialSDK(t *testing.T) {
	project := &emulatortest.NodeProject{Dir: filepath.Join("..", "conformance")}
	project.Install(t)
	url, faults, srv := serve(t, emulator.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	out, err := project.Run(ctx, t, srv.Env(url), "sdk-flow.mjs")
	if err != nil {
		t.Fatalf("the official SDK flow failed: %v\n%s", err, out)
	}
	// The flow went through the control plane, the toolbox and the
	// events gateway of the emulator.
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/sandbox"},
		{"GET", "/api/socket.io/"},
	} {
		if faults.Count(c.method, c.path) == 0 {
			t.Errorf("the SDK never called %s %s; the flow did not reach the emulator", c.method, c.path)
		}
	}
}
