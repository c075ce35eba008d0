//go:build linux

package emulator

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/local"
)

// LocalBackend returns a local provider keeping its state in a temporary
// directory of the test, the backend the emulators' tests run on. Before
// that directory goes, the provider is closed and its trash reaper waited
// for, which would otherwise write in it while it is removed. The test
// binary's TestMain must call local.MaybeRunInit first.
func LocalBackend(t testing.TB) providers.Provider {
	t.Helper()
	backend, err := local.New(providers.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() {
		_ = backend.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = backend.WaitReaped(ctx)
	})
	return backend
}
