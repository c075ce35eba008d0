//go:build linux

package local

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestLegacyLayoutAdopted: a sandbox made when /workspace and HOME were
// binds of its directories workspace and home finds its files at the next
// start, with both moved into its root layer and nothing left behind.
func TestLegacyLayoutAdopted(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	writeString(t, p, id, "/workspace/ws.txt", "from the workspace\n")
	writeString(t, p, id, p.home+"/.profile-test", "from home\n")
	stopSandbox(t, p, id)
	dir := filepath.Join(p.dir, id)
	// The layout of before: the two directories beside upper.
	for _, m := range [][2]string{{workspacePath(dir), legacyWorkspace}, {p.homePath(dir), legacyHome}} {
		if err := os.Rename(m[0], filepath.Join(dir, m[1])); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustRun(t, p, id, "cat /workspace/ws.txt ~/.profile-test"); got != "from the workspace\nfrom home\n" {
		t.Fatalf("after the move: %q", got)
	}
	for _, name := range []string{legacyWorkspace, legacyHome} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still beside the root layer: %v", name, err)
		}
	}
}

// TestStateRemovableByOwner (issue 15, a newcomer's first hour): the
// directories overlayfs makes in the work slots are left open to their
// owner, so that a user can remove the whole state directory with rm -rf
// (TestEscapeUnprivileged runs this test as an unprivileged user, where
// the removal itself is the check).
func TestStateRemovableByOwner(t *testing.T) {
	p := newTestProvider(t)
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, info.ID, "echo x > /workspace/f")
	stopSandbox(t, p, info.ID)
	err = filepath.WalkDir(filepath.Join(p.dir, workPool), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && d.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			t.Errorf("%s is %v: its owner cannot remove what it holds", path, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stop's reaper (see prepareAhead) is done with the slots first.
	p.bg.wg.Wait()
	if err := p.WaitReaped(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		t.Errorf("removing the state directory as its owner: %v", err)
	}
}

// TestLongStateDir (issue 15): a state directory whose path alone passes
// the 108 bytes of a Unix socket's address works: the machine's socket is
// reached by a short relative name.
func TestLongStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("long-directory-name-", 8))
	p := providerAt(t, dir)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "echo x > /tmp/x")
	if got := mustRun(t, p, id, "cat /tmp/x"); got != "x\n" {
		t.Errorf("the machine's /tmp: %q", got)
	}
	stopSandbox(t, p, id)
	mustRun(t, p, id, "true")
}
