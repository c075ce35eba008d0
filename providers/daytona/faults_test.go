//go:build linux

package daytona_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona"
	dtnemu "github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/emulator"
)

// newSandbox creates a sandbox through c and deletes it at the end.
func newSandbox(t *testing.T, c *daytona.Provider) providers.Info {
	t.Helper()
	info, err := c.Create(t.Context(), providers.Spec{Labels: map[string]string{"test": t.Name()}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Delete(ctx, info.ID)
	})
	return info
}

// TestFaults checks the client against the emulator's fault layer: how
// often each call is sent, and what the caller sees.
func TestFaults(t *testing.T) {
	h := newHarness(t, dtnemu.Options{})
	c := h.client(t, nil)
	info := newSandbox(t, c)
	id := info.ID
	toolbox := "/toolbox/" + id
	ctx := t.Context()

	t.Run("idempotent call retried a bounded number of times", func(t *testing.T) {
		h.faults.ResetCounts()
		defer h.faults.Add(emulator.Fault{Method: "GET", Path: "/api/sandbox/" + id, Status: 503})()
		_, err := c.Get(ctx, id)
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Errorf("Get under 503: err = %v, want ErrUnavailable", err)
		}
		if n := h.faults.Count("GET", "/api/sandbox/"+id); n != 4 {
			t.Errorf("Get under 503 was sent %d times, want 4 (the policy's attempts)", n)
		}
	})

	t.Run("429 with Retry-After is waited out, create sent twice, one sandbox", func(t *testing.T) {
		h.faults.ResetCounts()
		h.faults.Add(emulator.Fault{Method: "POST", Path: "/api/sandbox", Match: exactPath("/api/sandbox"), Status: 429, RetryAfter: "1", Times: 1})
		label := map[string]string{"retry-after": "yes"}
		start := time.Now()
		created, err := c.Create(ctx, providers.Spec{Labels: label})
		if err != nil {
			t.Fatalf("Create after one 429: %v", err)
		}
		defer c.Delete(context.WithoutCancel(ctx), created.ID)
		if d := time.Since(start); d < time.Second {
			t.Errorf("Create after 429 with Retry-After 1 took %v, want at least 1s", d)
		}
		if n := h.faults.Count("POST", "/api/sandbox"); n != 2 {
			t.Errorf("create sent %d times, want 2", n)
		}
		list, err := c.List(ctx, providers.Filter{Labels: label})
		if err != nil || len(list) != 1 {
			t.Errorf("List after the retried create: %d sandboxes (err %v), want 1", len(list), err)
		}
	})

	t.Run("create is never repeated after a lost reply", func(t *testing.T) {
		h.faults.ResetCounts()
		h.faults.Add(emulator.Fault{Method: "POST", Path: "/api/sandbox", Match: exactPath("/api/sandbox"), DropResponse: true, Times: 1})
		label := map[string]string{"lost-reply": "create"}
		if _, err := c.Create(ctx, providers.Spec{Labels: label}); !errors.Is(err, providers.ErrUnavailable) {
			t.Errorf("Create with its reply lost: err = %v, want ErrUnavailable", err)
		}
		if n := h.faults.Count("POST", "/api/sandbox"); n != 1 {
			t.Errorf("create sent %d times, want 1", n)
		}
		list, _ := c.List(ctx, providers.Filter{Labels: label})
		for _, sb := range list {
			_ = c.Delete(ctx, sb.ID)
		}
		if len(list) != 1 {
			t.Errorf("%d sandboxes made by the create whose reply was lost, want 1", len(list))
		}
	})

	t.Run("a command is never started twice after a lost reply", func(t *testing.T) {
		var starts atomic.Int32
		// A rule that never applies counts the starts; the next one drops
		// the first start's reply.
		defer h.faults.Add(emulator.Fault{Method: "POST", Path: toolbox + "/process/session/", Match: func(r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/exec") {
				starts.Add(1)
			}
			return false
		}})()
		h.faults.Add(emulator.Fault{Method: "POST", Path: toolbox + "/process/session/", Match: suffix("/exec"), DropResponse: true, Times: 1})
		_, err := c.Exec(ctx, id, providers.ExecRequest{Shell: "echo x >> /tmp/started"})
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Errorf("Exec with its start's reply lost: err = %v, want ErrUnavailable", err)
		}
		if n := starts.Load(); n != 1 {
			t.Errorf("the command's start was sent %d times, want 1", n)
		}
		// Deleting the session may end the command before it wrote.
		var out bytes.Buffer
		if _, err := c.Exec(ctx, id, providers.ExecRequest{Shell: "cat /tmp/started 2>/dev/null; true", Stdout: &out}); err != nil {
			t.Fatalf("Exec(cat): %v", err)
		}
		if s := out.String(); s != "" && s != "x\n" {
			t.Errorf("the command ran more than once: %q", s)
		}
	})

	t.Run("a cut download is an error with the bytes before the cut intact", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789"), 100<<10)
		if err := c.WriteFile(ctx, id, "/workspace/big", bytes.NewReader(data), 0o644); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		h.faults.Add(emulator.Fault{Method: "GET", Path: toolbox + "/files/download", CutAfter: 300 << 10, Times: 1})
		rc, err := c.ReadFile(ctx, id, "/workspace/big")
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Errorf("reading a cut download: err = %v, want ErrUnavailable", err)
		}
		if len(got) >= len(data) || !bytes.Equal(got, data[:len(got)]) {
			t.Errorf("a cut download gave %d bytes (a prefix: %v), want a true prefix", len(got), bytes.Equal(got, data[:min(len(got), len(data))]))
		}
	})

	t.Run("a refused upload leaves nothing", func(t *testing.T) {
		h.faults.ResetCounts()
		h.faults.Add(emulator.Fault{Method: "POST", Path: toolbox + "/files/upload-v2", Status: 500, Times: 1})
		err := c.WriteFile(ctx, id, "/workspace/refused/file", strings.NewReader("data"), 0o644)
		if err == nil {
			t.Fatal("WriteFile refused with 500: err = nil")
		}
		if n := h.faults.Count("POST", toolbox+"/files/upload-v2"); n != 1 {
			t.Errorf("a streamed upload was sent %d times, want 1", n)
		}
		if _, err := c.Stat(ctx, id, "/workspace/refused/file"); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat of the refused file: err = %v, want ErrNotFound", err)
		}
		list, _ := c.ListDir(ctx, id, "/workspace/refused", 1)
		if len(list) != 0 {
			t.Errorf("the refused upload left %v", list)
		}
	})

	t.Run("a rejected key names DAYTONA_API_KEY", func(t *testing.T) {
		bad := h.client(t, func(o *daytona.Options) { o.APIKey = "wrong" })
		_, err := bad.List(ctx, providers.Filter{})
		var ce *providers.CredentialError
		if !errors.As(err, &ce) || !ce.Rejected || ce.Var != daytona.EnvAPIKey {
			t.Errorf("List with a wrong key: err = %v, want a rejected CredentialError for %s", err, daytona.EnvAPIKey)
		}
	})
}

func TestMissingKey(t *testing.T) {
	_, err := daytona.New(providers.Config{Getenv: func(string) (string, bool) { return "", false }})
	var ce *providers.CredentialError
	if !errors.As(err, &ce) || ce.Var != daytona.EnvAPIKey || ce.Rejected {
		t.Fatalf("New without a key: err = %v, want a missing CredentialError for %s", err, daytona.EnvAPIKey)
	}
	if !strings.Contains(err.Error(), "DAYTONA_API_KEY") {
		t.Errorf("error %q does not name DAYTONA_API_KEY", err)
	}
}

func exactPath(p string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.URL.Path == p }
}

func suffix(s string) func(*http.Request) bool {
	return func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, s) }
}
