package emulator

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// LogRequests returns h writing one line per request to w once it has
// been answered: its start (UTC), method, host, path with query, status
// and duration. now is the clock (time.Now when nil); a nil w returns h
// unchanged.
func LogRequests(w io.Writer, now func() time.Time, h http.Handler) http.Handler {
	if w == nil {
		return h
	}
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := now()
		rec := &statusRecorder{ResponseWriter: rw, status: http.StatusOK}
		defer func() {
			fmt.Fprintf(w, "%s %s %s %s -> %d (%v)\n", start.UTC().Format(time.RFC3339), r.Method, r.Host, r.URL.RequestURI(), rec.status, now().Sub(start).Round(time.Millisecond))
		}()
		h.ServeHTTP(rec, r)
	})
}

// statusRecorder remembers the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush passes flushes through.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and websocket upgrades reach the
// connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
