//go:build linux

package emulator

import (
	"io/fs"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

func TestDiffStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	file := func(size int64, mod time.Time, perm fs.FileMode) pathState {
		return pathState{size: size, mod: mod, mode: perm}
	}
	dir := pathState{mode: fs.ModeDir | 0o755}
	for _, tc := range []struct {
		name       string
		prev, next map[string]pathState
		want       []string
	}{
		{"nothing changed", map[string]pathState{"a": file(1, t0, 0o644)}, map[string]pathState{"a": file(1, t0, 0o644)}, nil},
		{"a new empty file", nil, map[string]pathState{"a": file(0, t0, 0o644)}, []string{"a:1"}},
		{"a new file with contents", nil, map[string]pathState{"a": file(3, t0, 0o644)}, []string{"a:1", "a:2"}},
		{"a new directory", nil, map[string]pathState{"d": dir}, []string{"d:1"}},
		{"rewritten, same size", map[string]pathState{"a": file(3, t0, 0o644)}, map[string]pathState{"a": file(3, t0.Add(time.Nanosecond), 0o644)}, []string{"a:2"}},
		{"chmod", map[string]pathState{"a": file(3, t0, 0o644)}, map[string]pathState{"a": file(3, t0, 0o600)}, []string{"a:5"}},
		{"removed", map[string]pathState{"a": file(3, t0, 0o644), "b": dir}, map[string]pathState{"b": dir}, []string{"a:3"}},
		{"file became a directory", map[string]pathState{"a": file(3, t0, 0o644)}, map[string]pathState{"a": dir}, []string{"a:3", "a:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, ev := range diffStates(tc.prev, tc.next, false) {
				got = append(got, ev.Name+":"+strconv.Itoa(int(ev.Type)))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	out := "cpu  100 0 100 700 100 0 0 0 0 0\ncpu  150 0 150 800 100 0 0 0 0 0\nncpu 4\n" +
		"MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\nCached:          200 kB\n" +
		"disk /dev/root 2000 500 1500 25% /\n"
	m := parseMetrics(out)
	want := wire.SandboxMetric{CPUCount: 4, CPUUsedPct: 50, MemTotal: 1000 << 10, MemUsed: 600 << 10, MemCache: 200 << 10, DiskTotal: 2000 << 10, DiskUsed: 500 << 10}
	if m != want {
		t.Fatalf("parseMetrics = %+v, want %+v", m, want)
	}
}

func TestFilesAllowed(t *testing.T) {
	now := time.Unix(2_000_000_000, 0)
	sb := &sandbox{token: "tok"}
	signed := func(method string, q url.Values, token string) string {
		op := "read"
		if method == "POST" {
			op = "write"
		}
		q.Set("signature", signatureOf(q, op, token))
		return "/files?" + q.Encode()
	}
	for _, tc := range []struct {
		name, method, target string
		want                 string
	}{
		{"no signature", "GET", "/files?path=a", msgUnauthorized},
		{"read signature", "GET", signed("GET", url.Values{"path": {"a"}}, "tok"), ""},
		{"write signature", "POST", signed("POST", url.Values{"path": {"a"}, "username": {"root"}}, "tok"), ""},
		{"read signature used to write", "POST", signed("GET", url.Values{"path": {"a"}}, "tok"), msgBadSignature},
		{"another sandbox's token", "GET", signed("GET", url.Values{"path": {"a"}}, "other"), msgBadSignature},
		{"not expired", "GET", signed("GET", url.Values{"path": {"a"}, "signature_expiration": {strconv.FormatInt(now.Unix()+10, 10)}}, "tok"), ""},
		{"expired", "GET", signed("GET", url.Values{"path": {"a"}, "signature_expiration": {strconv.FormatInt(now.Unix()-10, 10)}}, "tok"), msgExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, nil)
			if got := filesAllowed(r, sb, now); got != tc.want {
				t.Fatalf("filesAllowed = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEntryOfModeAndTarget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fi        providers.FileInfo
		mode      uint32
		target    string
		entryType wire.FileType
	}{
		{"directory", providers.FileInfo{Path: "/home/user/d", Mode: fs.ModeDir | 0o755}, 0o755, "", wire.FileTypeDirectory},
		{"relative link", providers.FileInfo{Path: "/home/user/l", Mode: fs.ModeSymlink | 0o777, Target: "f.txt"}, 0o777, "/home/user/f.txt", wire.FileTypeSymlink},
		{"absolute link", providers.FileInfo{Path: "/home/user/l", Mode: fs.ModeSymlink | 0o777, Target: "/etc/hosts"}, 0o777, "/etc/hosts", wire.FileTypeSymlink},
		{"dotted link", providers.FileInfo{Path: "/home/user/d/l", Mode: fs.ModeSymlink | 0o777, Target: "../f"}, 0o777, "/home/user/f", wire.FileTypeSymlink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := entryOf(tc.fi)
			if e.Mode != tc.mode || e.Type != tc.entryType {
				t.Fatalf("mode %o type %v, want %o %v", e.Mode, e.Type, tc.mode, tc.entryType)
			}
			got := ""
			if e.SymlinkTarget != nil {
				got = *e.SymlinkTarget
			}
			if got != tc.target {
				t.Fatalf("target %q, want %q", got, tc.target)
			}
		})
	}
}

// TestWatchCovers checks which changed paths make a watch look at once
// (see settleWatches): its root, and what is in it, at any depth only
// when recursive.
func TestWatchCovers(t *testing.T) {
	tests := []struct {
		recursive bool
		path      string
		want      bool
	}{
		{false, "/home/user/w", true},
		{false, "/home/user/w/a.txt", true},
		{false, "/home/user/w/sub/a.txt", false},
		{false, "/home/user/wx", false},
		{true, "/home/user/w/sub/a.txt", true},
		{true, "/home/user/wx/a.txt", false},
		{true, "/home/user", false},
	}
	for _, tc := range tests {
		w := &watcher{root: "/home/user/w", recursive: tc.recursive}
		if got := w.covers(tc.path); got != tc.want {
			t.Errorf("recursive %v, %s: %v, want %v", tc.recursive, tc.path, got, tc.want)
		}
	}
}
