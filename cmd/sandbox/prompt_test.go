package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tmuxSession runs a command in a detached tmux session (a real terminal)
// so the CLI sees a TTY and uses the line prompt.
type tmuxSession struct {
	t    *testing.T
	name string
	sock string
}

func startTmux(t *testing.T, dir string, env []string, command string) *tmuxSession {
	t.Helper()
	s := &tmuxSession{t: t, name: "sbtest", sock: filepath.Join(dir, "tmux.sock")}
	args := []string{"-S", s.sock, "new-session", "-d", "-s", s.name, "-x", "160", "-y", "50"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, "-c", dir, command+"; echo EXIT=$?; sleep 30")
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *tmuxSession) screen() string {
	out, _ := exec.Command("tmux", "-S", s.sock, "capture-pane", "-p", "-t", s.name).Output()
	return string(out)
}

func (s *tmuxSession) waitFor(text string) string {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		scr := s.screen()
		if strings.Contains(scr, text) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q; it shows:\n%s", text, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *tmuxSession) send(keys ...string) {
	s.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", s.sock, "send-keys", "-t", s.name}, keys...)...).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys: %v\n%s", err, out)
	}
}

// TestLinePromptOnTerminal drives the approval prompt of a scripted run in a
// real terminal: one step allowed, one denied with a reason.
func TestLinePromptOnTerminal(t *testing.T) {
	bin := buildBinary(t)
	c := newRunner(t, bin)
	plan := filepath.Join(c.dir, "plan.yaml")
	os.WriteFile(plan, []byte("steps:\n  - exec: \"echo approved-step\"\n  - exec: \"echo second-step\"\n"), 0o644)
	s := startTmux(t, c.dir, c.command().Env, bin+" run "+plan)
	scr := s.waitFor("allow?")
	if !strings.Contains(scr, "echo approved-step") {
		t.Fatalf("prompt does not show the command:\n%s", scr)
	}
	s.send("y", "Enter")
	// The command's output is a line of its own; the prompt only quotes it
	// after "echo".
	scr = s.waitFor("echo second-step")
	if !regexp.MustCompile(`(?m)^approved-step\s*$`).MatchString(scr) {
		t.Fatalf("the allowed step's output is missing:\n%s", scr)
	}
	s.send("r", "Enter")
	s.waitFor("reason")
	s.send("not today", "Enter")
	scr = s.waitFor("EXIT=")
	if !strings.Contains(scr, "EXIT=3") || !strings.Contains(scr, "not today") {
		t.Fatalf("want exit 3 with the reason shown; screen:\n%s", scr)
	}
	c.assertNoLeak()
}
