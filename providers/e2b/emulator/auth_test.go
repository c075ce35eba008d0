//go:build linux

package emulator_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
	"github.com/agentbox/sandbox/providers/fake"
)

// call sends a request with headers and returns its status.
func call(t *testing.T, method, url string, headers map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// createBase creates a sandbox of the base template through the API at
// url, with the test key.
func createBase(t *testing.T, url string) wire.Sandbox {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	req.Header.Set(wire.HeaderAPIKey, testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created wire.Sandbox
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || created.EnvdAccessToken == "" {
		t.Fatalf("create: %d %+v %v", resp.StatusCode, created, err)
	}
	return created
}

// TestKeyAndTokenChecks: the control plane accepts only the API key and
// envd only the sandbox's access token, whatever the wrong value looks
// like (empty, another length, the same length, a prefix).
func TestKeyAndTokenChecks(t *testing.T) {
	t.Parallel()
	srv := e2bemu.New(fake.New(), e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	url := emulatortest.Serve(t, srv)

	created := createBase(t, url)
	token := created.EnvdAccessToken
	// flip changes the last character: a wrong value of the same length.
	flip := func(s string) string {
		last := "0"
		if strings.HasSuffix(s, "0") {
			last = "1"
		}
		return s[:len(s)-1] + last
	}
	envd := map[string]string{wire.HeaderSandboxID: created.SandboxID, wire.HeaderSandboxPort: strconv.Itoa(wire.EnvdPort)}
	with := func(h map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for hk, hv := range h {
			out[hk] = hv
		}
		if v != "" {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		want    int
	}{
		{"no key", http.MethodGet, "/sandboxes", nil, http.StatusUnauthorized},
		{"wrong key", http.MethodGet, "/sandboxes", with(nil, wire.HeaderAPIKey, "e2b_wrong"), http.StatusUnauthorized},
		{"key of the same length", http.MethodGet, "/sandboxes", with(nil, wire.HeaderAPIKey, flip(testKey)), http.StatusUnauthorized},
		{"prefix of the key", http.MethodGet, "/sandboxes", with(nil, wire.HeaderAPIKey, testKey[:len(testKey)-1]), http.StatusUnauthorized},
		{"right key", http.MethodGet, "/sandboxes", with(nil, wire.HeaderAPIKey, testKey), http.StatusOK},
		{"envd without token", http.MethodGet, "/envs", envd, http.StatusUnauthorized},
		{"envd wrong token", http.MethodGet, "/envs", with(envd, wire.HeaderAccessToken, flip(token)), http.StatusUnauthorized},
		{"envd right token", http.MethodGet, "/envs", with(envd, wire.HeaderAccessToken, token), http.StatusOK},
		{"files wrong token", http.MethodGet, "/files?path=/workspace", with(envd, wire.HeaderAccessToken, flip(token)), http.StatusUnauthorized},
		{"files right token", http.MethodGet, "/files?path=/nonexistent", with(envd, wire.HeaderAccessToken, token), http.StatusNotFound},
	}
	for _, tt := range tests {
		if got := call(t, tt.method, url+tt.path, tt.headers); got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestServedEmulatorRefusesAnyKey: without a configured key the served
// emulator makes one up and accepts only it.
func TestServedEmulatorRefusesAnyKey(t *testing.T) {
	t.Parallel()
	em, err := e2bemu.NewEmulator(fake.New(), providers.EmulatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = em.Close() })
	url := emulatortest.Serve(t, em.(http.Handler))
	key := em.Env(url)["E2B_API_KEY"]
	for _, tt := range []struct {
		key  string
		want int
	}{
		{testKey, http.StatusUnauthorized},
		{key, http.StatusOK},
	} {
		if got := call(t, http.MethodGet, url+"/sandboxes", map[string]string{wire.HeaderAPIKey: tt.key}); got != tt.want {
			t.Errorf("key %q: status %d, want %d", tt.key, got, tt.want)
		}
	}
}
