package procs

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestHelperReport is the process the other tests start: it prints
// GOMAXPROCS after One (what package start does first), and after Default.
func TestHelperReport(t *testing.T) {
	if os.Getenv("PROCS_HELPER") != "1" {
		return
	}
	One()
	at := runtime.GOMAXPROCS(0)
	Default()
	fmt.Printf("%d %d\n", at, runtime.GOMAXPROCS(0))
}

func report(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReport$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }), "PROCS_HELPER=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

func TestStartsOnOneProcessor(t *testing.T) {
	t.Parallel()
	// The runtime's default on this host: one per CPU (it would be fewer
	// under a CPU quota, which the hosts the tests run on do not set).
	want := fmt.Sprintf("1 %d", runtime.NumCPU())
	if got := report(t); got != want {
		t.Errorf("started with GOMAXPROCS and then Default's: %q, want %q", got, want)
	}
}

func TestEnvironmentWins(t *testing.T) {
	t.Parallel()
	if got := report(t, "GOMAXPROCS=3"); got != "3 3" {
		t.Errorf("with GOMAXPROCS=3: %q, want \"3 3\"", got)
	}
}
