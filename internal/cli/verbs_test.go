package cli

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestVerbNames checks that each verb's names are those of the command it
// builds: a call is given the verb its first argument names, so a name
// that drifted from the command's would leave that call without it.
func TestVerbNames(t *testing.T) {
	t.Parallel()
	app := &App{deps: Deps{Registry: providers.NewRegistry()}}
	for _, v := range verbs(app) {
		c := v.build()
		want := append([]string{c.Name()}, c.Aliases...)
		if !slices.Equal(v.names, want) {
			t.Errorf("verb %v builds the command %v", v.names, want)
		}
	}
}

func TestVerbOf(t *testing.T) {
	t.Parallel()
	root := newRootCmd(&App{deps: Deps{Registry: providers.NewRegistry()}})
	vs := verbs(&App{})
	tests := []struct {
		args []string
		want string // "" when the whole tree is built
	}{
		{[]string{"exec", "--", "true"}, "exec"},
		{[]string{"--sandbox-id", "sb-1", "exec", "--", "true"}, "exec"},
		{[]string{"--sandbox-id=sb-1", "read", "/tmp/x"}, "read"},
		{[]string{"--sandbox", "exec", "list"}, "list"},         // "exec" is --sandbox's value
		{[]string{"-s", "local", "-y", "write", "/x"}, "write"}, // a shorthand's value, a bool shorthand
		{[]string{"-slocal", "ls"}, "ls"},
		{[]string{"-ye", "K=V", "exec", "--", "env"}, "exec"}, // bool then valued shorthand in one
		{[]string{"--yes", "--json", "rm", "sb-1"}, "delete"}, // an alias
		{[]string{"--env", "K=V", "--env", "exec", "run", "plan.yaml"}, "run"},
		{[]string{}, ""},
		{[]string{"--json"}, ""},
		{[]string{"help", "exec"}, ""},
		{[]string{"completion", "bash"}, ""},
		{[]string{"__complete", "ex"}, ""},
		{[]string{"--help"}, ""},
		{[]string{"-h"}, ""},
		{[]string{"--no-such-flag", "exec"}, ""},
		{[]string{"-Z", "exec"}, ""},
		{[]string{"exce", "--", "true"}, ""}, // cobra's suggestion needs the others
		{[]string{"--", "exec"}, ""},
		{[]string{"--sandbox-id"}, ""},
	}
	for _, tt := range tests {
		v, ok := verbOf(vs, root.PersistentFlags(), tt.args)
		got := ""
		if ok {
			got = v.names[0]
		}
		if got != tt.want {
			t.Errorf("verbOf(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestVerbAloneBehaves runs calls that get their verb alone and calls that
// get the whole tree through Main, as a user types them.
func TestVerbAloneBehaves(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args     []string
		code     int
		contains string // in stdout, or stderr when code != 0
	}{
		{[]string{"version"}, 0, "sandbox"},
		{[]string{"exec", "--help"}, 0, "--sandbox-id"}, // the verb's help shows the global flags
		{[]string{"help", "exec"}, 0, "--background"},
		{[]string{"--help"}, 0, "exit-codes"}, // the whole list
		{[]string{"completion", "bash"}, 0, "bash completion"},
		{[]string{"exce"}, ExitUsage, `unknown command "exce" for "sandbox"; did you mean exec?`},
		{[]string{"--json", "nope"}, ExitUsage, `unknown command "nope"`},
		{[]string{"--json", "exit-codes"}, 0, `"Code": 124`},
	}
	for _, tt := range tests {
		code, out, errs := runMain(t, nil, tt.args...)
		where := out
		if tt.code != 0 {
			where = errs
		}
		if code != tt.code || !strings.Contains(where, tt.contains) {
			t.Errorf("%q: code %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errs, tt.code, tt.contains)
		}
	}
}

// TestParallelVerbsGetAllCPUs: the verbs marked parallel (and the TUI) go
// back to the runtime's default GOMAXPROCS, the others keep the one
// processor the program starts with. Not parallel: it sets GOMAXPROCS.
func TestParallelVerbsGetAllCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	all := runtime.NumCPU() // the default here, with no CPU quota
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		all = 1 // the environment's setting stays
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"version"}, 1},
		{[]string{"--sandbox", "fake", "exec", "--", "true"}, 1},
		{[]string{"run", "no-such-plan.yaml"}, all},
		{[]string{}, all}, // the TUI (here refused: no terminal)
	} {
		runtime.GOMAXPROCS(1)
		runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, tc.args...)
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("%q: GOMAXPROCS %d after it, want %d", tc.args, got, tc.want)
		}
	}
}
