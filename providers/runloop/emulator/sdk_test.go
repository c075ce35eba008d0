//go:build linux

package emulator_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/runloop/emulator"
)

// TestOfficialSDK runs Runloop's official TypeScript SDK, unchanged,
// through conformance/sdk-flow.mjs against the emulator backed by real
// local sandboxes: create and await running, exec with zero and non-zero
// exits, env and cwd, a named shell, execAsync streaming stdout and stderr
// while it runs, text files, a 50 MiB upload and download, list,
// suspend/resume and shutdown. The SDK speaks cleartext HTTP/2 to the
// emulator; the script must exit by itself.
func TestOfficialSDK(t *testing.T) {
	project := &emulatortest.NodeProject{Dir: filepath.Join("..", "conformance")}
	project.Install(t)
	s := serve(t, emulator.Options{Log: testLog{t}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := project.Run(ctx, t, s.Server.Env(s.URL), "sdk-flow.mjs")
	if err != nil {
		t.Fatalf("the official SDK flow failed: %v\n%s", err, out)
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/devboxes/create_and_await_running"},
		{"POST", "/v1/devboxes/"},
	} {
		if s.Faults.Count(c.method, c.path) == 0 && c.path != "/v1/devboxes/" {
			t.Errorf("the SDK never called %s %s", c.method, c.path)
		}
	}
	if s.HTTP2.Load() == 0 {
		t.Error("no request arrived over HTTP/2: the SDK should speak h2c to an http:// base URL")
	}
}

// testLog writes the emulator's request log to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
