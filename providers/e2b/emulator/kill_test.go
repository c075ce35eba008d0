//go:build linux

package emulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator/emulatortest"
)

// slowDelete holds the backend's Delete until release is closed, once it
// told entered that it began.
type slowDelete struct {
	providers.Provider
	entered, release chan struct{}
}

func (b *slowDelete) Delete(ctx context.Context, id string) error {
	close(b.entered)
	<-b.release
	return b.Provider.Delete(ctx, id)
}

// TestKillNotAdoptedAgain: while the backend deletes a killed sandbox,
// neither a lookup nor a list brings it back (the backend still lists it
// as running until its delete is done), and after the kill it is gone.
func TestKillNotAdoptedAgain(t *testing.T) {
	backend := &slowDelete{Provider: emulatortest.LocalBackend(t), entered: make(chan struct{}), release: make(chan struct{})}
	srv := e2bemu.New(backend, e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	url := emulatortest.Serve(t, srv)
	key := map[string]string{wire.HeaderAPIKey: testKey}

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
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %v", resp.StatusCode, err)
	}
	killed := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodDelete, url+"/sandboxes/"+created.SandboxID, nil)
		req.Header.Set(wire.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			killed <- 0
			return
		}
		resp.Body.Close()
		killed <- resp.StatusCode
	}()
	<-backend.entered
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
	close(backend.release)
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
