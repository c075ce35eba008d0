package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			// No pooled init outlives a script: one would be made in
			// the state directory while the work directory is removed.
			env.Setenv("SANDBOX_LOCAL_POOL", "0")
			// A free loopback address for scripts that start `sandbox serve`.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			env.Setenv("SERVE_ADDR", ln.Addr().String())
			return ln.Close()
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
			// wait-http URL waits (up to 30s) until URL answers any HTTP
			// status, e.g. for a server started in the background.
			"wait-http": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: wait-http URL")
				}
				deadline := time.Now().Add(30 * time.Second)
				for {
					resp, err := http.Get(args[0])
					if err == nil {
						resp.Body.Close()
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("%s did not answer within 30s: %v", args[0], err)
					}
					time.Sleep(50 * time.Millisecond)
				}
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
