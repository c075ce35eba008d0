package emulator

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

func TestFaults(t *testing.T) {
	var served atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	})
	f := NewFaults()
	url := emulatortest.Serve(t, f.Wrap(h))
	get := func(path string) (*http.Response, string, error) {
		resp, err := http.Get(url + path)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}

	t.Run("status with retry-after, twice", func(t *testing.T) {
		defer f.Add(Fault{Method: "GET", Path: "/a", Status: 429, RetryAfter: "7", Times: 2})()
		for i := range 3 {
			resp, body, err := get("/a/x")
			if err != nil {
				t.Fatal(err)
			}
			want := 429
			if i == 2 {
				want = 200
			}
			if resp.StatusCode != want {
				t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, want)
			}
			if want == 429 && (resp.Header.Get("Retry-After") != "7" || !strings.Contains(body, "injected fault")) {
				t.Errorf("request %d: Retry-After %q, body %q", i, resp.Header.Get("Retry-After"), body)
			}
		}
	})

	t.Run("other paths and methods are untouched", func(t *testing.T) {
		defer f.Add(Fault{Method: "POST", Path: "/b", Status: 500})()
		if resp, _, err := get("/b"); err != nil || resp.StatusCode != 200 {
			t.Errorf("GET /b under a POST fault: %v %v", resp.StatusCode, err)
		}
	})

	t.Run("cut mid-way", func(t *testing.T) {
		defer f.Add(Fault{Path: "/c", CutAfter: 100, Times: 1})()
		_, body, err := get("/c")
		if err == nil || len(body) != 100 {
			t.Errorf("cut response: %d bytes, err %v; want 100 bytes then an error", len(body), err)
		}
	})

	t.Run("dropped response still served", func(t *testing.T) {
		before := served.Load()
		defer f.Add(Fault{Path: "/d", DropResponse: true, Times: 1})()
		if _, _, err := get("/d"); err == nil {
			t.Error("a dropped response arrived")
		}
		if served.Load() != before+1 {
			t.Errorf("the handler ran %d times, want 1", served.Load()-before)
		}
	})

	t.Run("latency", func(t *testing.T) {
		defer f.Add(Fault{Path: "/e", Latency: 200 * time.Millisecond, Times: 1})()
		start := time.Now()
		if _, _, err := get("/e"); err != nil || time.Since(start) < 200*time.Millisecond {
			t.Errorf("latency fault: took %v, err %v", time.Since(start), err)
		}
	})

	t.Run("counts", func(t *testing.T) {
		f.ResetCounts()
		for range 3 {
			_, _, _ = get("/count")
		}
		if n := f.Count("GET", "/count"); n != 3 {
			t.Errorf("Count = %d, want 3", n)
		}
	})
}
