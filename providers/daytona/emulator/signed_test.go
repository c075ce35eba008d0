//go:build linux

package emulator

import "testing"

// TestFileURLSignature checks the signature against one computed by
// Node.js's crypto the way the official SDK's fileUrlSigning does.
func TestFileURLSignature(t *testing.T) {
	got := fileURLSignature("k3y", "GET", "fs/a.txt", "1700000000")
	if want := "v1_JXHqFH919nqbQqOFzznNIL8HQUL-jIJxQZS1troRckY"; got != want {
		t.Errorf("fileURLSignature = %s, want %s", got, want)
	}
}
