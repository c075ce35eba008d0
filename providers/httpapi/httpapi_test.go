package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
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
		got, ok := RetryAfter(tc.in)
		if ok != tc.ok || got < tc.lo || got > tc.hi {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v in [%v, %v]", tc.in, got, ok, tc.ok, tc.lo, tc.hi)
		}
	}
}

func TestBackoffBounded(t *testing.T) {
	pol := RetryPolicy{}.WithDefaults()
	for attempt := 1; attempt < 70; attempt++ {
		d := Backoff(pol, attempt)
		if d < 0 || d > pol.MaxDelay {
			t.Fatalf("Backoff(attempt %d) = %v, want within [0, %v]", attempt, d, pol.MaxDelay)
		}
	}
}

// TestKindStatusTable checks that every shared kind an emulator answers
// with is read back as the same kind by a client.
func TestKindStatusTable(t *testing.T) {
	kinds := []error{providers.ErrNotFound, providers.ErrAuth, providers.ErrQuota, providers.ErrTimeout,
		providers.ErrUnavailable, providers.ErrUnsupported, providers.ErrInvalid, providers.ErrExists, providers.ErrDenied}
	for _, k := range kinds {
		status := StatusForKind(&providers.Error{Kind: k})
		if got := KindForStatus(status); got != k {
			t.Errorf("%v -> HTTP %d -> %v, want the same kind back", k, status, got)
		}
	}
	if got := StatusForKind(errors.New("plain")); got != http.StatusInternalServerError {
		t.Errorf("an error without a kind -> %d, want 500", got)
	}
}

func TestDoRetries(t *testing.T) {
	tests := []struct {
		name       string
		idempotent bool
		stream     bool
		statuses   []int // replies in order; the last repeats
		retryAfter string
		wantCalls  int
		wantKind   error // nil: success
	}{
		{"idempotent 503 then ok", true, false, []int{503, 503, 200}, "", 3, nil},
		{"idempotent 503 gives up after the attempts", true, false, []int{503}, "", 4, providers.ErrUnavailable},
		{"side effect 500 is not repeated", false, false, []int{500, 200}, "", 1, providers.ErrUnavailable},
		{"side effect 429 is repeated", false, false, []int{429, 200}, "0", 2, nil},
		{"404 is not repeated", true, false, []int{404}, "", 1, providers.ErrNotFound},
		{"Retry-After beyond the limit fails at once", true, false, []int{429}, "3600", 1, providers.ErrQuota},
		{"a sent stream is not repeated", true, true, []int{503, 200}, "", 1, providers.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				n := int(calls.Add(1))
				st := tc.statuses[min(n, len(tc.statuses))-1]
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(st)
				_, _ = w.Write([]byte(`{"message":"server says no"}`))
			}))
			defer srv.Close()
			c := &Client{HTTP: srv.Client(), Provider: "test", Retry: RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxRetryAfter: time.Minute}}
			r := &Request{Op: "op", Method: http.MethodPost, URL: srv.URL, Idempotent: tc.idempotent, Body: []byte("x")}
			if tc.stream {
				r.Body, r.Stream = nil, strings.NewReader("streamed body")
			}
			_, err := c.DoJSON(context.Background(), r, nil)
			if got := int(calls.Load()); got != tc.wantCalls {
				t.Errorf("calls = %d, want %d", got, tc.wantCalls)
			}
			switch {
			case tc.wantKind == nil && err != nil:
				t.Errorf("err = %v, want success", err)
			case tc.wantKind != nil && !errors.Is(err, tc.wantKind):
				t.Errorf("err = %v, want kind %v", err, tc.wantKind)
			case tc.wantKind != nil && !strings.Contains(err.Error(), "server says no"):
				t.Errorf("err = %v, want the server's message kept", err)
			}
		})
	}
}

func TestDoGoneOK(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Provider: "test", Retry: RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}
	_, err := c.DoJSON(context.Background(), &Request{Op: "delete", Method: http.MethodDelete, URL: srv.URL, Idempotent: true, GoneOK: true}, nil)
	if err != nil {
		t.Fatalf("a repeated delete that finds the resource gone: %v, want success", err)
	}
}

// TestUnreachableSaysWhatToCheck checks that a call whose connection is
// never made, after the retries, names the URL it tried (without the
// query), why, and what to check.
func TestUnreachableSaysWhatToCheck(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := &Client{HTTP: NewHTTPClient(), Provider: "e2b", Retry: RetryPolicy{Attempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}
	_, err = c.Do(t.Context(), &Request{Op: "list", Method: http.MethodGet, URL: "http://" + addr + "/sandboxes?token=secret", Idempotent: true})
	var ue *providers.UnreachableError
	if !errors.As(err, &ue) || !errors.Is(err, providers.ErrUnavailable) {
		t.Fatalf("error %v (%T), want an UnreachableError matching ErrUnavailable", err, err)
	}
	msg := err.Error()
	for _, want := range []string{"e2b: list: cannot reach http://" + addr + "/sandboxes (", "connection refused", "after 2 attempts", ": check the provider's API URL setting", "and the network"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "secret") || strings.Count(msg, addr) != 1 {
		t.Errorf("message %q: want the URL once, without its query", msg)
	}
	ue.Check = []string{"E2B_API_URL", "E2B_DOMAIN"}
	if msg := err.Error(); !strings.HasSuffix(msg, ": check E2B_API_URL or E2B_DOMAIN and the network") {
		t.Errorf("message %q does not name the variables", msg)
	}
}
