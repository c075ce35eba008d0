//go:build linux

package local

import (
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestTransientRootVolatile: a sandbox made for one run (Spec.Transient)
// mounts its root layer volatile on its first machine, as nothing of it
// outlives the run (its delete then skips the sync of the state disk); a
// sandbox made to last honours fsync there, and so does the transient one
// once started again (kept after all), with what it wrote intact.
func TestTransientRootVolatile(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	rootOptions := func(id string) string {
		t.Helper()
		out := mustRun(t, p, id, `grep " / / " /proc/self/mountinfo`)
		if !strings.Contains(out, " overlay ") {
			t.Fatalf("no overlay at /: %q", out)
		}
		return out
	}
	lasting := newSandbox(t, p, providers.Spec{})
	if o := rootOptions(lasting); strings.Contains(o, "volatile") {
		t.Errorf("a lasting sandbox's root is volatile: %s", o)
	}
	one := newSandbox(t, p, providers.Spec{Transient: true})
	if o := rootOptions(one); !strings.Contains(o, "volatile") {
		t.Errorf("a transient sandbox's root is not volatile: %s", o)
	}
	writeString(t, p, one, "/srv/kept", "still here")
	stopSandbox(t, p, one)
	if o := rootOptions(one); strings.Contains(o, "volatile") {
		t.Errorf("started again, the root is still volatile: %s", o)
	}
	if got, err := readAll(t, p, one, "/srv/kept"); err != nil || string(got) != "still here" {
		t.Errorf("after the stop, /srv/kept = %q, %v", got, err)
	}
}
