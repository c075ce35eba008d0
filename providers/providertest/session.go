package providertest

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// sessionVar is the variable the session checks export.
const sessionVar = "PROVIDERTEST_SESSION"

// sessionChecks checks ExecRequest.Session as the engine delivers it
// (providers.ForProvider): a session keeps its working directory and
// exported variables from one command to the next, two sessions do not
// share them, and output, exit status and stdin stay the command's own.
func (s *suite) sessionChecks(t *testing.T) {
	id := s.create(t, "session").ID
	a, b := "providertest-a-"+s.run, "providertest-b-"+s.run

	// run execs shell in session name and fails on an error.
	run := func(t *testing.T, name, shell string, stdin string) execOut {
		t.Helper()
		req := providers.ExecRequest{Session: name, Shell: shell}
		if stdin != "" {
			req.Stdin = strings.NewReader(stdin)
		}
		wrapped, err := providers.ForProvider(s.p, req)
		if err != nil {
			t.Fatalf("ForProvider(session %s, %s): %v", name, describe(req), err)
		}
		out := s.exec(t, id, wrapped)
		if out.err != nil {
			t.Fatalf("Exec(session %s, %s): %v (stderr %q)", name, describe(req), out.err, out.stderr)
		}
		return out
	}
	// state returns the directory and the value of sessionVar ("" when
	// unset) a session's next command starts with.
	state := func(t *testing.T, name string) (string, string) {
		t.Helper()
		out := run(t, name, "pwd; env", "")
		lines := strings.Split(out.stdout, "\n")
		if out.res.ExitCode != 0 || len(lines) < 2 {
			t.Fatalf("Exec(session %s, `pwd; env`): status %d, stdout %q, stderr %q", name, out.res.ExitCode, out.stdout, out.stderr)
		}
		val := ""
		if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, sessionVar+"=") }); i >= 0 {
			val = strings.TrimPrefix(lines[i], sessionVar+"=")
		}
		return lines[0], val
	}

	plain := s.exec(t, id, providers.ExecRequest{Argv: []string{"pwd"}})
	if plain.err != nil || plain.res.ExitCode != 0 {
		t.Fatalf("Exec(argv `pwd`): status %d, err %v", plain.res.ExitCode, plain.err)
	}
	home := strings.TrimSuffix(plain.stdout, "\n")

	if out := run(t, a, "cd /tmp; export "+sessionVar+"=one", ""); out.res.ExitCode != 0 || out.stdout != "" || out.stderr != "" {
		t.Fatalf("session %s: `cd /tmp; export %s=one`: status %d, stdout %q, stderr %q; want 0 and no output", a, sessionVar, out.res.ExitCode, out.stdout, out.stderr)
	}
	if dir, val := state(t, a); dir != "/tmp" || val != "one" {
		t.Errorf("session %s after `cd /tmp; export %s=one`: the next command starts in %q with %s=%q; want /tmp and \"one\"", a, sessionVar, dir, sessionVar, val)
	}
	if dir, val := state(t, b); dir != home || val != "" {
		t.Errorf("session %s (new): starts in %q with %s=%q; want %q and the variable unset (sessions must not share state)", b, dir, sessionVar, val, home)
	}
	run(t, b, "export "+sessionVar+"=two", "")
	if _, val := state(t, a); val != "one" {
		t.Errorf("session %s: %s=%q after session %s exported \"two\"; want \"one\"", a, sessionVar, val, b)
	}
	if dir, val := state(t, b); dir != home || val != "two" {
		t.Errorf("session %s: starts in %q with %s=%q; want %q and \"two\"", b, dir, sessionVar, val, home)
	}
	if plain := s.exec(t, id, providers.ExecRequest{Shell: "pwd; env"}); strings.Contains(plain.stdout, sessionVar+"=") || !strings.HasPrefix(plain.stdout, home+"\n") {
		t.Errorf("Exec(shell `pwd; env`) without a session: stdout %q; want it to start in %q without %s", plain.stdout, home, sessionVar)
	}

	if out := run(t, a, "echo out; exit 3", ""); out.res.ExitCode != 3 || out.stdout != "out\n" {
		t.Errorf("session %s: `echo out; exit 3`: status %d, stdout %q; want 3 and \"out\\n\"", a, out.res.ExitCode, out.stdout)
	}
	if dir, val := state(t, a); dir != "/tmp" || val != "one" {
		t.Errorf("session %s after `exit 3`: starts in %q with %s=%q; want /tmp and \"one\"", a, dir, sessionVar, val)
	}
	if s.p.Capabilities().Stdin {
		if out := run(t, a, "cat", "through the session\n"); out.stdout != "through the session\n" {
			t.Errorf("session %s: `cat` with stdin: stdout %q, want the stdin back", a, out.stdout)
		}
	}
}
