//go:build linux

package runloop_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/runloop"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
)

func TestCredentials(t *testing.T) {
	_, err := runloop.New(providers.Config{Getenv: func(string) (string, bool) { return "", false }})
	var ce *providers.CredentialError
	if !errors.As(err, &ce) || ce.Var != runloop.EnvAPIKey || ce.Rejected {
		t.Errorf("New without a key: %v, want a missing-credential error naming %s", err, runloop.EnvAPIKey)
	}
	h := newHarness(t, rlemu.Options{})
	p := h.client(t, func(o *runloop.Options) { o.APIKey = "ak_wrong" })
	_, err = p.List(t.Context(), providers.Filter{})
	if !errors.As(err, &ce) || !ce.Rejected || ce.Var != runloop.EnvAPIKey || !errors.Is(err, providers.ErrAuth) {
		t.Errorf("List with a wrong key: %v, want a rejected-credential error naming %s", err, runloop.EnvAPIKey)
	}
}

func TestControl(t *testing.T) {
	h := newHarness(t, rlemu.Options{DevboxHold: 200 * time.Millisecond})
	p := h.client(t, func(o *runloop.Options) { o.PageSize = 1 })
	name := t.Name()
	label := map[string]string{"control-test": name}
	ids := map[string]bool{}
	for range 3 {
		ids[create(t, p, label)] = true
	}
	create(t, p, map[string]string{"control-test": "other"})

	t.Run("list pages and filters on metadata", func(t *testing.T) {
		h.Faults.ResetCounts()
		got, err := p.List(t.Context(), providers.Filter{Labels: label})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(got) != len(ids) {
			t.Fatalf("List found %d devboxes, want %d", len(got), len(ids))
		}
		for _, in := range got {
			if !ids[in.ID] || in.State != providers.StateRunning || in.Labels["control-test"] != name {
				t.Errorf("List returned %+v", in)
			}
		}
		if n := h.Faults.Count(http.MethodGet, "/v1/devboxes"); n < 4 {
			t.Errorf("List asked for %d pages of one, want at least 4", n)
		}
	})

	var id string
	for k := range ids {
		id = k
		break
	}
	t.Run("suspend and resume keep the files", func(t *testing.T) {
		run(t, p, id, "echo kept > /workspace/marker")
		if err := p.Suspend(t.Context(), id); err != nil {
			t.Fatalf("Suspend: %v", err)
		}
		if in, err := p.Get(t.Context(), id); err != nil || in.State != providers.StateStopped {
			t.Errorf("Get after Suspend: %+v, %v; want stopped", in, err)
		}
		if err := p.Resume(t.Context(), id); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if got := run(t, p, id, "cat /workspace/marker"); got != "kept\n" {
			t.Errorf("after resume: %q", got)
		}
	})

	t.Run("a shut down devbox is gone", func(t *testing.T) {
		if err := p.Delete(t.Context(), id); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := p.Get(t.Context(), id); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Get after Delete: %v, want ErrNotFound", err)
		}
		if err := p.Delete(t.Context(), id); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Delete twice: %v, want ErrNotFound", err)
		}
	})

	t.Run("the TTL shuts the devbox down", func(t *testing.T) {
		in, err := p.Create(t.Context(), providers.Spec{TTL: 10 * time.Second, Labels: label})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if in.ExpiresAt.IsZero() {
			t.Errorf("Create with a TTL: no ExpiresAt in %+v", in)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := p.Get(t.Context(), in.ID)
			if errors.Is(err, providers.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the devbox still lives a minute after its 10s TTL: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("an unknown devbox is not found", func(t *testing.T) {
		_, err := p.Get(t.Context(), "dbx_nosuch")
		if !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "not found") {
			t.Errorf("Get(dbx_nosuch): %v, want ErrNotFound with the server's message", err)
		}
	})
}
