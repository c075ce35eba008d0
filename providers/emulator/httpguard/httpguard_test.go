package httpguard_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/emulator/httpguard"
)

// short are limits small enough for a test to wait them out.
func short() httpguard.Limits {
	return httpguard.Limits{
		MaxConns:          4,
		ReadHeaderTimeout: 300 * time.Millisecond,
		IdleTimeout:       300 * time.Millisecond,
		BodyStallTimeout:  300 * time.Millisecond,
		WriteStallTimeout: 300 * time.Millisecond,
	}
}

// served is a running server and what it saw.
type served struct {
	addr string
	// open and peak count the connections the server holds.
	open, peak atomic.Int64
}

// countingListener counts the connections accepted and not yet closed.
type countingListener struct {
	net.Listener
	s *served
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.s.open.Add(1)
	for {
		p := l.s.peak.Load()
		if n <= p || l.s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return &countedConn{Conn: c, s: l.s}, nil
}

// countedConn uncounts itself on its first Close.
type countedConn struct {
	net.Conn
	s    *served
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.s.open.Add(-1) })
	return err
}

// serve runs h under l on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler, l httpguard.Limits) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{addr: ln.Addr().String()}
	srv := httpguard.NewServer(h, l)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(httpguard.LimitListener(countingListener{Listener: ln, s: s}, l))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// client returns an HTTP client with its own connections, closed when the
// test ends.
func client(t *testing.T, timeout time.Duration) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// waitClosed reads c until the server closes it and returns how long that
// took; it fails the test after limit.
func waitClosed(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %v", limit)
	}
	return time.Since(start)
}

// TestIdleConnectionsClosed: a keep-alive connection that sends no further
// request, and one that never sends anything, are closed once the idle
// and header timeouts pass.
func TestIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	s := serve(t, http.HandlerFunc(ok), short())
	tests := []struct {
		name    string
		request string
	}{
		{"keep-alive after a request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"nothing sent", ""},
		{"headers never finished", "GET / HTTP/1.1\r\nHost: x\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tt.request); err != nil {
				t.Fatal(err)
			}
			if took := waitClosed(t, c, 10*time.Second); took < 200*time.Millisecond {
				t.Errorf("closed after %v, before the timeout", took)
			}
		})
	}
}

// TestConnectionLimit: many more idle connections than the limit neither
// raise the connections the server holds above the limit nor lock a real
// client out: the extra ones wait in the accept queue, and the idle ones
// are closed in turn, so the client is served once its turn comes.
func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	l := short()
	s := serve(t, http.HandlerFunc(ok), l)
	var idle []net.Conn
	t.Cleanup(func() {
		for _, c := range idle {
			c.Close()
		}
	})
	for i := range l.MaxConns + 50 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		idle = append(idle, c)
		if i%2 == 0 {
			// A keep-alive request, then silence.
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, err := client(t, 30*time.Second).Get("http://" + s.addr + "/")
	if err != nil {
		t.Fatalf("a client behind %d idle connections: %v", len(idle), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("got %q", body)
	}
	if p := s.peak.Load(); p != int64(l.MaxConns) {
		t.Errorf("the server held at most %d connections at once, want the limit %d", p, l.MaxConns)
	}
}

// TestLongTransfersNotCut: a response streamed for longer than every
// timeout, with pauses longer than the write stall between writes, and an
// upload trickling in for longer than the body stall both complete; the
// request's context stays alive while the response streams after its body
// was read.
func TestLongTransfersNotCut(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 6 {
			if r.Context().Err() != nil {
				return
			}
			fmt.Fprintf(w, "line %d\n", i)
			if err := http.NewResponseController(w).Flush(); err != nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		time.Sleep(600 * time.Millisecond)
		io.WriteString(w, "end\n")
	})
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The answer streams for longer than every timeout after the
		// body was read.
		for range 4 {
			time.Sleep(250 * time.Millisecond)
			if r.Context().Err() != nil {
				return
			}
			io.WriteString(w, ".")
			http.NewResponseController(w).Flush()
		}
		fmt.Fprintf(w, "%d", n)
	})
	// The upload's pauses (150 ms) are well inside its body stall, and
	// the upload follows the stream on its connection well inside the
	// idle timeout: a loaded CI host once stretched a pause past a stall
	// of 300 ms. Both transfers still last longer than every timeout.
	l := short()
	l.BodyStallTimeout, l.IdleTimeout = time.Second, time.Second
	s := serve(t, mux, l)
	c := client(t, 30*time.Second)

	resp, err := c.Get("http://" + s.addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(got), "line 5\nend\n") {
		t.Errorf("stream: %q, %v", got, err)
	}

	pr, pw := io.Pipe()
	go func() {
		for range 12 {
			time.Sleep(150 * time.Millisecond)
			if _, err := pw.Write([]byte("0123456789")); err != nil {
				return
			}
		}
		pw.Close()
	}()
	resp, err = c.Post("http://"+s.addr+"/upload", "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(got) != "....120" {
		t.Errorf("upload: %d %q, %v", resp.StatusCode, got, err)
	}
}

// TestStallsCut: a body that stops arriving and a client that stops
// reading a response end their requests after the stall timeouts.
func TestStallsCut(t *testing.T) {
	t.Parallel()
	results := make(chan error, 2)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		results <- err
	})
	mux.HandleFunc("GET /flood", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				results <- err
				return
			}
		}
	})
	s := serve(t, mux, short())

	up, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	io.WriteString(up, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
	select {
	case err := <-results:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("a stalled body read: %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled upload was not cut")
	}

	down, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	io.WriteString(down, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-results:
		if err == nil {
			t.Error("a blocked write succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a response nobody reads was not cut")
	}
}

// TestAllowIdleBody: a handler that lifts the body stall reads a client
// stream with pauses longer than it.
func TestAllowIdleBody(t *testing.T) {
	t.Parallel()
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpguard.AllowIdleBody(r)
		sc := bufio.NewScanner(r.Body)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := sc.Err(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, strings.Join(lines, ","))
	}), short())
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, l := range []string{"one", "two"} {
			io.WriteString(pw, l+"\n")
			time.Sleep(800 * time.Millisecond)
		}
		pw.Close()
	})
	defer wg.Wait()
	resp, err := client(t, 30*time.Second).Post("http://"+s.addr+"/", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(got) != "one,two" {
		t.Errorf("idle stream: %d %q, %v", resp.StatusCode, got, err)
	}
}
