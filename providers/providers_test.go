package providers

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, base, want string
		wantErr        bool
	}{
		{in: "a.txt", want: "/workspace/a.txt"},
		{in: "./a/./b", want: "/workspace/a/b"},
		{in: "/etc/passwd", want: "/etc/passwd"},
		{in: "x", base: "/tmp", want: "/tmp/x"},
		{in: "/workspace//a/", want: "/workspace/a"},
		{in: "", wantErr: true},
		{in: "../etc", wantErr: true},
		{in: "/workspace/../etc", wantErr: true},
		{in: "a/..", wantErr: true},
		{in: "a\x00b", wantErr: true},
		{in: "a..b", want: "/workspace/a..b"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			t.Parallel()
			got, err := CleanPath(tt.in, tt.base)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("CleanPath(%q) = %q, %v; want ErrInvalid", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("CleanPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a", "../x", "/a/b/../c", "a\x00", "//", "./."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := CleanPath(p, "")
		if err != nil {
			return
		}
		if got == "" || got[0] != '/' {
			t.Fatalf("CleanPath(%q) = %q: not absolute", p, got)
		}
		for i := 0; i+1 < len(got); i++ {
			if got[i] == 0 {
				t.Fatalf("NUL survived in %q", got)
			}
		}
		if again, err := CleanPath(got, ""); err != nil || again != got {
			t.Fatalf("CleanPath not idempotent: %q -> %q (%v)", got, again, err)
		}
	})
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", Errorf(ErrQuota, "e2b", "create", "limit of %d reached", 20))
	if !errors.Is(err, ErrQuota) || errors.Is(err, ErrAuth) {
		t.Fatalf("kind not preserved: %v", err)
	}
	if got := err.Error(); got != "wrapped: e2b: create: limit of 20 reached" {
		t.Fatalf("message = %q", got)
	}
	cred := &CredentialError{Provider: "e2b", Var: "E2B_API_KEY"}
	if !errors.Is(cred, ErrAuth) {
		t.Fatal("credential error must match ErrAuth")
	}
}

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	r := NewRegistry(Registration{Name: "b"}, Registration{Name: "a"}, Registration{Name: "h", Hidden: true})
	if _, err := r.Lookup("h"); err != nil {
		t.Fatalf("hidden providers must still resolve: %v", err)
	}
	_, err := r.Lookup("nope")
	if !errors.Is(err, ErrInvalid) || err.Error() != `unknown provider "nope" (known: a, b)` {
		t.Fatalf("Lookup(nope) = %v", err)
	}
}

// TestRegistrationConfigured checks both ways a registration says whether
// its provider is configured: the required variables, or its own Ready
// check, which wins when set.
func TestRegistrationConfigured(t *testing.T) {
	env := func(vars map[string]string) Config {
		return Config{Getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	}
	keys := []EnvKey{{Name: "X_KEY", Required: true}, {Name: "X_URL"}}
	fromFile := func(cfg Config) (bool, []string) {
		if cfg.Lookup("X_CONFIG") != "" {
			return true, nil
		}
		return false, []string{"X_KEY or a configuration file"}
	}
	tests := []struct {
		name        string
		reg         Registration
		vars        map[string]string
		wantOK      bool
		wantMissing []string
	}{
		{"required set", Registration{Env: keys}, map[string]string{"X_KEY": "k"}, true, nil},
		{"required missing", Registration{Env: keys}, map[string]string{"X_URL": "u"}, false, []string{"X_KEY"}},
		{"ready says yes without the variable", Registration{Env: keys, Ready: fromFile}, map[string]string{"X_CONFIG": "c"}, true, nil},
		{"ready says no despite the variable", Registration{Env: keys, Ready: fromFile}, map[string]string{"X_KEY": "k"}, false, []string{"X_KEY or a configuration file"}},
	}
	for _, tc := range tests {
		ok, missing := tc.reg.Configured(env(tc.vars))
		if ok != tc.wantOK || !slices.Equal(missing, tc.wantMissing) {
			t.Errorf("%s: %v, %q; want %v, %q", tc.name, ok, missing, tc.wantOK, tc.wantMissing)
		}
	}
}
