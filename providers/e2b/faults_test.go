//go:build linux

package e2b_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/providertest"
)

// labelled returns a spec with a label unique to the test, so that the
// sandboxes a faulted call may have created can be counted.
func labelled(t *testing.T) providers.Spec {
	return providers.Spec{Labels: map[string]string{"fault-test": strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))}}
}

// countSandboxes counts the sandboxes carrying spec's labels, straight
// from the backend.
func (h *harness) countSandboxes(t *testing.T, spec providers.Spec) int {
	t.Helper()
	list, err := h.backend.List(context.Background(), providers.Filter{Labels: spec.Labels})
	if err != nil {
		t.Fatalf("backend List: %v", err)
	}
	return len(list)
}

// appendLine runs a command with a side effect: it appends one line to
// /workspace/log.
var appendLine = providers.ExecRequest{Shell: "echo ran >> /workspace/log; echo out"}

func (h *harness) logLines(t *testing.T, p providers.Provider, id string) int {
	t.Helper()
	rc, err := p.ReadFile(context.Background(), id, "/workspace/log")
	if errors.Is(err, providers.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("ReadFile(log): %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return strings.Count(string(b), "ran\n")
}

// TestFaultMatrix injects each kind of fault into the emulator and checks
// the client's promises: idempotent calls retry and succeed, calls with
// side effects never repeat them, retries are bounded and honour
// Retry-After, a cut stream is an error and never silently short output,
// and every failure says what happened.
func TestFaultMatrix(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, nil)
	ctx := t.Context()
	base, err := p.Create(ctx, labelled(t))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	id := base.ID
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	getPath := "/sandboxes/" + id

	t.Run("get retries 503 then succeeds", func(t *testing.T) {
		h.faults.ResetCounts()
		defer h.faults.Add(emulator.Fault{Method: "GET", Path: getPath, Status: 503, Times: 2})()
		if _, err := p.Get(ctx, id); err != nil {
			t.Fatalf("Get with two 503s then success: %v", err)
		}
		if n := h.faults.Count("GET", getPath); n != 3 {
			t.Errorf("GET %s reached the server %d times, want 3 (two faults, one success)", getPath, n)
		}
	})

	t.Run("retries are bounded", func(t *testing.T) {
		h.faults.ResetCounts()
		defer h.faults.Add(emulator.Fault{Method: "GET", Path: getPath, Status: 502})()
		_, err := p.Get(ctx, id)
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Fatalf("Get under endless 502: err = %v, want ErrUnavailable", err)
		}
		if n := h.faults.Count("GET", getPath); n != 4 {
			t.Errorf("GET reached the server %d times, want exactly the 4 attempts configured", n)
		}
		if !strings.Contains(err.Error(), "after 4 attempts") || !strings.Contains(err.Error(), "injected fault") {
			t.Errorf("error %q should keep the server's message and say how many attempts were made", err)
		}
	})

	t.Run("retry-after is honoured", func(t *testing.T) {
		h.faults.ResetCounts()
		defer h.faults.Add(emulator.Fault{Method: "GET", Path: getPath, Status: 429, RetryAfter: "1", Times: 1})()
		start := time.Now()
		if _, err := p.Get(ctx, id); err != nil {
			t.Fatalf("Get after one 429: %v", err)
		}
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("Get retried after %v, want it to wait the 1s Retry-After", d)
		}
	})

	t.Run("retry-after longer than the client waits fails at once", func(t *testing.T) {
		h.faults.ResetCounts()
		defer h.faults.Add(emulator.Fault{Method: "GET", Path: getPath, Status: 429, RetryAfter: "3600", Times: 1})()
		start := time.Now()
		_, err := p.Get(ctx, id)
		if !errors.Is(err, providers.ErrQuota) || !strings.Contains(err.Error(), "retry after 1h0m0s") {
			t.Fatalf("Get with Retry-After 3600: err = %v, want ErrQuota naming the wait", err)
		}
		if time.Since(start) > 2*time.Second || h.faults.Count("GET", getPath) != 1 {
			t.Errorf("took %v and %d requests, want one request and an immediate failure", time.Since(start), h.faults.Count("GET", getPath))
		}
	})

	t.Run("create is not retried on 500", func(t *testing.T) {
		h.faults.ResetCounts()
		spec := labelled(t)
		defer h.faults.Add(emulator.Fault{Method: "POST", Path: "/sandboxes", Status: 500, Times: 1})()
		_, err := p.Create(ctx, spec)
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Fatalf("Create under a 500: err = %v, want ErrUnavailable", err)
		}
		if n := h.faults.Count("POST", "/sandboxes"); n != 1 {
			t.Errorf("POST /sandboxes sent %d times, want 1: a create is never repeated on a server error", n)
		}
	})

	t.Run("create whose reply is lost is not repeated", func(t *testing.T) {
		h.faults.ResetCounts()
		spec := labelled(t)
		defer h.faults.Add(emulator.Fault{Method: "POST", Path: "/sandboxes", DropResponse: true, Times: 1})()
		if _, err := p.Create(ctx, spec); !errors.Is(err, providers.ErrUnavailable) {
			t.Fatalf("Create with its reply lost: err = %v, want ErrUnavailable", err)
		}
		if n := h.countSandboxes(t, spec); n != 1 {
			t.Errorf("%d sandboxes exist after one create whose reply was lost, want exactly 1 (no duplicate)", n)
		}
		list, _ := h.backend.List(context.Background(), providers.Filter{Labels: spec.Labels})
		for _, info := range list {
			_ = h.backend.Delete(context.Background(), info.ID)
		}
	})

	t.Run("create is retried on 429", func(t *testing.T) {
		h.faults.ResetCounts()
		spec := labelled(t)
		defer h.faults.Add(emulator.Fault{Method: "POST", Path: "/sandboxes", Status: 429, RetryAfter: "0", Times: 1})()
		info, err := p.Create(ctx, spec)
		if err != nil {
			t.Fatalf("Create after one 429: %v", err)
		}
		defer p.Delete(context.Background(), info.ID)
		if n := h.countSandboxes(t, spec); n != 1 {
			t.Errorf("%d sandboxes after a create refused once with 429, want 1", n)
		}
	})

	t.Run("exec is not retried on 503", func(t *testing.T) {
		h.faults.ResetCounts()
		before := h.logLines(t, p, id)
		remove := h.faults.Add(emulator.Fault{Method: "POST", Path: "/process.Process/Start", Status: 503, Times: 1})
		_, err := p.Exec(ctx, id, appendLine)
		remove()
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Fatalf("Exec under a 503: err = %v, want ErrUnavailable", err)
		}
		if n := h.faults.Count("POST", "/process.Process/Start"); n != 1 {
			t.Errorf("Start sent %d times, want 1", n)
		}
		if got := h.logLines(t, p, id); got != before {
			t.Errorf("the command ran %d times, want 0", got-before)
		}
	})

	t.Run("exec whose reply is lost is not repeated", func(t *testing.T) {
		h.faults.ResetCounts()
		before := h.logLines(t, p, id)
		remove := h.faults.Add(emulator.Fault{Method: "POST", Path: "/process.Process/Start", CutAfter: -1, Times: 1})
		_, err := p.Exec(ctx, id, appendLine)
		remove()
		if err == nil {
			t.Fatal("Exec with the connection cut: err = nil, want an error")
		}
		if n := h.faults.Count("POST", "/process.Process/Start"); n != 1 {
			t.Errorf("Start sent %d times, want 1: a command is never repeated by a retry", n)
		}
		if got := h.logLines(t, p, id); got-before > 1 {
			t.Errorf("the command ran %d times, want at most once", got-before)
		}
	})

	t.Run("exec is retried on 429 and runs once", func(t *testing.T) {
		h.faults.ResetCounts()
		before := h.logLines(t, p, id)
		remove := h.faults.Add(emulator.Fault{Method: "POST", Path: "/process.Process/Start", Status: 429, RetryAfter: "0", Times: 1})
		var out bytes.Buffer
		res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: appendLine.Shell, Stdout: &out})
		remove()
		if err != nil || res.ExitCode != 0 || out.String() != "out\n" {
			t.Fatalf("Exec after one 429: exit %d, stdout %q, err %v", res.ExitCode, out.String(), err)
		}
		if got := h.logLines(t, p, id); got-before != 1 {
			t.Errorf("the command ran %d times, want exactly once", got-before)
		}
	})

	t.Run("a stream cut mid-way is an error, not short output", func(t *testing.T) {
		h.faults.ResetCounts()
		// The start event and the first line fit in 150 bytes; the cut
		// falls inside the stream, before the exit status.
		remove := h.faults.Add(emulator.Fault{Method: "POST", Path: "/process.Process/Start", CutAfter: 150, Times: 1})
		var out providertest.Buffer
		start := time.Now()
		_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "echo line1; sleep 0.3; echo line2; sleep 0.3; echo line3; sleep 30", Stdout: &out})
		remove()
		if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "incomplete") {
			t.Fatalf("Exec with its stream cut: err = %v, want ErrUnavailable saying output may be incomplete", err)
		}
		if time.Since(start) > 20*time.Second {
			t.Errorf("the cut was noticed after %v", time.Since(start))
		}
		if got := out.String(); !strings.HasPrefix("line1\nline2\nline3\n", got) {
			t.Errorf("output before the cut = %q, want a prefix of the real output", got)
		}
		if n := h.faults.Count("POST", "/process.Process/Start"); n != 1 {
			t.Errorf("Start sent %d times, want 1", n)
		}
	})

	t.Run("a download cut mid-way fails the read", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		if err := p.WriteFile(ctx, id, "/workspace/big", bytes.NewReader(data), 0o644); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		defer h.faults.Add(emulator.Fault{Method: "GET", Path: "/files", CutAfter: 100 << 10, Times: 1})()
		rc, err := p.ReadFile(ctx, id, "/workspace/big")
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err == nil {
			t.Fatalf("reading a download cut after %d of %d bytes succeeded", len(got), len(data))
		}
		if !errors.Is(err, providers.ErrUnavailable) || !bytes.Equal(got, data[:len(got)]) {
			t.Errorf("cut download: err = %v after %d bytes (prefix intact: %v), want ErrUnavailable", err, len(got), bytes.Equal(got, data[:len(got)]))
		}
	})

	t.Run("an upload refused with 503 leaves nothing behind", func(t *testing.T) {
		defer h.faults.Add(emulator.Fault{Method: "POST", Path: "/files", Status: 503, Times: 1})()
		err := p.WriteFile(ctx, id, "/workspace/refused.txt", strings.NewReader("data"), 0o644)
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Fatalf("WriteFile under a 503: err = %v, want ErrUnavailable", err)
		}
		list, err := p.ListDir(ctx, id, "/workspace", 1)
		if err != nil {
			t.Fatalf("ListDir: %v", err)
		}
		for _, fi := range list {
			if strings.Contains(fi.Name, "refused") {
				t.Errorf("a refused upload left %s behind", fi.Path)
			}
		}
	})

	t.Run("added latency is only slower", func(t *testing.T) {
		defer h.faults.Add(emulator.Fault{Path: "/filesystem.Filesystem/Stat", Latency: 300 * time.Millisecond})()
		start := time.Now()
		if _, err := p.Stat(ctx, id, "/workspace"); err != nil {
			t.Fatalf("Stat with latency: %v", err)
		}
		if time.Since(start) < 300*time.Millisecond {
			t.Errorf("Stat returned in %v, before the injected latency", time.Since(start))
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := p.Stat(short, id, "/workspace"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stat with a 50ms deadline under 300ms latency: err = %v, want context.DeadlineExceeded", err)
		}
	})

	t.Run("a kill whose reply is lost still succeeds", func(t *testing.T) {
		info, err := p.Create(ctx, labelled(t))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		defer h.faults.Add(emulator.Fault{Method: "DELETE", DropResponse: true, Times: 1})()
		if err := p.Delete(ctx, info.ID); err != nil {
			t.Fatalf("Delete whose first reply was lost: %v (the retry finds it gone, which is success)", err)
		}
		if _, err := p.Get(ctx, info.ID); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
		}
	})
}

// TestBadKey checks that a refused key is a credential error naming the
// variable to fix, and that a missing one is refused before any request.
func TestBadKey(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, func(o *e2b.Options) { o.APIKey = "e2b_wrong" })
	_, err := p.Create(t.Context(), providers.Spec{})
	var cred *providers.CredentialError
	if !errors.As(err, &cred) || !errors.Is(err, providers.ErrAuth) {
		t.Fatalf("Create with a wrong key: err = %v (%T), want a *CredentialError matching ErrAuth", err, err)
	}
	if cred.Var != e2b.EnvAPIKey || !cred.Rejected || !strings.Contains(err.Error(), "E2B_API_KEY") || !strings.Contains(err.Error(), "Invalid API key") {
		t.Errorf("error %q should name E2B_API_KEY and keep the server's message", err)
	}
	if n := h.faults.Count("POST", "/sandboxes"); n != 1 {
		t.Errorf("a refused key was sent %d times, want 1 (401 is not retried)", n)
	}
	_, err = e2b.New(providers.Config{Getenv: func(string) (string, bool) { return "", false }})
	if !errors.As(err, &cred) || cred.Rejected || cred.Var != e2b.EnvAPIKey {
		t.Errorf("New without E2B_API_KEY: err = %v, want a missing-credential error naming it", err)
	}
}

// TestHostRouting checks that envd is also reached by a <port>-<id>.<domain>
// Host without the routing headers, as E2B's edge routes it.
func TestHostRouting(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, nil)
	info, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Delete(context.Background(), info.ID)
	d := struct{ token string }{}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", h.url+"/sandboxes/"+info.ID, nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	decodeJSON(t, resp, &body)
	d.token = body.EnvdAccessToken

	for _, tc := range []struct {
		host, token string
		want        int
	}{
		{"49983-" + info.ID + ".e2b.local", d.token, http.StatusOK},
		{"49983-" + info.ID + ".e2b.local", "wrong", http.StatusUnauthorized},
		{"49983-nosuchsandbox.e2b.local", d.token, http.StatusBadGateway},
		{"8080-" + info.ID + ".e2b.local", d.token, http.StatusBadGateway},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", h.url+"/filesystem.Filesystem/Stat", strings.NewReader(`{"path":"/workspace"}`))
		req.Host = tc.host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Access-Token", tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Stat via Host %s (token %q): status %d, want %d", tc.host, tc.token, resp.StatusCode, tc.want)
		}
	}

	// A signed download URL works without the token, as the SDKs'
	// downloadUrl makes them: "v1_" + base64(sha256(path:op:user:token[:exp])).
	if err := p.WriteFile(t.Context(), info.ID, "/workspace/signed.txt", strings.NewReader("signed"), 0o644); err != nil {
		t.Fatal(err)
	}
	sign := func(path, op, user, exp string) string {
		msg := path + ":" + op + ":" + user + ":" + d.token
		if exp != "" {
			msg += ":" + exp
		}
		sum := sha256.Sum256([]byte(msg))
		return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	past := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	const file = "/workspace/signed.txt"
	for _, tc := range []struct {
		name, query string
		want        int
	}{
		{"signed", q("path", file, "signature", sign(file, "read", "", "")), 200},
		{"signed with expiry", q("path", file, "signature_expiration", future, "signature", sign(file, "read", "", future)), 200},
		{"expired", q("path", file, "signature_expiration", past, "signature", sign(file, "read", "", past)), 401},
		{"signed for writing", q("path", file, "signature", sign(file, "write", "", "")), 401},
		{"signed for another user", q("path", file, "username", "root", "signature", sign(file, "read", "", "")), 401},
		{"unsigned", q("path", file), 401},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", h.url+"/files?"+tc.query, nil)
		req.Host = "49983-" + info.ID + ".e2b.local"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == 200 && string(body) != "signed") {
			t.Errorf("%s download: status %d body %q, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
}

// TestExecMissingCwd checks that a working directory that does not exist
// is an error of kind ErrInvalid, not an exit status.
func TestExecMissingCwd(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, nil)
	info, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Delete(context.Background(), info.ID)
	_, err = p.Exec(t.Context(), info.ID, providers.ExecRequest{Argv: []string{"pwd"}, Cwd: "/workspace/no-such-dir"})
	if !errors.Is(err, providers.ErrInvalid) || !strings.Contains(err.Error(), "no-such-dir") {
		t.Errorf("Exec in a missing cwd: err = %v, want ErrInvalid naming the directory", err)
	}
}

// TestListPages checks that List follows X-Next-Token through every page
// and filters by labels on the server.
func TestListPages(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, func(o *e2b.Options) { o.PageSize = 2 })
	want := map[string]bool{}
	for range 5 {
		info, err := p.Create(t.Context(), providers.Spec{Labels: map[string]string{"paging": "yes"}})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		defer p.Delete(context.Background(), info.ID)
		want[info.ID] = true
	}
	other, err := p.Create(t.Context(), providers.Spec{Labels: map[string]string{"paging": "no"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Delete(context.Background(), other.ID)
	h.faults.ResetCounts()
	list, err := p.List(t.Context(), providers.Filter{Labels: map[string]string{"paging": "yes"}})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]bool{}
	for _, info := range list {
		got[info.ID] = true
	}
	if len(list) != 5 || len(got) != 5 || got[other.ID] {
		t.Errorf("List(paging=yes) = %d sandboxes (%v), want the 5 created with that label", len(list), got)
	}
	if n := h.faults.Count("GET", "/v2/sandboxes"); n != 3 {
		t.Errorf("List made %d page requests, want 3 (pages of 2, 2 and 1)", n)
	}
}

// TestEmulatorRestart checks that a new emulator on the same backend finds
// the sandboxes the previous one created, with their metadata and
// deadline, and that a client keeps working with them.
func TestEmulatorRestart(t *testing.T) {
	backend := emulatortest.LocalBackend(t)
	first := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	url1 := emulatortest.Serve(t, first)
	p1, err := e2b.NewWithOptions(e2b.Options{APIKey: testKey, APIURL: url1, SandboxURL: url1})
	if err != nil {
		t.Fatal(err)
	}
	info, err := p1.Create(t.Context(), providers.Spec{Labels: map[string]string{"restart": "yes"}, TTL: 10 * time.Minute})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := p1.WriteFile(t.Context(), info.ID, "/workspace/kept", strings.NewReader("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = second.Close() })
	url2 := emulatortest.Serve(t, second)
	p2, err := e2b.NewWithOptions(e2b.Options{APIKey: testKey, APIURL: url2, SandboxURL: url2})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Delete(context.Background(), info.ID)
	got, err := p2.Get(t.Context(), info.ID)
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if len(got.Labels) != 1 || got.Labels["restart"] != "yes" {
		t.Errorf("labels after restart = %v, want only restart=yes", got.Labels)
	}
	if d := got.ExpiresAt.Sub(info.ExpiresAt).Abs(); d > 2*time.Second {
		t.Errorf("deadline after restart = %v, was %v", got.ExpiresAt, info.ExpiresAt)
	}
	var out bytes.Buffer
	if _, err := p2.Exec(t.Context(), info.ID, providers.ExecRequest{Argv: []string{"cat", "/workspace/kept"}, Stdout: &out}); err != nil || out.String() != "kept" {
		t.Errorf("Exec after restart: %q, %v", out.String(), err)
	}
	list, err := p2.List(t.Context(), providers.Filter{Labels: map[string]string{"restart": "yes"}})
	if err != nil || len(list) != 1 {
		t.Errorf("List after restart = %v, %v; want the one sandbox", list, err)
	}
}

// TestLabelsWithSpecialCharacters checks that labels survive the metadata
// query encoding in both directions.
func TestLabelsWithSpecialCharacters(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, nil)
	labels := map[string]string{"a&b": "c=d e+f%", "ünï": "ĉödé/?#"}
	info, err := p.Create(t.Context(), providers.Spec{Labels: labels})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Delete(context.Background(), info.ID)
	list, err := p.List(t.Context(), providers.Filter{Labels: labels})
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("List(%v) = %v, %v; want the one sandbox", labels, list, err)
	}
	for k, v := range labels {
		if list[0].Labels[k] != v {
			t.Errorf("label %q = %q, want %q", k, list[0].Labels[k], v)
		}
	}
	list, err = p.List(t.Context(), providers.Filter{Labels: map[string]string{"a&b": "c=d"}})
	if err != nil || len(list) != 0 {
		t.Errorf("List with a partial value = %v, %v; want none", list, err)
	}
}

// TestPauseResumeTimeout checks SetTimeout, Pause and the resume that the
// next operation on a paused sandbox performs.
func TestPauseResumeTimeout(t *testing.T) {
	h := newHarness(t)
	p := h.client(t, nil)
	ctx := t.Context()
	info, err := p.Create(ctx, providers.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Delete(context.Background(), info.ID)

	if err := p.SetTimeout(ctx, info.ID, 30*time.Second); err != nil {
		t.Fatalf("SetTimeout: %v", err)
	}
	got, err := p.Get(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(got.ExpiresAt); left < 25*time.Second || left > 31*time.Second {
		t.Errorf("after SetTimeout(30s) the sandbox expires in %v", left)
	}

	if err := p.Pause(ctx, info.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if got, err := p.Get(ctx, info.ID); err != nil || got.State != providers.StatePaused {
		t.Fatalf("Get after Pause = %v, %v; want paused", got.State, err)
	}
	if err := p.Pause(ctx, info.ID); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("pausing a paused sandbox: err = %v, want ErrInvalid (409)", err)
	}
	var out bytes.Buffer
	if _, err := p.Exec(ctx, info.ID, providers.ExecRequest{Argv: []string{"echo", "resumed"}, Stdout: &out}); err != nil || out.String() != "resumed\n" {
		t.Fatalf("Exec on a paused sandbox = %q, %v; want it resumed and run", out.String(), err)
	}
	got, err = p.Get(ctx, info.ID)
	if err != nil || got.State != providers.StateRunning {
		t.Errorf("Get after the resume = %v, %v; want running", got.State, err)
	}
	if left := time.Until(got.ExpiresAt); left < 4*time.Minute {
		t.Errorf("after resuming the sandbox expires in %v, want at least the 5 minutes a resume grants", left)
	}
}
