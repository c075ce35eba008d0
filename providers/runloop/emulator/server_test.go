//go:build linux

package emulator_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/agentbox/sandbox/providers/runloop/emulator"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// apiClient sends requests to the emulator over HTTP/1.1 or h2c.
type apiClient struct {
	t    *testing.T
	url  string
	http *http.Client
}

func newClient(t *testing.T, url string, h2c bool) *apiClient {
	c := &http.Client{}
	if h2c {
		c.Transport = &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
	}
	return &apiClient{t: t, url: url, http: c}
}

// do sends a JSON request and returns the reply.
func (c *apiClient) do(method, path string, body any, hdr ...string) *http.Response {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(c.t.Context(), method, c.url+path, r)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// json sends a request, wants status and decodes the reply into out.
func (c *apiClient) json(method, path string, body any, status int, out any, hdr ...string) *http.Response {
	c.t.Helper()
	resp := c.do(method, path, body, hdr...)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, status)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return resp
}

func TestServer(t *testing.T) {
	s := serve(t, emulatorOptions())
	for _, tc := range []struct {
		name string
		h2c  bool
	}{{"http1", false}, {"h2c", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, s.URL, tc.h2c)
			before := s.HTTP2.Load()

			// A create answers at once, provisioning; the long poll
			// sees it run. The same X-Request-Id makes one devbox.
			var d, again wire.Devbox
			c.json("POST", "/v1/devboxes", wire.CreateDevbox{Metadata: map[string]string{"k": tc.name}}, 200, &d, wire.HeaderRequestID, "req-"+tc.name)
			c.json("POST", "/v1/devboxes", wire.CreateDevbox{}, 200, &again, wire.HeaderRequestID, "req-"+tc.name)
			if again.ID != d.ID {
				t.Errorf("a repeated create made %s besides %s", again.ID, d.ID)
			}
			for d.Status != wire.StatusRunning {
				resp := c.do("POST", "/v1/devboxes/"+d.ID+"/wait_for_status", wire.WaitForStatus{Statuses: []string{"running"}})
				if resp.StatusCode == http.StatusRequestTimeout {
					resp.Body.Close()
					continue
				}
				_ = json.NewDecoder(resp.Body).Decode(&d)
				resp.Body.Close()
			}
			defer c.json("POST", "/v1/devboxes/"+d.ID+"/shutdown", nil, 200, nil)

			// The long poll answers 408 with X-Should-Retry when its
			// hold runs out.
			resp := c.do("POST", "/v1/devboxes/"+d.ID+"/wait_for_status", wire.WaitForStatus{Statuses: []string{"suspended"}})
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get(wire.HeaderShouldRetry) != "true" {
				t.Errorf("devbox wait past its hold: %d, X-Should-Retry %q; want 408, true", resp.StatusCode, resp.Header.Get(wire.HeaderShouldRetry))
			}

			// SSE replays from any offset; offsets are where chunks end.
			var ex wire.Execution
			c.json("POST", "/v1/devboxes/"+d.ID+"/execute_async", wire.ExecuteAsync{Command: "printf 'héllo world'; sleep 0.3; printf '!'"}, 200, &ex)
			out := readSSE(t, c, "/v1/devboxes/"+d.ID+"/executions/"+ex.ExecutionID+"/stream_stdout_updates?offset=3")
			text, last := "", int64(0)
			for _, ch := range out {
				text += ch.Output
				last = ch.Offset
			}
			if text != "llo world!" || last != int64(len("héllo world!")) {
				t.Errorf("stdout from offset 3: %q ending at %d, want %q ending at %d", text, last, "llo world!", len("héllo world!"))
			}
			var done wire.Execution
			c.json("POST", "/v1/devboxes/"+d.ID+"/executions/"+ex.ExecutionID+"/wait_for_status", wire.WaitForStatus{Statuses: []string{"completed"}}, 200, &done)
			if done.ExitStatus == nil || *done.ExitStatus != 0 || done.Stdout != "héllo world!" {
				t.Errorf("completed execution: %+v", done)
			}

			// "~" is the home.
			c.json("POST", "/v1/devboxes/"+d.ID+"/write_file_contents", wire.WriteFileContents{FilePath: "~/t.txt", Contents: "x"}, 200, nil)
			var pwd wire.Execution
			c.json("POST", "/v1/devboxes/"+d.ID+"/execute?last_n=5", wire.Execute{Command: "cat \"$HOME/t.txt\"", CommandID: "c-" + tc.name}, 200, &pwd)
			for pwd.Status != wire.ExecCompleted {
				resp := c.do("POST", "/v1/devboxes/"+d.ID+"/executions/"+pwd.ExecutionID+"/wait_for_status", wire.WaitForStatus{Statuses: []string{"completed"}})
				if resp.StatusCode == http.StatusOK {
					_ = json.NewDecoder(resp.Body).Decode(&pwd)
				}
				resp.Body.Close()
			}
			if pwd.Stdout != "x" {
				t.Errorf("~/t.txt is not in $HOME: %+v", pwd)
			}

			// Wrong keys are refused.
			req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL+"/v1/devboxes", nil)
			req.Header.Set("Authorization", "Bearer nope")
			r, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != http.StatusUnauthorized {
				t.Errorf("a wrong key: %d, want 401", r.StatusCode)
			}
			if got := s.HTTP2.Load() - before; tc.h2c != (got > 0) {
				t.Errorf("%d requests came over HTTP/2", got)
			}
		})
	}
}

// readSSE reads an SSE stream to its end.
func readSSE(t *testing.T, c *apiClient, path string) []wire.Chunk {
	t.Helper()
	resp := c.do("GET", path, nil)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, ct)
	}
	var out []wire.Chunk
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ch wire.Chunk
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			out = append(out, ch)
		}
	}
	return out
}

func emulatorOptions() emulator.Options {
	return emulator.Options{DevboxHold: 300 * time.Millisecond, ExecutionHold: 300 * time.Millisecond}
}
