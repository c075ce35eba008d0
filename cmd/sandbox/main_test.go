package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentbox/sandbox/providers/local"
)

func TestMain(m *testing.M) {
	local.MaybeRunInit()
	testscript.Main(cleanupBinary{m}, map[string]func(){
		"sandbox": func() { os.Exit(run()) },
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script against the
// real binary and the real local provider.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, ".home"))
			env.Setenv("HOST_ONLY_VAR", "host-only-value")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// setenv-stdout NAME sets NAME to the trimmed stdout of the
			// previous command (e.g. the id printed by `sandbox create`).
			"setenv-stdout": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: setenv-stdout NAME")
				}
				ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
			},
			// no-sandboxes fails unless the state holds no sandbox: the
			// registry is empty and the local provider keeps no directory.
			"no-sandboxes": func(ts *testscript.TestScript, neg bool, args []string) {
				state := filepath.Join(ts.Getenv("XDG_STATE_HOME"), "sandbox")
				data, err := os.ReadFile(filepath.Join(state, "sandboxes.json"))
				if err == nil && strings.TrimSpace(string(data)) != "[]" {
					ts.Fatalf("registry still holds sandboxes:\n%s", data)
				}
				entries, _ := os.ReadDir(filepath.Join(state, "local"))
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), "sb-") {
						ts.Fatalf("local provider still holds sandbox dir %s", e.Name())
					}
				}
			},
		},
	})
}

// cleanupBinary removes the compiled program after the tests ran.
type cleanupBinary struct{ m *testing.M }

func (c cleanupBinary) Run() int {
	dir, err := os.MkdirTemp("", "sandbox-bin-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.Setenv(binDirEnv, dir)
	return c.m.Run()
}
