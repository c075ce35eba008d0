//go:build linux

package emulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/emulator"
	"github.com/agentbox/sandbox/providers/daytona/wire"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

// api sends a request with the test key and decodes a JSON reply into out
// (when not nil), returning the status.
func api(t *testing.T, method, u, key string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestAuth(t *testing.T) {
	base, _, _ := serve(t, emulator.Options{})
	tests := []struct {
		name, key string
		want      int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"wrong key", "nope", http.StatusUnauthorized},
		{"right key", testKey, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e wire.Error
			got := api(t, "GET", base+"/api/sandbox", tc.key, nil, &e)
			if got != tc.want {
				t.Errorf("GET /api/sandbox with %s: %d, want %d", tc.name, got, tc.want)
			}
			if got == http.StatusUnauthorized && (e.StatusCode != 401 || e.Message == "") {
				t.Errorf("401 body = %+v, want Daytona's error shape", e)
			}
		})
	}
}

// TestSocketIO checks the events gateway's handshake: the Engine.IO open
// packet, then the namespace connect accepted with the key and refused
// without it.
func TestSocketIO(t *testing.T) {
	base, _, _ := serve(t, emulator.Options{})
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/api/socket.io/?EIO=4&transport=websocket"
	tests := []struct {
		name, token, want string
	}{
		{"key accepted", testKey, `40{"sid":`},
		{"wrong key refused", "nope", `44{`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, _, err := websocket.Dial(t.Context(), wsURL, nil)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer conn.CloseNow()
			_, open, err := conn.Read(t.Context())
			if err != nil || !strings.HasPrefix(string(open), "0{") || !strings.Contains(string(open), `"sid":`) {
				t.Fatalf("open packet = %q, %v; want 0{\"sid\":…}", open, err)
			}
			auth, _ := json.Marshal(map[string]string{"token": tc.token})
			if err := conn.Write(t.Context(), websocket.MessageText, append([]byte("40"), auth...)); err != nil {
				t.Fatal(err)
			}
			_, reply, err := conn.Read(t.Context())
			if err != nil || !strings.HasPrefix(string(reply), tc.want) {
				t.Errorf("connect reply = %q, %v; want %s…", reply, err, tc.want)
			}
		})
	}
}

// TestIntervals checks that auto-stop stops an idle sandbox and that
// auto-delete destroys a stopped one, with the minute shortened.
func TestIntervals(t *testing.T) {
	base, _, _ := serve(t, emulator.Options{Minute: 200 * time.Millisecond, ReapInterval: 50 * time.Millisecond})
	stop, del := 1, 1
	var sb wire.Sandbox
	if got := api(t, "POST", base+"/api/sandbox", testKey, wire.CreateSandbox{AutoStopInterval: &stop, AutoDeleteInterval: &del}, &sb); got != 200 {
		t.Fatalf("create: %d", got)
	}
	if sb.ToolboxProxyURL != base+"/toolbox" || sb.State != wire.StateStarted {
		t.Fatalf("created %+v, want started with toolboxProxyUrl %s/toolbox", sb, base)
	}
	seen := map[string]bool{}
	// Generous: stopping and deleting a local sandbox is slow on a busy
	// machine.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var cur wire.Sandbox
		status := api(t, "GET", base+"/api/sandbox/"+sb.ID, testKey, nil, &cur)
		if status == http.StatusNotFound {
			seen["gone"] = true
			break
		}
		seen[cur.State] = true
		time.Sleep(20 * time.Millisecond)
	}
	if !seen[wire.StateStopped] || !seen["gone"] {
		t.Errorf("states seen %v, want stopped (auto-stop) then gone (auto-delete)", seen)
	}
}

// TestDeleteNotAdoptedAgain: while the backend deletes a sandbox, the
// sandbox shows as destroying, and once it is deleted it is gone. (Its
// record used to go first: a lookup meanwhile found the backend's sandbox
// still there and adopted it again, for good.)
func TestDeleteNotAdoptedAgain(t *testing.T) {
	backend := emulatortest.NewHeldDelete(emulatortest.LocalBackend(t))
	srv := emulator.New(backend, emulator.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	base := emulatortest.Serve(t, srv)
	var sb wire.Sandbox
	if got := api(t, "POST", base+"/api/sandbox", testKey, wire.CreateSandbox{}, &sb); got != 200 {
		t.Fatalf("create: %d", got)
	}
	req, _ := http.NewRequest("DELETE", base+"/api/sandbox/"+sb.ID, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	deleted := emulatortest.StatusOf(req)
	<-backend.Entered
	var during wire.Sandbox
	if got := api(t, "GET", base+"/api/sandbox/"+sb.ID, testKey, nil, &during); got != 200 || during.State != wire.StateDestroying {
		t.Errorf("during the delete: %d, state %q; want 200, %q", got, during.State, wire.StateDestroying)
	}
	close(backend.Release)
	if got := <-deleted; got != 200 {
		t.Fatalf("delete: %d", got)
	}
	if got := api(t, "GET", base+"/api/sandbox/"+sb.ID, testKey, nil, nil); got != http.StatusNotFound {
		t.Errorf("after the delete: %d, want 404", got)
	}
}

// TestListPages checks labels filtering and cursor paging of GET /sandbox.
func TestListPages(t *testing.T) {
	base, _, _ := serve(t, emulator.Options{})
	for i := range 3 {
		var sb wire.Sandbox
		labels := map[string]string{"group": "paged", "n": string(rune('a' + i))}
		if got := api(t, "POST", base+"/api/sandbox", testKey, wire.CreateSandbox{Labels: labels}, &sb); got != 200 {
			t.Fatalf("create: %d", got)
		}
	}
	q := url.Values{"labels": {`{"group":"paged"}`}, "limit": {"2"}}
	var ids []string
	for page := 0; page < 5; page++ {
		var list wire.SandboxList
		if got := api(t, "GET", base+"/api/sandbox?"+q.Encode(), testKey, nil, &list); got != 200 {
			t.Fatalf("list: %d", got)
		}
		for _, sb := range list.Items {
			ids = append(ids, sb.ID)
		}
		if list.NextCursor == nil {
			break
		}
		q.Set("cursor", *list.NextCursor)
	}
	if len(ids) != 3 {
		t.Errorf("paged list found %d sandboxes, want 3", len(ids))
	}
	var none wire.SandboxList
	api(t, "GET", base+"/api/sandbox?labels="+url.QueryEscape(`{"group":"other"}`), testKey, nil, &none)
	if len(none.Items) != 0 {
		t.Errorf("list with another label found %d", len(none.Items))
	}
	var e wire.Error
	if got := api(t, "GET", base+"/api/sandbox/no-such-sandbox", testKey, nil, &e); got != http.StatusNotFound || e.StatusCode != 404 {
		t.Errorf("GET of a missing sandbox: %d %+v, want 404 with Daytona's error body", got, e)
	}
}

// TestSignedURLs checks that a signed download needs no key, and that an
// expired, a forged or a rotated signature is refused.
func TestSignedURLs(t *testing.T) {
	base, _, _ := serve(t, emulator.Options{})
	var sb wire.Sandbox
	if got := api(t, "POST", base+"/api/sandbox", testKey, wire.CreateSandbox{}, &sb); got != 200 {
		t.Fatalf("create: %d", got)
	}
	upload, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/toolbox/"+sb.ID+"/files/upload-v2?path=/workspace/s.txt", strings.NewReader("signed"))
	upload.Header.Set("Authorization", "Bearer "+testKey)
	if resp, err := http.DefaultClient.Do(upload); err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %v %v", resp, err)
	}
	var key string
	api(t, "GET", base+"/api/sandbox/"+sb.ID+"/signing-key", testKey, nil, &key)
	sign := func(key, expires string) string {
		return emulator.FileURLSignatureForTest(key, "GET", "/workspace/s.txt", expires)
	}
	fetch := func(sig, expires string) int {
		q := url.Values{"path": {"/workspace/s.txt"}, "expires": {expires}, "signature": {sig}}
		resp, err := http.Get(base + "/toolbox/" + sb.ID + "/files/download?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	tests := []struct {
		name, sig, expires string
		want               int
	}{
		{"valid", sign(key, future), future, 200},
		{"never expires", sign(key, "0"), "0", 200},
		{"expired", sign(key, "1000"), "1000", 401},
		{"forged", sign("other", future), future, 401},
	}
	for _, tc := range tests {
		if got := fetch(tc.sig, tc.expires); got != tc.want {
			t.Errorf("%s signed download: %d, want %d", tc.name, got, tc.want)
		}
	}
	old := sign(key, future)
	api(t, "POST", base+"/api/sandbox/"+sb.ID+"/signing-key/rotate", testKey, nil, &key)
	if got := fetch(old, future); got != 401 {
		t.Errorf("a URL signed before the rotation: %d, want 401", got)
	}
	if got := fetch(sign(key, future), future); got != 200 {
		t.Errorf("a URL signed with the new key: %d, want 200", got)
	}
}

// TestNewEmulatorEnv checks what `sandbox serve --api daytona` prints: the
// API URL under /api and a random key when none is given, which the
// emulator then requires.
func TestNewEmulatorEnv(t *testing.T) {
	base, _, srv := serve(t, emulator.Options{})
	env := srv.Env(base)
	if env["DAYTONA_API_URL"] != base+"/api" || env["DAYTONA_API_KEY"] != testKey {
		t.Errorf("Env = %v, want DAYTONA_API_URL %s/api and the key", env, base)
	}
	keys := map[string]bool{}
	for range 2 {
		em, err := emulator.NewEmulator(fakeBackend{}, providers.EmulatorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		key := em.Env("http://x")["DAYTONA_API_KEY"]
		_ = em.Close()
		if len(key) < 32 {
			t.Errorf("key made up without --api-key: %q, want a long random one", key)
		}
		keys[key] = true
	}
	if len(keys) != 2 {
		t.Errorf("two emulators made up the same key: %v", keys)
	}
	if _, err := emulator.NewEmulator(nil, providers.EmulatorOptions{}); err == nil {
		t.Error("NewEmulator without a backend: err = nil")
	}
}

// fakeBackend is a backend that is never called.
type fakeBackend struct{ providers.Provider }
