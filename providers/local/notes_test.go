//go:build linux

package local

import (
	"strings"
	"testing"
)

func TestLandlockNote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		abi  int
		want string
	}{
		{0, "no Landlock"},
		{3, "Landlock ABI 3"},
		{5, "Landlock ABI 5"},
		{6, ""},
		{7, ""},
	}
	for _, tt := range tests {
		got := landlockNote(tt.abi)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) || tt.want != "" && !strings.Contains(got, "abstract Unix sockets") {
			t.Errorf("landlockNote(%d) = %q, want it to say %q", tt.abi, got, tt.want)
		}
	}
}

func TestNotesOnce(t *testing.T) {
	t.Parallel()
	var n notes
	if got := n.take("a"); got != "" {
		t.Errorf("no notes: %q", got)
	}
	n.add("a", "x")
	n.add("a", "x")
	n.add("a", "y")
	n.add("b", "x")
	if got := n.take("a"); got != "x; y" {
		t.Errorf("take(a) = %q", got)
	}
	n.add("a", "x")
	if got := n.take("a"); got != "" {
		t.Errorf("a note said once came back: %q", got)
	}
	if got := n.take("b"); got != "x" {
		t.Errorf("take(b) = %q", got)
	}
}
