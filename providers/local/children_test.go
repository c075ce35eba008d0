//go:build linux

package local

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestChildrenOf finds a child of this process both ways: from the
// threads' children files, and by every process's parent, which is what
// a kernel without those files leaves.
func TestChildrenOf(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	self, kid := os.Getpid(), cmd.Process.Pid
	for name, got := range map[string][]int{
		"childrenOf":       childrenOf(self),
		"childrenByParent": childrenByParent(self, "/proc"),
	} {
		if !slices.Contains(got, kid) {
			t.Errorf("%s(%d) = %v, want it to hold %d", name, self, got, kid)
		}
		if slices.Contains(got, self) || slices.Contains(got, 1) {
			t.Errorf("%s(%d) = %v: not only children", name, self, got)
		}
	}
}
