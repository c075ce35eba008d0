package start

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestStartsOnOne runs in a binary that imports the package, as the
// programs do: its initialiser has run.
func TestStartsOnOne(t *testing.T) {
	want := 1
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("GOMAXPROCS=%q in the environment", v)
		}
		want = n
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS = %d, want %d", got, want)
	}
}
