package providers_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// sessionStep is one command of a session test. In Shell, Cwd and Want,
// {base} stands for the test's default working directory.
type sessionStep struct {
	Session  string
	Shell    string
	Argv     []string
	Cwd      string
	Env      map[string]string
	Stdin    string
	Want     string
	WantCode int
}

// runSessionStep runs one step the way a provider would run the request
// SessionCommand returns: the program of its argv, in its Cwd (else base),
// with a base environment plus its Env. The state directory is moved
// under stateRoot, and shell replaces /bin/sh.
func runSessionStep(t *testing.T, shell, base, stateRoot string, st sessionStep) (stdout, stderr string, code int) {
	t.Helper()
	expand := func(s string) string { return strings.ReplaceAll(s, "{base}", base) }
	req := providers.ExecRequest{Session: st.Session, Shell: expand(st.Shell), Argv: st.Argv, Cwd: expand(st.Cwd), Env: st.Env}
	out, err := providers.SessionCommand(req)
	if err != nil {
		t.Fatalf("SessionCommand: %v", err)
	}
	if out.Session != "" || out.Shell != "" || out.Argv[0] != "/bin/sh" || out.Argv[1] != "-c" {
		t.Fatalf("SessionCommand returned %+v, want a plain /bin/sh -c argv", out)
	}
	if other, _ := providers.SessionCommand(providers.ExecRequest{Session: "x", Shell: "true"}); other.Argv[2] != out.Argv[2] {
		t.Fatalf("the script text depends on the request: %q", out.Argv[2])
	}
	dir, ok := strings.CutPrefix(out.Argv[5], providers.SessionDir+"/")
	if !ok {
		t.Fatalf("state directory %q is not under %s", out.Argv[5], providers.SessionDir)
	}
	argv := slices.Clone(out.Argv)
	argv[0], argv[5] = shell, filepath.Join(stateRoot, dir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = base
	if out.Cwd != "" {
		cmd.Dir = out.Cwd
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": base, "BASEVAR": "from-sandbox"}
	maps.Copy(env, out.Env)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var o, e bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(st.Stdin), &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", shell, err)
	}
	return o.String(), e.String(), code
}

func TestSessionCommandRuns(t *testing.T) {
	tests := []struct {
		name  string
		steps []sessionStep
	}{
		{"cd persists", []sessionStep{
			{Session: "a", Shell: "cd sub"},
			{Session: "a", Shell: "pwd", Want: "{base}/sub\n"},
			{Session: "a", Shell: "cd ..; pwd", Want: "{base}\n"},
		}},
		{"export persists", []sessionStep{
			{Session: "a", Shell: "export FOO=1 BAR='x y'"},
			{Session: "a", Shell: `echo "$FOO" "$BAR"`, Want: "1 x y\n"},
			{Session: "a", Shell: `sh -c 'echo "$FOO"'`, Want: "1\n"},
		}},
		{"unset persists", []sessionStep{
			{Session: "a", Shell: "export U=1"},
			{Session: "a", Shell: "unset U BASEVAR"},
			{Session: "a", Shell: `echo "${U-none}" "${BASEVAR-none}"`, Want: "none none\n"},
		}},
		{"shell variables that are not exported do not persist", []sessionStep{
			{Session: "a", Shell: "V=1"},
			{Session: "a", Shell: `echo "${V-none}"`, Want: "none\n"},
		}},
		{"exit status passes through", []sessionStep{
			{Session: "a", Shell: "false", WantCode: 1},
			{Session: "a", Shell: "no-such-command-here 2>/dev/null", WantCode: 127},
			{Session: "a", Shell: "sh -c 'exit 7'", WantCode: 7},
		}},
		{"exit N keeps its status and saves the state", []sessionStep{
			{Session: "a", Shell: "cd sub; export X=1; exit 3", WantCode: 3},
			{Session: "a", Shell: `pwd; echo "$X"`, Want: "{base}/sub\n1\n"},
		}},
		{"quotes, newlines and dollars", []sessionStep{
			{Session: "a", Shell: "printf '%s\\n' \"a'b\" 'c\"d' '$HOME' \"$((1+2))\"\necho `echo tick`; echo \"$@\"", Want: "a'b\nc\"d\n$HOME\n3\ntick\n\n"},
			{Session: "a", Shell: "export Q='it'\\''s \"$x\"\nnext line'"},
			{Session: "a", Shell: `printf '%s\n' "$Q"`, Want: "it's \"$x\"\nnext line\n"},
		}},
		{"argv is quoted into one command line", []sessionStep{
			{Session: "a", Argv: []string{"printf", "%s|", "a b", "$HOME", "it's", ""}, Want: "a b|$HOME|it's||"},
		}},
		{"a removed working directory falls back to the default", []sessionStep{
			{Session: "a", Shell: "mkdir gone && cd gone"},
			{Session: "a", Shell: `rmdir "$(pwd)"`},
			{Session: "a", Shell: "pwd", Want: "{base}\n"},
		}},
		{"a removed directory falls back to the request's cwd", []sessionStep{
			{Session: "a", Shell: "mkdir gone2 && cd gone2"},
			{Session: "a", Shell: `rmdir "$(pwd)"`},
			{Session: "a", Shell: "pwd", Cwd: "{base}/other", Want: "{base}/other\n"},
		}},
		{"the first command starts in the request's cwd", []sessionStep{
			{Session: "a", Shell: "pwd", Cwd: "{base}/sub", Want: "{base}/sub\n"},
			{Session: "a", Shell: "pwd", Want: "{base}/sub\n"},
		}},
		{"an explicit cwd wins over the saved one", []sessionStep{
			{Session: "a", Shell: "cd sub"},
			{Session: "a", Shell: "pwd", Cwd: "{base}/other", Want: "{base}/other\n"},
			{Session: "a", Shell: "pwd", Want: "{base}/other\n"},
		}},
		{"request env applies on top of the saved env", []sessionStep{
			{Session: "a", Shell: "export B=2; A=changed; export A", Env: map[string]string{"A": "1"}},
			{Session: "a", Shell: `echo "$A$B"`, Env: map[string]string{"A": "3"}, Want: "32\n"},
			{Session: "a", Shell: `echo "$A$B"`, Want: "32\n"},
		}},
		{"two sessions are independent", []sessionStep{
			{Session: "one", Shell: "cd sub; export S=1"},
			{Session: "two", Shell: `pwd; echo "${S-none}"`, Want: "{base}\nnone\n"},
			{Session: "two", Shell: "cd other; export S=2"},
			{Session: "one", Shell: `pwd; echo "$S"`, Want: "{base}/sub\n1\n"},
			{Session: "two", Shell: `pwd; echo "$S"`, Want: "{base}/other\n2\n"},
		}},
		{"stdin reaches the command", []sessionStep{
			{Session: "a", Shell: "cd sub"},
			{Session: "a", Shell: "cat", Stdin: "hello\nworld\n", Want: "hello\nworld\n"},
			{Session: "a", Shell: `read x; read y; echo "$y $x"`, Stdin: "1\n2\n", Want: "2 1\n"},
		}},
		{"positional parameters are empty", []sessionStep{
			{Session: "a", Shell: `echo "$#"`, Want: "0\n"},
		}},
		{"PWD follows the restored directory", []sessionStep{
			{Session: "a", Shell: "cd sub"},
			{Session: "a", Shell: `echo "$PWD"`, Want: "{base}/sub\n"},
		}},
	}
	shells := []string{"/bin/sh"}
	for _, name := range []string{"dash", "bash"} {
		if p, err := exec.LookPath(name); err == nil {
			shells = append(shells, p)
		}
	}
	for _, shell := range shells {
		for _, tt := range tests {
			t.Run(filepath.Base(shell)+"/"+tt.name, func(t *testing.T) {
				base := t.TempDir()
				for _, d := range []string{"sub", "other"} {
					if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				state := t.TempDir()
				for i, st := range tt.steps {
					stdout, stderr, code := runSessionStep(t, shell, base, state, st)
					want := strings.ReplaceAll(st.Want, "{base}", base)
					if stdout != want || code != st.WantCode || stderr != "" {
						t.Errorf("step %d %q: got stdout %q, stderr %q, status %d; want stdout %q, no stderr, status %d",
							i+1, st.Shell+strings.Join(st.Argv, " "), stdout, stderr, code, want, st.WantCode)
					}
				}
			})
		}
	}
}

func TestSessionStateIsPrivate(t *testing.T) {
	base, state := t.TempDir(), t.TempDir()
	runSessionStep(t, "/bin/sh", base, state, sessionStep{Session: "p", Shell: "export SECRET=1"})
	fi, err := os.Stat(filepath.Join(state, "p"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %v, want 0700", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(filepath.Join(state, "p"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "env" {
		t.Errorf("state directory holds %v, want only env (no temporary file left)", entries)
	}
}

func TestSessionCommandRequests(t *testing.T) {
	tests := []struct {
		name    string
		req     providers.ExecRequest
		wantErr bool
		plain   bool
	}{
		{"no session is unchanged", providers.ExecRequest{Shell: "pwd"}, false, true},
		{"a valid name", providers.ExecRequest{Session: "tui-1.x_Y", Shell: "pwd"}, false, false},
		{"64 characters", providers.ExecRequest{Session: strings.Repeat("a", 64), Shell: "pwd"}, false, false},
		{"65 characters", providers.ExecRequest{Session: strings.Repeat("a", 65), Shell: "pwd"}, true, false},
		{"a slash", providers.ExecRequest{Session: "a/b", Shell: "pwd"}, true, false},
		{"dot dot", providers.ExecRequest{Session: "..", Shell: "pwd"}, true, false},
		{"dot", providers.ExecRequest{Session: ".", Shell: "pwd"}, true, false},
		{"a space", providers.ExecRequest{Session: "a b", Shell: "pwd"}, true, false},
		{"a non-ASCII letter", providers.ExecRequest{Session: "é", Shell: "pwd"}, true, false},
		{"a bad environment name", providers.ExecRequest{Session: "a", Shell: "pwd", Env: map[string]string{"A;B": "1"}}, true, false},
		{"an environment name starting with a digit", providers.ExecRequest{Session: "a", Shell: "pwd", Env: map[string]string{"1A": "1"}}, true, false},
		{"neither argv nor shell", providers.ExecRequest{Session: "a"}, true, false},
		{"both argv and shell", providers.ExecRequest{Session: "a", Shell: "pwd", Argv: []string{"pwd"}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := providers.SessionCommand(tt.req)
			if tt.wantErr {
				if !errors.Is(err, providers.ErrInvalid) {
					t.Fatalf("SessionCommand(%+v) error %v, want ErrInvalid", tt.req, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SessionCommand(%+v): %v", tt.req, err)
			}
			if tt.plain {
				if out.Shell != tt.req.Shell || out.Argv != nil {
					t.Errorf("SessionCommand changed a request without a session: %+v", out)
				}
				return
			}
			if out.Session != "" || out.Shell != "" || out.Argv[4] != tt.req.Shell || out.Argv[5] != providers.SessionDir+"/"+tt.req.Session {
				t.Errorf("SessionCommand(%+v) = argv %q", tt.req, out.Argv)
			}
		})
	}
}

// keeper is a provider that keeps sessions itself.
type keeper struct{ providers.Provider }

func (keeper) KeepsSessions() bool { return true }

func TestForProvider(t *testing.T) {
	req := providers.ExecRequest{Session: "s", Shell: "pwd"}
	got, err := providers.ForProvider(keeper{}, req)
	if err != nil || got.Session != "s" || got.Shell != "pwd" {
		t.Errorf("ForProvider(keeper) = %+v, %v; want the request unchanged", got, err)
	}
	if _, err := providers.ForProvider(keeper{}, providers.ExecRequest{Session: "a/b", Shell: "pwd"}); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("ForProvider(keeper) with a bad name: %v, want ErrInvalid", err)
	}
	got, err = providers.ForProvider(nil, req)
	if err != nil || got.Session != "" || len(got.Argv) == 0 {
		t.Errorf("ForProvider(plain provider) = %+v, %v; want the session script", got, err)
	}
}

func TestQuoteShell(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"ls", "-la", "/tmp"}, "ls -la /tmp"},
		{[]string{"echo", "a b"}, "echo 'a b'"},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{"echo", "$HOME", "*"}, "echo '$HOME' '*'"},
	}
	for _, tt := range tests {
		if got := providers.QuoteShell(tt.argv); got != tt.want {
			t.Errorf("QuoteShell(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}
