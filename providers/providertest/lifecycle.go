package providertest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// lifecycle checks Create, Get, List, Delete and ErrNotFound for a missing
// sandbox.
func (s *suite) lifecycle(t *testing.T) {
	caps := s.p.Capabilities()
	before := time.Now()
	info := s.create(t, "lifecycle")
	id := info.ID
	spec := s.spec("lifecycle")

	t.Run("create", func(t *testing.T) {
		if info.Provider != s.p.Name() {
			t.Errorf("Create: Info.Provider = %q, want %q", info.Provider, s.p.Name())
		}
		if info.State != providers.StateRunning {
			t.Errorf("Create: Info.State = %q, want %q (Create returns once the sandbox can run commands)", info.State, providers.StateRunning)
		}
		if info.CreatedAt.IsZero() {
			t.Errorf("Create: Info.CreatedAt is zero")
		} else if d := info.CreatedAt.Sub(before); d < -24*time.Hour || d > 24*time.Hour {
			t.Logf("Create: Info.CreatedAt = %v is far from the local clock (%v); a fake clock or a skewed server", info.CreatedAt, before)
		}
		if caps.Labels {
			checkLabels(t, "Create", info.Labels, spec.Labels)
		}
	})

	t.Run("get", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		got, err := s.p.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		if got.ID != id {
			t.Errorf("Get(%s).ID = %q", id, got.ID)
		}
		if got.Provider != s.p.Name() {
			t.Errorf("Get(%s).Provider = %q, want %q", id, got.Provider, s.p.Name())
		}
		if got.State != providers.StateRunning {
			t.Errorf("Get(%s).State = %q, want %q", id, got.State, providers.StateRunning)
		}
		if !got.CreatedAt.Equal(info.CreatedAt) && got.CreatedAt.Sub(info.CreatedAt).Abs() > time.Second {
			t.Errorf("Get(%s).CreatedAt = %v, Create said %v", id, got.CreatedAt, info.CreatedAt)
		}
		if caps.Labels {
			checkLabels(t, "Get", got.Labels, spec.Labels)
		}
	})

	t.Run("list", func(t *testing.T) {
		ctx, cancel := callCtx(t)
		defer cancel()
		if !caps.Labels {
			t.Logf("provider does not declare Labels: checking only that an unfiltered List contains %s", id)
			all, err := s.p.List(ctx, providers.Filter{})
			if err != nil {
				t.Fatalf("List(no filter): %v", err)
			}
			if !containsID(all, id) {
				t.Errorf("List(no filter) = %v, does not contain %s", ids(all), id)
			}
			return
		}
		match := providers.Filter{Labels: map[string]string{LabelRun: s.run, LabelGroup: "lifecycle"}}
		got, err := s.p.List(ctx, match)
		if err != nil {
			t.Fatalf("List(%v): %v", match.Labels, err)
		}
		if len(got) != 1 || got[0].ID != id {
			t.Errorf("List(%v) = %v, want exactly [%s]", match.Labels, ids(got), id)
		}
		for _, in := range got {
			if in.Provider != s.p.Name() {
				t.Errorf("List: Info.Provider = %q, want %q", in.Provider, s.p.Name())
			}
		}
		miss := providers.Filter{Labels: map[string]string{LabelRun: s.run + "-other"}}
		got, err = s.p.List(ctx, miss)
		if err != nil {
			t.Fatalf("List(%v): %v", miss.Labels, err)
		}
		if containsID(got, id) {
			t.Errorf("List(%v) = %v: contains %s, whose labels do not match", miss.Labels, ids(got), id)
		}
		partial := providers.Filter{Labels: map[string]string{LabelRun: s.run, LabelGroup: "other-group"}}
		got, err = s.p.List(ctx, partial)
		if err != nil {
			t.Fatalf("List(%v): %v", partial.Labels, err)
		}
		if containsID(got, id) {
			t.Errorf("List(%v) = %v: contains %s, which matches only one of two labels", partial.Labels, ids(got), id)
		}
	})

	t.Run("missing-id", func(t *testing.T) { s.missingID(t) })

	t.Run("delete", func(t *testing.T) {
		// A sandbox of its own, so the checks above keep theirs.
		del := s.create(t, "lifecycle-delete")
		ctx, cancel := callCtx(t)
		defer cancel()
		if err := s.p.Delete(ctx, del.ID); err != nil {
			t.Fatalf("Delete(%s): %v", del.ID, err)
		}
		if _, err := s.p.Get(ctx, del.ID); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Get(%s) after Delete: err = %v, want one matching ErrNotFound", del.ID, err)
		}
		if err := s.p.Delete(ctx, del.ID); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Delete(%s) a second time: err = %v, want one matching ErrNotFound", del.ID, err)
		}
		if caps.Labels {
			match := providers.Filter{Labels: map[string]string{LabelRun: s.run, LabelGroup: "lifecycle-delete"}}
			got, err := s.p.List(ctx, match)
			if err != nil {
				t.Fatalf("List(%v) after Delete: %v", match.Labels, err)
			}
			if containsID(got, del.ID) {
				t.Errorf("List(%v) after Delete still contains %s", match.Labels, del.ID)
			}
		}
	})
}

// missingID checks that every id-keyed method reports ErrNotFound for a
// sandbox that does not exist.
func (s *suite) missingID(t *testing.T) {
	const missing = "providertest-no-such-sandbox"
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	_ = tw.WriteHeader(&tar.Header{Name: "x.txt", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()

	ops := []struct {
		name string
		call func(t *testing.T) error
	}{
		{"Get", func(t *testing.T) error { _, err := s.p.Get(t.Context(), missing); return err }},
		{"Delete", func(t *testing.T) error { return s.p.Delete(t.Context(), missing) }},
		{"Exec", func(t *testing.T) error {
			_, err := s.p.Exec(t.Context(), missing, providers.ExecRequest{Argv: []string{"true"}})
			return err
		}},
		{"ReadFile", func(t *testing.T) error {
			rc, err := s.p.ReadFile(t.Context(), missing, "/workspace/x.txt")
			if err == nil {
				rc.Close()
			}
			return err
		}},
		{"WriteFile", func(t *testing.T) error {
			return s.p.WriteFile(t.Context(), missing, "/workspace/x.txt", strings.NewReader("x"), 0o644)
		}},
		{"Stat", func(t *testing.T) error { _, err := s.p.Stat(t.Context(), missing, "/workspace"); return err }},
		{"ListDir", func(t *testing.T) error { _, err := s.p.ListDir(t.Context(), missing, "/workspace", 1); return err }},
		{"Mkdir", func(t *testing.T) error { return s.p.Mkdir(t.Context(), missing, "/workspace/d") }},
		{"Remove", func(t *testing.T) error { return s.p.Remove(t.Context(), missing, "/workspace/x.txt", false) }},
		{"Rename", func(t *testing.T) error {
			return s.p.Rename(t.Context(), missing, "/workspace/x.txt", "/workspace/y.txt")
		}},
		{"Upload", func(t *testing.T) error {
			return s.p.Upload(t.Context(), missing, "/workspace/up", bytes.NewReader(tarball.Bytes()))
		}},
		{"Download", func(t *testing.T) error { return s.p.Download(t.Context(), missing, "/workspace", io.Discard) }},
	}
	if g, ok := s.p.(providers.Grepper); ok {
		ops = append(ops, struct {
			name string
			call func(t *testing.T) error
		}{"Grep", func(t *testing.T) error {
			_, err := g.Grep(t.Context(), missing, providers.GrepRequest{Pattern: "x", Path: "/workspace"})
			return err
		}})
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			if err := op.call(t); !errors.Is(err, providers.ErrNotFound) {
				t.Errorf("%s on missing sandbox %q: err = %v, want one matching ErrNotFound", op.name, missing, err)
			}
		})
	}
}

// checkLabels reports labels that are missing or different in got.
func checkLabels(t *testing.T, op string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: Info.Labels = %v, want it to contain %s=%s", op, got, k, v)
		}
	}
}

func containsID(infos []providers.Info, id string) bool {
	for _, in := range infos {
		if in.ID == id {
			return true
		}
	}
	return false
}

func ids(infos []providers.Info) []string {
	out := make([]string, 0, len(infos))
	for _, in := range infos {
		out = append(out, in.ID)
	}
	return out
}
