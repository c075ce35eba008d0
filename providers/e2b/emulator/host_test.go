package emulator

import (
	"regexp"
	"testing"
)

// TestEnvdHost holds envdHost to the pattern of an envd host's first
// label, <port>-<id>.
func TestEnvdHost(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^([0-9]+)-([a-z0-9]+)$`)
	for _, label := range []string{"49983-abc123", "3000-x", "-abc", "49983-", "49983", "49983-ABC", "a1-abc", "1-a-b", "", "12-é", "0-0"} {
		port, id, ok := envdHost(label)
		m := pattern.FindStringSubmatch(label)
		if ok != (m != nil) || (ok && (port != m[1] || id != m[2])) {
			t.Errorf("envdHost(%q) = %q, %q, %v; the pattern says %q", label, port, id, ok, m)
		}
	}
}
