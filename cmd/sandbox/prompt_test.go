package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

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
