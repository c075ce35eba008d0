package providertest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// terminalWait bounds how long a terminal check waits for output.
const terminalWait = 30 * time.Second

// Terminal checks providers.Terminal on the sandbox id of p: a shell on a
// terminal of the asked size and TERM sees a terminal on its streams,
// echoes typed input, sees a resize, and its exit status comes back from
// Wait after its output ends; Close kills a command that still runs.
func Terminal(t *testing.T, p providers.Provider, id string) {
	tp, ok := p.(providers.Terminal)
	if !ok {
		t.Fatalf("provider %s does not implement providers.Terminal", p.Name())
	}
	t.Run("shell", func(t *testing.T) { terminalShell(t, tp, id) })
	t.Run("close-kills", func(t *testing.T) { terminalClose(t, tp, id) })
}

// termOutput collects a session's output from one reader at a time.
type termOutput struct {
	buf  Buffer
	done chan struct{}
}

// follow reads s into o until EOF, then closes o.done.
func follow(s io.Reader) *termOutput {
	o := &termOutput{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		_, _ = io.Copy(&o.buf, s)
	}()
	return o
}

// waitFor waits until the output holds want.
func (o *termOutput) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(terminalWait)
	for !strings.Contains(o.buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("terminal output has no %q after %v; it is:\n%s", want, terminalWait, o.buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminalShell(t *testing.T, tp providers.Terminal, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := tp.ExecTerminal(ctx, id, providers.ExecRequest{Argv: []string{"/bin/sh"}}, providers.TerminalRequest{Cols: 100, Rows: 30, Term: "xterm-providertest"})
	if err != nil {
		t.Fatalf("ExecTerminal(/bin/sh): %v", err)
	}
	defer s.Close()
	out := follow(s)
	type step struct {
		name, input, want string
		resize            [2]uint16
	}
	// Each marker is printed by the shell, not echoed: the echo of the
	// input has the quotes, the output has not.
	steps := []step{
		{name: "is a terminal", input: "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo 'tty''-yes'\n", want: "tty-yes"},
		{name: "TERM", input: "echo \"term=$TERM\"'.'\n", want: "term=xterm-providertest."},
		{name: "size", input: "echo \"size=$(stty size)\"'.'\n", want: "size=30 100."},
		{name: "resize", resize: [2]uint16{120, 40}, input: "echo \"size=$(stty size)\"'.'\n", want: "size=40 120."},
	}
	for _, st := range steps {
		if st.resize[0] != 0 {
			if err := s.Resize(st.resize[0], st.resize[1]); err != nil {
				t.Fatalf("%s: Resize: %v", st.name, err)
			}
		}
		if _, err := io.WriteString(s, st.input); err != nil {
			t.Fatalf("%s: typing %q: %v", st.name, st.input, err)
		}
		out.waitFor(t, st.want)
	}

	if _, err := io.WriteString(s, "exit 7\n"); err != nil {
		t.Fatalf("typing exit: %v", err)
	}
	select {
	case <-out.done:
	case <-time.After(terminalWait):
		t.Fatalf("the terminal's output did not end after exit; it is:\n%s", out.buf.String())
	}
	res, err := s.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit status %d, want 7", res.ExitCode)
	}
}

func terminalClose(t *testing.T, tp providers.Terminal, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := tp.ExecTerminal(ctx, id, providers.ExecRequest{Shell: "echo 'sleep''ing'; exec sleep 600"}, providers.TerminalRequest{})
	if err != nil {
		t.Fatalf("ExecTerminal(sleep): %v", err)
	}
	out := follow(s)
	out.waitFor(t, "sleeping")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(terminalWait):
		t.Fatalf("Close did not end a command that sleeps")
	}
	res, err := s.Wait()
	if err == nil && res.ExitCode == 0 {
		t.Errorf("a killed command reports success: %+v", res)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, providers.ErrTimeout) && !errors.Is(err, providers.ErrUnavailable) {
		t.Logf("Wait after Close: %v", err)
	}
	select {
	case <-out.done:
	case <-time.After(terminalWait):
		t.Fatalf("reading a closed terminal did not end")
	}
}
