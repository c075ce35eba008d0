//go:build linux

package modal_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

// TestOfficialJSSDK runs Modal's official JavaScript SDK (npm modal
// 0.11.1, pinned by conformance/package-lock.json), unchanged, through
// conformance/sdk-flow.mjs against the emulator backed by real local
// sandboxes: create with a name, tags and env; exec with stdout, stderr,
// exit codes, stdin, env, workdir, output streamed while the command runs,
// binary output and a timeout; the filesystem API; tags; list by tags;
// lookup by name and id; an entrypoint's stdio; terminate. The script must
// exit by itself.
func TestOfficialJSSDK(t *testing.T) {
	project := &emulatortest.NodeProject{Dir: "conformance"}
	project.Install(t)
	h := newHarness(t)
	env := h.server.Env(h.url)
	// No profile of the machine's user reaches the SDK.
	env["MODAL_CONFIG_PATH"] = filepath.Join(t.TempDir(), "none.toml")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := project.Run(ctx, t, env, "sdk-flow.mjs")
	if err != nil {
		t.Fatalf("the official JS SDK flow failed: %v\n%s", err, out)
	}
	// The flow went through the emulator's calls, not around them.
	for _, method := range []string{
		"/modal.client.ModalClient/SandboxCreateV2",
		"/modal.client.ModalClient/SandboxTagsSetV2",
		"/modal.client.ModalClient/SandboxListV2",
		"/modal.client.ModalClient/SandboxGetFromNameV2",
		"/modal.client.ModalClient/SandboxTerminateV2",
		"/modal.task_command_router.TaskCommandRouter/TaskExecStart",
		"/modal.task_command_router.TaskCommandRouter/TaskExecStdioRead",
		"/modal.task_command_router.TaskCommandRouter/TaskExecWait",
		"/modal.task_command_router.TaskCommandRouter/SandboxStdioReadV2",
	} {
		if h.faults.Count("POST", method) == 0 {
			t.Errorf("the JS SDK never called %s", method)
		}
	}
}
