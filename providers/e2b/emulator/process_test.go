//go:build linux

package emulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/fake"
)

// envdClient sends raw Connect requests to one sandbox's envd.
type envdClient struct {
	t           *testing.T
	url, id, tk string
}

// newEnvdClient creates a sandbox on an emulator over the fake backend.
func newEnvdClient(t *testing.T) *envdClient {
	t.Helper()
	srv := e2bemu.New(fake.New(), e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	url := emulatortest.Serve(t, srv)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	req.Header.Set(wire.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb wire.Sandbox
	if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil {
		t.Fatal(err)
	}
	return &envdClient{t: t, url: url, id: sb.SandboxID, tk: sb.EnvdAccessToken}
}

func (c *envdClient) post(path, contentType string, body []byte) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url+path, bytes.NewReader(body))
	req.Header.Set(wire.HeaderSandboxID, c.id)
	req.Header.Set(wire.HeaderSandboxPort, strconv.Itoa(wire.EnvdPort))
	req.Header.Set(wire.HeaderAccessToken, c.tk)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// stream opens a server stream and checks its content type.
func (c *envdClient) stream(path string, in any) io.Reader {
	c.t.Helper()
	var buf bytes.Buffer
	if err := wire.WriteMessage(&buf, in); err != nil {
		c.t.Fatal(err)
	}
	resp := c.post(path, wire.ContentTypeStream, buf.Bytes())
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != wire.ContentTypeStream {
		c.t.Fatalf("%s: status %d, Content-Type %q; want 200 and %q", path, resp.StatusCode, ct, wire.ContentTypeStream)
	}
	return resp.Body
}

// unary calls a unary method and returns its status.
func (c *envdClient) unary(path string, in any) int {
	c.t.Helper()
	b, _ := json.Marshal(in)
	resp := c.post(path, wire.ContentTypeUnary, b)
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// next reads the next event of a stream; end is the end of the stream.
func next(t *testing.T, r io.Reader) (ev wire.ProcessEvent, end *wire.EndStream) {
	t.Helper()
	flags, payload, err := wire.ReadEnvelope(r)
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if flags&wire.FlagEndStream != 0 {
		end = &wire.EndStream{}
		if err := json.Unmarshal(payload, end); err != nil {
			t.Fatal(err)
		}
		return ev, end
	}
	var se wire.StreamEvent
	if err := json.Unmarshal(payload, &se); err != nil {
		t.Fatal(err)
	}
	return se.Event, nil
}

// TestConnectFollowsARunningProcess: Connect answers with the stream
// content type, starts with the pid, then carries the output and the end
// of a process started by another stream, and fails for an unknown pid.
func TestConnectFollowsARunningProcess(t *testing.T) {
	t.Parallel()
	c := newEnvdClient(t)
	yes := true
	started := c.stream(wire.ProcessStart, wire.StartRequest{Process: wire.ProcessConfig{Cmd: "cat"}, Stdin: &yes})
	ev, end := next(t, started)
	if end != nil || ev.Start == nil || ev.Start.PID == 0 {
		t.Fatalf("first event of Start = %+v %+v, want the pid", ev, end)
	}
	pid := ev.Start.PID
	sel := wire.SelectRequest{Process: wire.ProcessSelector{PID: pid}}

	var list wire.ListResponse
	b, _ := json.Marshal(struct{}{})
	resp := c.post(wire.ProcessList, wire.ContentTypeUnary, b)
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Processes) != 1 || list.Processes[0].PID != pid || list.Processes[0].Config.Cmd != "cat" {
		t.Fatalf("List = %+v, %v; want the running cat with pid %d", list, err, pid)
	}

	attached := c.stream(wire.ProcessConnect, sel)
	if ev, end := next(t, attached); end != nil || ev.Start == nil || ev.Start.PID != pid {
		t.Fatalf("first event of Connect = %+v %+v, want the start with pid %d", ev, end, pid)
	}
	if st := c.unary(wire.ProcessSendInput, wire.SendInputRequest{Process: sel.Process, Input: wire.ProcessInput{Stdin: []byte("hello\n")}}); st != http.StatusOK {
		t.Fatalf("SendInput: status %d", st)
	}
	var out strings.Builder
	for out.String() != "hello\n" {
		ev, end := next(t, attached)
		if end != nil || ev.Data == nil {
			t.Fatalf("Connect: %+v %+v before the output; got %q", ev, end, out.String())
		}
		out.Write(ev.Data.Stdout)
	}
	if st := c.unary(wire.ProcessCloseStdin, sel); st != http.StatusOK {
		t.Fatalf("CloseStdin: status %d", st)
	}
	for _, r := range []io.Reader{attached, started} {
		for {
			ev, end := next(t, r)
			if end != nil {
				t.Fatalf("the stream ended (%+v) without an end event", end.Error)
			}
			if ev.End != nil {
				if !ev.End.Exited || ev.End.ExitCode != 0 {
					t.Errorf("end event %+v, want exit 0", ev.End)
				}
				break
			}
		}
		if _, end := next(t, r); end == nil || end.Error != nil {
			t.Errorf("after the end event: %+v, want a clean end of stream", end)
		}
	}

	gone := c.stream(wire.ProcessConnect, sel)
	if _, end := next(t, gone); end == nil || end.Error == nil || end.Error.Code != wire.CodeNotFound {
		t.Errorf("Connect to an ended process: %+v, want not_found", end)
	}
	if st := c.unary(wire.ProcessSendSignal, wire.SendSignalRequest{Process: sel.Process, Signal: wire.SignalSIGKILL}); st != http.StatusNotFound {
		t.Errorf("SendSignal to an ended process: status %d, want 404", st)
	}
}
