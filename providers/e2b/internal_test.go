package e2b

import (
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/e2b/wire"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		end  wire.EndEvent
		want int
	}{
		{"success omits everything", wire.EndEvent{}, 0},
		{"exit status", wire.EndEvent{ExitCode: 3, Exited: true, Status: "exit status 3"}, 3},
		{"killed", wire.EndEvent{ExitCode: -1, Status: "signal: killed"}, 137},
		{"terminated", wire.EndEvent{ExitCode: -1, Status: "signal: terminated"}, 143},
		{"unknown signal", wire.EndEvent{ExitCode: -1, Status: "signal: power failure"}, 137},
		{"negative without status", wire.EndEvent{ExitCode: -1}, 137},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(&tc.end); got != tc.want {
				t.Errorf("exitCode(%+v) = %d, want %d", tc.end, got, tc.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(time.RFC1123)
	future = future[:len(future)-3] + "GMT"
	tests := []struct {
		in     string
		ok     bool
		lo, hi time.Duration
	}{
		{"", false, 0, 0},
		{"0", true, 0, 0},
		{"7", true, 7 * time.Second, 7 * time.Second},
		{" 2 ", true, 2 * time.Second, 2 * time.Second},
		{"-1", false, 0, 0},
		{"soon", false, 0, 0},
		{future, true, 80 * time.Second, 91 * time.Second},
		{"Mon, 01 Jan 2001 00:00:00 GMT", true, 0, 0},
	}
	for _, tc := range tests {
		got, ok := retryAfter(tc.in)
		if ok != tc.ok || got < tc.lo || got > tc.hi {
			t.Errorf("retryAfter(%q) = %v, %v; want %v in [%v, %v]", tc.in, got, ok, tc.ok, tc.lo, tc.hi)
		}
	}
}

func TestBackoffBounded(t *testing.T) {
	pol := RetryPolicy{}.withDefaults()
	for attempt := 1; attempt < 70; attempt++ {
		d := backoff(pol, attempt)
		if d < 0 || d > pol.MaxDelay {
			t.Fatalf("backoff(attempt %d) = %v, want within [0, %v]", attempt, d, pol.MaxDelay)
		}
	}
}

func TestEncodeMetadataQuery(t *testing.T) {
	got := EncodeMetadataQuery(map[string]string{"b": "x y", "a&k": "v=1"})
	if want := "a%26k=v%3D1&b=x+y"; got != want {
		t.Errorf("EncodeMetadataQuery = %q, want %q (sorted, each part escaped)", got, want)
	}
}
