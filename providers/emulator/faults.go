// Package emulator holds what every provider emulator shares: a fault
// injection layer that wraps any emulator's handler (5xx, 429 with
// Retry-After, added latency, responses cut mid-way), a request counter
// for checking that a client did not repeat a side effect. The helpers
// of the emulators' tests (starting a server, the local backend, running
// an official SDK's node script) live in package emulatortest, which only
// tests import.
//
// The emulators themselves live beside their providers
// (providers/<name>/emulator); this package knows nothing about any
// provider's wire protocol.
package emulator

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault describes what to do to matching requests.
type Fault struct {
	// Method and Path select requests: an empty Method matches any, and
	// Path matches when it is a prefix of the request path (empty matches
	// all). Match, when set, must also return true.
	Method string
	Path   string
	Match  func(*http.Request) bool
	// Times is how many matching requests the fault applies to; zero
	// means every one until it is removed.
	Times int

	// Status answers the request with this status (and a JSON error
	// body) instead of serving it, e.g. 500, 503 or 429.
	Status int
	// RetryAfter is sent as the Retry-After header with Status.
	RetryAfter string
	// Latency delays the request before it is handled.
	Latency time.Duration
	// CutAfter serves the request but breaks the connection once this
	// many response body bytes were written (a stream cut mid-way). Zero
	// means no cut; use a negative value to cut before the first byte.
	CutAfter int64
	// DropResponse serves the request, then breaks the connection
	// instead of sending the reply: the side effect happened, the client
	// cannot know.
	DropResponse bool
}

// Faults is a switchable fault layer. Tests add faults while the server
// runs; a fault applies to the next matching requests only. The zero
// value is not usable; call NewFaults.
type Faults struct {
	mu     sync.Mutex
	rules  []*rule
	counts map[string]int
}

type rule struct {
	f    Fault
	left int
}

// NewFaults returns an empty fault layer.
func NewFaults() *Faults { return &Faults{counts: map[string]int{}} }

// Add installs a fault and returns a function that removes it.
func (f *Faults) Add(fault Fault) (remove func()) {
	r := &rule{f: fault, left: fault.Times}
	f.mu.Lock()
	f.rules = append(f.rules, r)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.rules {
			if x == r {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// Count returns how many requests with this method and path reached the
// layer (faulted or not).
func (f *Faults) Count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method+" "+path]
}

// ResetCounts forgets the request counts.
func (f *Faults) ResetCounts() {
	f.mu.Lock()
	f.counts = map[string]int{}
	f.mu.Unlock()
}

// take returns the fault for r, if any, consuming one use of it.
func (f *Faults) take(r *http.Request) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[r.Method+" "+r.URL.Path]++
	for i, x := range f.rules {
		if x.f.Method != "" && x.f.Method != r.Method {
			continue
		}
		if !strings.HasPrefix(r.URL.Path, x.f.Path) {
			continue
		}
		if x.f.Match != nil && !x.f.Match(r) {
			continue
		}
		if x.f.Times > 0 {
			x.left--
			if x.left <= 0 {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
			}
		}
		return x.f, true
	}
	return Fault{}, false
}

// Wrap returns h behind the fault layer.
func (f *Faults) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault, ok := f.take(r)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		if fault.Latency > 0 {
			t := time.NewTimer(fault.Latency)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if fault.Status != 0 {
			if fault.RetryAfter != "" {
				w.Header().Set("Retry-After", fault.RetryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(fault.Status)
			_, _ = w.Write([]byte(`{"code":` + strconv.Itoa(fault.Status) + `,"message":"injected fault: ` + http.StatusText(fault.Status) + `"}`))
			return
		}
		if fault.DropResponse {
			h.ServeHTTP(&discardWriter{header: http.Header{}}, r)
			panic(http.ErrAbortHandler)
		}
		if fault.CutAfter != 0 {
			limit := max(fault.CutAfter, 0)
			w = &cutWriter{ResponseWriter: w, left: limit}
			if limit == 0 {
				panic(http.ErrAbortHandler)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// cutWriter writes up to left body bytes, then aborts the connection.
type cutWriter struct {
	http.ResponseWriter
	left int64
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if int64(len(b)) < c.left {
		c.left -= int64(len(b))
		return c.ResponseWriter.Write(b)
	}
	n, _ := c.ResponseWriter.Write(b[:c.left])
	c.left = 0
	if fl, ok := c.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	_ = n
	// Unwinds the handler; net/http closes the connection without
	// finishing the response, which a client reads as a cut stream.
	panic(http.ErrAbortHandler)
}

// Flush passes flushes through.
func (c *cutWriter) Flush() {
	if fl, ok := c.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// discardWriter swallows a response.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}
