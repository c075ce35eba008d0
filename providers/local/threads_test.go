//go:build linux

package local

import (
	"os"
	"strconv"
	"testing"
)

// threadCount is this process's number of OS threads.
func threadCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(statusLine(b, "Threads"))
	if err != nil {
		t.Fatalf("the Threads line of /proc/self/status: %v", err)
	}
	return n
}

// TestReserveThreads: the reserved threads exist once it returns and stay
// after their goroutines ended.
func TestReserveThreads(t *testing.T) {
	const n = 24
	reserveThreads(n)
	if got := threadCount(t); got < n {
		t.Fatalf("%d threads after reserving %d", got, n)
	}
	reserveThreads(1)
	if got := threadCount(t); got < n {
		t.Fatalf("%d threads once the reserving goroutines ended, want at least %d", got, n)
	}
}
