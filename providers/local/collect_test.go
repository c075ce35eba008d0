//go:build linux

package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// TestCollect: leftovers of interrupted creates and deletes (directories
// without metadata, one with its machine still running) go once older
// than the grace period, with their processes; young ones and sandboxes
// with metadata stay.
func TestCollect(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	kept := newSandbox(t, p, providers.Spec{})
	old := time.Now().Add(-time.Hour)

	// A create killed after mkdir: a bare directory, with a tree that
	// is hard to remove (a directory without permissions).
	bare := filepath.Join(p.dir, "sb-aaaaaaaaaa")
	if err := os.MkdirAll(filepath.Join(bare, "upper", "locked", "deep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(bare, "upper", "locked"), 0); err != nil {
		t.Fatal(err)
	}
	// A create still at work: young, so it stays.
	young := filepath.Join(p.dir, "sb-bbbbbbbbbb")
	if err := os.Mkdir(young, 0o700); err != nil {
		t.Fatal(err)
	}
	// A delete killed after it removed the metadata: the machine still
	// runs, with a background process.
	info, err := p.Create(ctx, providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	half := info.ID
	if _, err := p.Exec(ctx, half, providers.ExecRequest{Shell: "sleep 600", Background: true}); err != nil {
		t.Fatal(err)
	}
	rec, err := readMachineRecord(filepath.Join(p.dir, half))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(p.dir, half, metaFile)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{bare, filepath.Join(p.dir, half)} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	got, err := p.Collect(ctx, 10*time.Minute)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	slices.Sort(got)
	if want := []string{half, "sb-aaaaaaaaaa"}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("collected %q, want %q", got, want)
	}
	for _, d := range []string{bare, filepath.Join(p.dir, half)} {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", d, err)
		}
	}
	// Ended: gone, or a zombie until this process's waiter reaps it.
	if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(rec.pid), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
		t.Errorf("the half-deleted sandbox's machine (pid %d) still runs: %s", rec.pid, st)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a young directory was collected: %v", err)
	}
	if got := mustRun(t, p, kept, "echo alive"); got != "alive\n" {
		t.Errorf("a sandbox with metadata: %q", got)
	}
	// Nothing more to collect the second time; the young one goes with
	// no grace.
	if again, err := p.Collect(ctx, 10*time.Minute); err != nil || len(again) != 0 {
		t.Errorf("second collect: %q, %v", again, err)
	}
	if now, err := p.Collect(ctx, 0); err != nil || !slices.Equal(now, []string{"sb-bbbbbbbbbb"}) {
		t.Errorf("collect with no grace: %q, %v", now, err)
	}
}
