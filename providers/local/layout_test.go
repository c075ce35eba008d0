//go:build linux

package local

import (
	"os"
	"path/filepath"
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
