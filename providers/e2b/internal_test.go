//go:build linux

package e2b

import (
	"testing"

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

func TestEncodeMetadataQuery(t *testing.T) {
	got := EncodeMetadataQuery(map[string]string{"b": "x y", "a&k": "v=1"})
	if want := "a%26k=v%3D1&b=x+y"; got != want {
		t.Errorf("EncodeMetadataQuery = %q, want %q (sorted, each part escaped)", got, want)
	}
}
