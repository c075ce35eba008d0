package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

func TestNeedsProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	on, off := filepath.Join(dir, "on"), filepath.Join(dir, "off")
	plantFile(t, on, "1\n", 0o644)
	plantFile(t, off, "0\n", 0o644)
	tests := []struct {
		uid    int
		weak   bool
		sysctl string
		want   bool
	}{
		{1000, false, on, true},
		{1000, false, off, false},
		{1000, false, filepath.Join(dir, "missing"), false},
		{0, false, on, false},
		{1000, true, on, false},
	}
	for _, tc := range tests {
		if got := needsProbe(tc.uid, tc.weak, tc.sysctl); got != tc.want {
			t.Errorf("needsProbe(%d, %v, %s) = %v, want %v", tc.uid, tc.weak, filepath.Base(tc.sysctl), got, tc.want)
		}
	}
}

// TestCreateProbe: where Create must try a command first (Ubuntu's
// AppArmor switch), a host that refuses the sandbox fails Create and leaves
// nothing behind; one that accepts it gets a working sandbox.
func TestCreateProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	p.probeOnCreate = true
	id := newSandbox(t, p, providers.Spec{})
	if got := mustRun(t, p, id, "echo ok"); got != "ok\n" {
		t.Errorf("after a probed create: %q", got)
	}

	broken := newTestProvider(t)
	broken.probeOnCreate = true
	broken.layers = append(broken.layers, layer{Name: "srv", Lower: filepath.Join(t.TempDir(), "missing")})
	_, err := broken.Create(ctx, providers.Spec{})
	if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "overlay") {
		t.Fatalf("Create on a host that refuses the sandbox = %v, want ErrUnavailable naming the failure", err)
	}
	if list, err := broken.List(ctx, providers.Filter{}); err != nil || len(list) != 0 {
		t.Errorf("List after the failed create = %v, %v; want nothing", list, err)
	}
	entries, _ := os.ReadDir(broken.dir)
	for _, e := range entries {
		// The mask cache, the /etc base, the work directories, the
		// trash, the pool and the root's mount point are the
		// provider's, shared by every sandbox.
		shared := []string{maskCacheFile, workPool, rootMount, trashDir, poolDir}
		if !slices.Contains(shared, e.Name()) && !strings.HasPrefix(e.Name(), etcBasePrefix) {
			t.Errorf("the failed create left %s in the state directory", e.Name())
		}
	}
}
