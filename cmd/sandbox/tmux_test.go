package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// screenDeadline bounds every wait for the screen to show something.
const screenDeadline = 30 * time.Second

// tmuxSession runs a command in a detached tmux session (a real terminal)
// so the CLI sees a TTY: the line prompt and the TUI are driven with
// send-keys and read with capture-pane. Each test has its own tmux server.
type tmuxSession struct {
	t    *testing.T
	name string
	sock string
	// keys is a control-mode client of the session (see keyboard):
	// keys typed through it reach the pane without a process started
	// per key, whose start a loaded machine can stretch past the
	// TUI's type-ahead guard.
	keys io.Writer
}

// keyboard returns the session's control-mode client, started on first
// use and ended with the test.
func (s *tmuxSession) keyboard() io.Writer {
	s.t.Helper()
	if s.keys != nil {
		return s.keys
	}
	cmd := exec.Command("tmux", "-S", s.sock, "-C", "attach-session", "-t", s.name)
	in, err := cmd.StdinPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("tmux control client: %v", err)
	}
	s.t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	s.keys = in
	return in
}

// tmuxQuote quotes one key's text for tmux's command language.
func tmuxQuote(text string) string {
	if strings.Contains(text, "'") {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(text) + `"`
	}
	return "'" + text + "'"
}

// startTmux runs command in dir in a 160×50 terminal.
func startTmux(t *testing.T, dir string, env []string, command string) *tmuxSession {
	return startTmuxSized(t, dir, env, command, 160, 50)
}

// startTmuxSized runs command in a terminal of the given size. When the
// command ends, the pane shows EXIT=<status> and stays for 30 s.
func startTmuxSized(t *testing.T, dir string, env []string, command string, width, height int) *tmuxSession {
	t.Helper()
	s := &tmuxSession{t: t, name: "sbtest", sock: filepath.Join(dir, "tmux.sock")}
	args := []string{"-S", s.sock, "new-session", "-d", "-s", s.name, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height)}
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

// screen is what the terminal shows now.
func (s *tmuxSession) screen() string {
	out, _ := exec.Command("tmux", "-S", s.sock, "capture-pane", "-p", "-t", s.name).Output()
	return string(out)
}

// waitFor polls the screen until it shows text, or fails at the deadline.
func (s *tmuxSession) waitFor(text string) string {
	s.t.Helper()
	return s.waitUntil("the text "+strconv.Quote(text), func(scr string) bool { return strings.Contains(scr, text) })
}

// waitForRe polls the screen until it matches re.
func (s *tmuxSession) waitForRe(re string) string {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	return s.waitUntil("a match of "+re, rx.MatchString)
}

// waitGone polls the screen until it no longer shows text.
func (s *tmuxSession) waitGone(text string) string {
	s.t.Helper()
	return s.waitUntil("the text "+strconv.Quote(text)+" to go", func(scr string) bool { return !strings.Contains(scr, text) })
}

func (s *tmuxSession) waitUntil(what string, ok func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(screenDeadline)
	for {
		scr := s.screen()
		if ok(scr) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %s; it shows:\n%s", what, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// send sends tmux key names (Enter, C-c, …) or text.
func (s *tmuxSession) send(keys ...string) {
	s.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", s.sock, "send-keys", "-t", s.name}, keys...)...).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys: %v\n%s", err, out)
	}
}

// keyDelay is how long a person takes between two keys.
const keyDelay = 120 * time.Millisecond

// typeSlowly types text one key at a time, keyDelay apart, as a person
// does: the TUI's type-ahead guards must hold against this pace, not only
// against one burst.
func (s *tmuxSession) typeSlowly(text string) {
	s.t.Helper()
	for _, r := range text {
		// keyDelay from one key to the next, however long tmux took
		// to send the first: a loaded machine must not turn a
		// person's pace into pauses the type-ahead guard lets pass.
		start := time.Now()
		if _, err := fmt.Fprintf(s.keyboard(), "send-keys -t %s -l %s\n", s.name, tmuxQuote(string(r))); err != nil {
			s.t.Fatalf("send a key: %v", err)
		}
		time.Sleep(keyDelay - time.Since(start))
	}
}

// typeLike types text as a person does (typeSlowly), then Enter.
func (s *tmuxSession) typeLike(text string) {
	s.t.Helper()
	s.typeSlowly(text)
	s.send("Enter")
}

// typeLine sends text literally (no key-name lookup), then Enter.
func (s *tmuxSession) typeLine(text string) {
	s.t.Helper()
	if out, err := exec.Command("tmux", "-S", s.sock, "send-keys", "-t", s.name, "-l", text).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys -l: %v\n%s", err, out)
	}
	s.send("Enter")
}
