package main

import (
	"testing"
	"time"
)

// TestTUIShellSession types commands in shell mode as a person would:
// the directory and the exported variables of one command carry over to
// the next, because the TUI runs them in one shell session.
func TestTUIShellSession(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	s, _ := tuiSession(t, c, "")
	s.send("C-t")
	time.Sleep(keyDelay)

	s.typeLike("cd /tmp")
	s.waitForRe(`› \$ cd /tmp\s+exit 0`)
	s.typeLike("pwd")
	s.waitForRe(`(?m)^/tmp\s*$`)

	s.typeLike("export FOO=from-the-session")
	s.waitForRe(`› \$ export FOO=from-the-session\s+exit 0`)
	s.typeLike(`echo "FOO is $FOO"`)
	s.waitForRe(`(?m)^FOO is from-the-session\s*$`)
	quitDeleting(t, s, c)
}
