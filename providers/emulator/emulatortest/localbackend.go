//go:build linux

package emulatortest

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/local"
)

// LocalBackend returns a local provider keeping its state in a temporary
// directory of the test, the backend the emulators' tests run on. Before
// that directory goes, the sandboxes the test left are deleted (their
// machines would run on until their auto-stop), the provider is closed and
// its trash reaper waited for, which would otherwise write in it while it
// is removed. The test
// binary's TestMain must call local.MaybeRunInit first.
func LocalBackend(t testing.TB) providers.Provider {
	t.Helper()
	backend, err := local.New(providers.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// What the test left: a running machine would outlive it (until
		// its auto-stop) with its state directory gone.
		left, err := backend.List(ctx, providers.Filter{})
		if err != nil {
			t.Errorf("list the backend's sandboxes: %v", err)
		}
		for _, in := range left {
			if err := backend.Delete(ctx, in.ID); err != nil {
				t.Errorf("delete the backend's sandbox %s: %v", in.ID, err)
			}
		}
		_ = backend.Close()
		_ = backend.WaitReaped(ctx)
	})
	return backend
}
