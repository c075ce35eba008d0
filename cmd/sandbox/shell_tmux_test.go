package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShellOnTerminal drives `sandbox shell` in a real terminal (the
// user's own command, which the default policy allows): a command typed a
// key at a time, a resize of the host's terminal that the sandbox's
// terminal follows, and the shell's exit status passed through.
func TestShellOnTerminal(t *testing.T) {
	bin := buildBinary(t)
	c := newRunner(t, bin)
	s := startTmuxSized(t, c.dir, c.command().Env, bin+" shell", 120, 40)

	// The marker is computed by the shell: the typed text has no "42".
	s.typeLike(`echo "sum=$((6*7))"`)
	s.waitFor("sum=42")
	s.typeLike(`stty size | tr ' ' x`)
	s.waitFor(paneSize(t, s))

	if out, err := exec.Command("tmux", "-S", s.sock, "resize-window", "-t", s.name, "-x", "100", "-y", "30").CombinedOutput(); err != nil {
		t.Fatalf("tmux resize-window: %v\n%s", err, out)
	}
	resized := paneSize(t, s)
	if !strings.HasSuffix(resized, "x100") {
		t.Fatalf("tmux did not resize the pane: %s", resized)
	}
	s.typeLike(`stty size | tr ' ' x`)
	s.waitFor(resized)

	s.typeLike("exit 3")
	scr := s.waitFor("EXIT=")
	if !strings.Contains(scr, "EXIT=3") {
		t.Fatalf("want the shell's exit status 3 passed through; screen:\n%s", scr)
	}
	c.assertNoLeak()
}

// TestShellIsGatedAsExec checks that the session is decided as an exec of
// the shell: a deny rule on it refuses the session (exit 3), and a rule
// that asks prompts once, for the whole session.
func TestShellIsGatedAsExec(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name, flags string
	}{
		{"deny", "--deny 'exec:*'"},
		{"ask", "--policy policy.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRunner(t, bin)
			if err := os.WriteFile(filepath.Join(c.dir, "policy.yaml"), []byte("ask: [\"exec:*\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startTmuxSized(t, c.dir, c.command().Env, bin+" "+tc.flags+" shell", 120, 40)
			if tc.name == "deny" {
				scr := s.waitFor("EXIT=")
				if !strings.Contains(scr, "EXIT=3") || !strings.Contains(scr, "denied") {
					t.Fatalf("want the shell denied (exit 3) naming it; screen:\n%s", scr)
				}
				c.assertNoLeak()
				return
			}
			scr := s.waitFor("allow?")
			if !strings.Contains(scr, "exec bash -l") {
				t.Fatalf("the prompt does not show the shell:\n%s", scr)
			}
			s.send("y", "Enter")
			s.typeLike(`echo "a=$((2+3))"; echo "b=$((3+4))"`)
			s.waitFor("b=7")
			s.typeLike("exit")
			scr = s.waitFor("EXIT=")
			if n := strings.Count(scr, "allow?"); n != 1 || !strings.Contains(scr, "EXIT=0") {
				t.Fatalf("want one prompt for the session and exit 0, got %d prompts; screen:\n%s", n, scr)
			}
			c.assertNoLeak()
		})
	}
}

// paneSize is the size of the session's pane as stty prints it, rows x
// columns (the status line takes a row of the window).
func paneSize(t *testing.T, s *tmuxSession) string {
	t.Helper()
	out, err := exec.Command("tmux", "-S", s.sock, "display-message", "-p", "-t", s.name, "#{pane_height}x#{pane_width}").Output()
	if err != nil {
		t.Fatalf("tmux display-message: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestShellNeedsTerminal checks the refusal without a terminal: a usage
// error (exit 2) that points at exec.
func TestShellNeedsTerminal(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	cmd := c.command("--yes", "shell")
	out, err := cmd.CombinedOutput()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 2 || !strings.Contains(string(out), "use exec") {
		t.Fatalf("want exit 2 pointing at exec, got %d:\n%s", code, out)
	}
	c.assertNoLeak()
}
