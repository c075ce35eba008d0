//go:build linux

package e2b_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/user"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestExecAsUser checks that ExecRequest.User reaches envd (the emulator
// runs the command as that user of the local sandbox) and that a user the
// sandbox does not have is ErrInvalid.
func TestExecAsUser(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	p := h.client(t, nil)
	info, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Delete(context.Background(), info.ID)
	tests := []struct {
		user, want string
		invalid    bool
	}{
		{"", me.Username + "\n", false},
		{me.Username, me.Username + "\n", false},
		{"no-such-user", "", true},
	}
	if os.Geteuid() == 0 {
		// Root's sandboxes map a range of ids: other users exist too.
		tests = append(tests, struct {
			user, want string
			invalid    bool
		}{"nobody", "nobody\n", false})
	}
	for _, tt := range tests {
		var out bytes.Buffer
		res, err := p.Exec(t.Context(), info.ID, providers.ExecRequest{Argv: []string{"id", "-un"}, Cwd: "/", User: tt.user, Stdout: &out})
		switch {
		case tt.invalid && !errors.Is(err, providers.ErrInvalid):
			t.Errorf("Exec as %q: %v, want ErrInvalid", tt.user, err)
		case !tt.invalid && (err != nil || res.ExitCode != 0 || out.String() != tt.want):
			t.Errorf("Exec as %q: exit %d, err %v, output %q; want %q", tt.user, res.ExitCode, err, out.String(), tt.want)
		}
	}
}
