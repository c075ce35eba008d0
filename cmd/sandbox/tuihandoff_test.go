package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTUIHandOver: the program sandbox has no TUI built in (see
// TestNoTUIInSandbox); bare `sandbox` on a terminal replaces itself with
// sandbox-cloud beside it, which opens the TUI on the same terminal, and
// without sandbox-cloud it exits 125 and says what to install.
func TestTUIHandOver(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	s, _ := tuiSession(t, c, "")
	// The TUI's process is the one the shell of the pane started (the
	// hand-over keeps its pid), now running sandbox-cloud.
	out, err := exec.Command("tmux", "-S", s.sock, "display-message", "-p", "-t", s.name, "#{pane_pid}").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid := childNamed(strings.TrimSpace(string(out)), "sandbox-cloud")
	if pid == 0 {
		t.Fatal("no process sandbox-cloud under the pane's shell")
	}
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || exe != filepath.Join(filepath.Dir(c.bin), "sandbox-cloud") {
		t.Errorf("the TUI runs %q (%v), want sandbox-cloud beside sandbox", exe, err)
	}
	quitDeleting(t, s, c)

	// The program alone: nothing to hand over to.
	alone := aloneCopy(t, c.bin)
	// Nor on PATH: the system's directories only.
	env := []string{"PATH=/usr/bin:/bin"}
	for _, e := range c.command().Env {
		if !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	s = startTmuxSized(t, t.TempDir(), env, alone, 200, 20)
	scr := strings.ReplaceAll(s.waitFor("EXIT="), "\n", "")
	if !strings.Contains(scr, "EXIT=125") || !strings.Contains(scr, "install sandbox-cloud beside this program or on PATH") {
		t.Errorf("bare sandbox without sandbox-cloud:\n%s\nwant exit 125 and what to install", scr)
	}
	if ids := c.sandboxes(); len(ids) != 0 {
		t.Errorf("sandboxes %q left, want none", ids)
	}
}
