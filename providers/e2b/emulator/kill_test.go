//go:build linux

package emulator_test

import (
	"encoding/json"
	"net/http"
	"testing"

	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

// TestKillNotAdoptedAgain: while the backend deletes a killed sandbox,
// neither a lookup nor a list brings it back (the backend still lists it
// as running until its delete is done), and after the kill it is gone.
func TestKillNotAdoptedAgain(t *testing.T) {
	backend := emulatortest.NewHeldDelete(emulatortest.LocalBackend(t))
	srv := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	url := emulatortest.Serve(t, srv)
	key := map[string]string{wire.HeaderAPIKey: testKey}

	created := createBase(t, url)
	req, _ := http.NewRequest(http.MethodDelete, url+"/sandboxes/"+created.SandboxID, nil)
	req.Header.Set(wire.HeaderAPIKey, testKey)
	killed := emulatortest.StatusOf(req)
	<-backend.Entered
	if got := call(t, http.MethodGet, url+"/sandboxes/"+created.SandboxID, key); got != http.StatusNotFound {
		t.Errorf("GET during the kill: %d, want 404", got)
	}
	listed := func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/sandboxes", nil)
		req.Header.Set(wire.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list []wire.SandboxDetail
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatalf("list: %d %v", resp.StatusCode, err)
		}
		for _, d := range list {
			if d.SandboxID == created.SandboxID {
				return true
			}
		}
		return false
	}
	if listed() {
		t.Errorf("the list during the kill shows the killed sandbox")
	}
	close(backend.Release)
	if got := <-killed; got/100 != 2 {
		t.Fatalf("kill: %d", got)
	}
	if got := call(t, http.MethodGet, url+"/sandboxes/"+created.SandboxID, key); got != http.StatusNotFound {
		t.Errorf("GET after the kill: %d, want 404", got)
	}
	if listed() {
		t.Errorf("the list after the kill shows the killed sandbox")
	}
}
