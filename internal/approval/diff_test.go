package approval

import "testing"

// TestUnifiedDiff checks the one diff of writes and edits: a new file is
// from /dev/null with a hunk from 0,0, and no blank line is invented.
func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, before, after string
		isNew               bool
		want                string
	}{
		{"new file", "", "a\nb\n", true, "--- /dev/null\n+++ b/w/f\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"new file without a final newline", "", "a", true, "--- /dev/null\n+++ b/w/f\n@@ -0,0 +1 @@\n+a\n"},
		{"change", "a\nb\n", "a\nc\n", false, "--- a/w/f\n+++ b/w/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"},
		{"emptied", "a\n", "", false, "--- a/w/f\n+++ b/w/f\n@@ -1 +0,0 @@\n-a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UnifiedDiff("/w/f", tt.before, tt.after, tt.isNew); got != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
