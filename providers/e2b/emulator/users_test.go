//go:build linux

package emulator

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/fake"
)

func TestIdentityResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		home, path, want string
		invalid          bool
	}{
		{"/home/user", "", "/home/user", false},
		{"/home/user", "~", "/home/user", false},
		{"/home/user", "~/", "/home/user", false},
		{"/home/user", "~/a/b.txt", "/home/user/a/b.txt", false},
		{"/home/user", "a/./b.txt", "/home/user/a/b.txt", false},
		{"/home/user", "/tmp/x", "/tmp/x", false},
		{"/root", "x", "/root/x", false},
		{"", "x", providers.DefaultWorkdir + "/x", false},
		{"", "~", providers.DefaultWorkdir, false},
		{"/home/user", "~other/x", "", true},
		{"/home/user", "../etc/passwd", "", true},
	}
	for _, tt := range tests {
		got, err := identity{home: tt.home}.resolve(tt.path)
		switch {
		case tt.invalid && !errors.Is(err, providers.ErrInvalid):
			t.Errorf("resolve(%q) with home %q: %q, %v; want ErrInvalid", tt.path, tt.home, got, err)
		case !tt.invalid && (err != nil || got != tt.want):
			t.Errorf("resolve(%q) with home %q: %q, %v; want %q", tt.path, tt.home, got, err, tt.want)
		}
	}
}

func TestRequestUser(t *testing.T) {
	t.Parallel()
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, url, auth string
		want            string
		code            string
	}{
		{"none", "/process.Process/Start", "", "", ""},
		{"basic", "/process.Process/Start", basic("root:"), "root", ""},
		{"basic with a password", "/process.Process/Start", basic("user:secret"), "user", ""},
		{"lower-case scheme", "/process.Process/Start", "basic " + base64.StdEncoding.EncodeToString([]byte("user:")), "user", ""},
		{"bearer", "/process.Process/Start", "Bearer abc", "", wire.CodeUnauthenticated},
		{"bad base64", "/process.Process/Start", "Basic !!!", "", wire.CodeUnauthenticated},
		{"files query", "/files?path=x&username=root", basic("user:"), "root", ""},
		{"files without query", "/files?path=x", basic("user:"), "user", ""},
		{"query elsewhere is ignored", "/process.Process/Start?username=root", "", "", ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, tt.url, nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		got, rerr := requestUser(r)
		switch {
		case tt.code != "" && (rerr == nil || rerr.Code != tt.code):
			t.Errorf("%s: %q, %v; want code %s", tt.name, got, rerr, tt.code)
		case tt.code == "" && (rerr != nil || got != tt.want):
			t.Errorf("%s: %q, %v; want %q", tt.name, got, rerr, tt.want)
		}
	}
}

// userBackend records the specs of its creates and refuses a Spec.User
// when refuse is set, as the local provider does where it maps no ids
// but its own.
type userBackend struct {
	providers.Provider
	refuse bool

	mu    sync.Mutex
	specs []providers.Spec
}

func (b *userBackend) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	b.mu.Lock()
	b.specs = append(b.specs, spec)
	b.mu.Unlock()
	if b.refuse && spec.User != "" {
		return providers.Info{}, providers.Errorf(providers.ErrInvalid, "test", "create", "no user %s here", spec.User)
	}
	return b.Provider.Create(ctx, spec)
}

// TestCreateDefaultUser checks the default user a create gives the backend
// and the user requests without one then run as.
func TestCreateDefaultUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string
		refuse bool
		// specUsers are the Spec.User of each backend create.
		specUsers []string
		user      string
	}{
		{"E2B's user", "", false, []string{"user"}, "user"},
		{"root asked", "root", false, []string{""}, "root"},
		{"another user asked", "dev", false, []string{"dev"}, "dev"},
		{"backend without users", "", true, []string{"user", ""}, ""},
		{"root on a backend without users", "root", true, []string{""}, "root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &userBackend{Provider: fake.New(), refuse: tt.refuse}
			s := New(b, Options{APIKey: "k"})
			t.Cleanup(func() { _ = s.Close() })
			r := httptest.NewRequest(http.MethodPost, "/sandboxes", strings.NewReader(`{"templateID":"base"}`))
			r.Header.Set(wire.HeaderAPIKey, "k")
			if tt.header != "" {
				r.Header.Set(wire.HeaderDefaultUser, tt.header)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				t.Fatalf("create: %d %s", w.Code, w.Body)
			}
			var got []string
			for _, sp := range b.specs {
				got = append(got, sp.User)
			}
			if strings.Join(got, ",") != strings.Join(tt.specUsers, ",") {
				t.Errorf("Spec.User of the creates = %q, want %q", got, tt.specUsers)
			}
			last := b.specs[len(b.specs)-1]
			if want := tt.user; last.Labels[labelUser] != want {
				t.Errorf("label %s = %q, want %q", labelUser, last.Labels[labelUser], want)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, sb := range s.sandboxes {
				if sb.user != tt.user {
					t.Errorf("default user %q, want %q", sb.user, tt.user)
				}
			}
		})
	}
}
