//go:build linux

package emulator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

// sdkProject is the node project pinning the official E2B SDK.
var sdkProject = &emulatortest.NodeProject{Dir: filepath.Join("..", "conformance")}

// TestOfficialSDK runs the official E2B JavaScript SDK, unchanged, through
// the whole flow of conformance/sdk-flow.mjs against the emulator backed
// by real local sandboxes. The SDK finds the emulator through the same
// variables users set: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY.
func TestOfficialSDK(t *testing.T) {
	sdkProject.Install(t)
	url, faults, srv := serve(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	out, err := sdkProject.Run(ctx, t, srv.Env(url), "sdk-flow.mjs")
	if err != nil {
		t.Fatalf("the official SDK flow failed: %v\n%s", err, out)
	}
	// The flow went through both APIs of the emulator.
	for _, path := range []string{"/v2/sandboxes", "/process.Process/Start", "/files"} {
		if faults.Count("POST", path) == 0 {
			t.Errorf("the SDK never called POST %s; the flow did not reach the emulator", path)
		}
	}
}
