package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentbox/sandbox/internal/cli"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
	"github.com/agentbox/sandbox/internal/tui"
	"github.com/agentbox/sandbox/providers/all"
	"github.com/agentbox/sandbox/providers/daytona"
	"github.com/agentbox/sandbox/providers/e2b"
	"github.com/agentbox/sandbox/providers/emulator/httpguard"
	"github.com/agentbox/sandbox/providers/local"
	"github.com/agentbox/sandbox/providers/runloop"
)

func TestMain(m *testing.M) {
	local.MaybeRunInit()
	testscript.Main(cleanupBinary{m}, map[string]func(){
		// The scripts' sandbox has the clients and emulators of E2B,
		// Daytona and Runloop, and the TUI, built in, as sandbox-cloud has
		// (the hand-over to it is TestModalHandOver's, the served
		// emulators' tests' and the TUI's).
		"sandbox": func() {
			reg := all.Registry(e2b.Registration(), daytona.Registration(), runloop.Registration())
			os.Exit(cli.RunSystem(reg, httpguard.ServeEmulator, tui.Mode{}))
		},
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script against the
// real binary and the real local provider.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		// [root] says the tests run as root: some things differ for
		// another user (a sandbox maps the host's root to nobody, and
		// its inits are not open to the user's inspection), and the
		// scripts check what holds for the user running them.
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, ".home"))
			env.Setenv("HOST_ONLY_VAR", "host-only-value")
			// No standby machine outlives a script: one would be
			// made in the state directory while the work directory
			// is removed.
			env.Setenv("SANDBOX_LOCAL_STANDBY", "0")
			// A free loopback address for scripts that start `sandbox serve`.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			env.Setenv("SERVE_ADDR", ln.Addr().String())
			// Every event the script had recorded in the audit log
			// follows the schema.
			audit := filepath.Join(env.WorkDir, ".state", "sandbox", "audit.jsonl")
			// The work directory goes once no reaper works in it.
			env.Defer(func() { waitReaped(env.T(), filepath.Join(env.WorkDir, ".state")) })
			env.Defer(func() {
				data, err := os.ReadFile(audit)
				if err != nil {
					return // the script ran no call
				}
				if _, err := checkEvents(data); err != nil {
					env.T().Fatal("audit log: ", err)
				}
			})
			return ln.Close()
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// events checks that stdout is an event stream (package
			// events): every line follows the schema, run.started comes
			// first and run.completed or run.failed last.
			"events": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 0 {
					ts.Fatalf("usage: events")
				}
				evs, err := checkEvents([]byte(ts.ReadFile("stdout")))
				if err != nil {
					ts.Fatalf("%v", err)
				}
				if len(evs) < 2 || evs[0].Type != events.RunStarted || (evs[len(evs)-1].Type != events.RunCompleted && evs[len(evs)-1].Type != events.RunFailed) {
					ts.Fatalf("not one run from run.started to its end:\n%s", ts.ReadFile("stdout"))
				}
			},
			// events-apart A B DURATION checks that in the events on
			// stdout the call.output holding B came at least DURATION
			// after the one holding A: output streamed while it ran.
			"events-apart": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 3 {
					ts.Fatalf("usage: events-apart A B DURATION")
				}
				min, err := time.ParseDuration(args[2])
				ts.Check(err)
				evs, err := checkEvents([]byte(ts.ReadFile("stdout")))
				ts.Check(err)
				var a, b time.Time
				for _, ev := range evs {
					switch {
					case ev.Type != events.CallOutput:
					case strings.Contains(ev.Data, args[0]) && a.IsZero():
						a = ev.Time
					case strings.Contains(ev.Data, args[1]) && b.IsZero():
						b = ev.Time
					}
				}
				if a.IsZero() || b.IsZero() || b.Sub(a) < min {
					ts.Fatalf("call.output %q at %v and %q at %v: not %v apart", args[0], a, args[1], b, min)
				}
			},
			// sandbox-json [-array] checks that stdout is the sandbox
			// object of the schema of package events (DESIGN §4), or
			// with -array an array of them.
			"sandbox-json": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) > 1 || (len(args) == 1 && args[0] != "-array") {
					ts.Fatalf("usage: sandbox-json [-array]")
				}
				v, err := eventstest.Compile()
				ts.Check(err)
				ts.Check(v.Sandbox([]byte(ts.ReadFile("stdout")), len(args) == 1))
			},
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

// checkEvents validates JSON Lines of events against the schema of
// package events and returns them decoded.
func checkEvents(data []byte) ([]events.Event, error) {
	v, err := eventstest.Compile()
	if err != nil {
		return nil, err
	}
	var out []events.Event
	for line := range strings.Lines(string(data)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := v.Line([]byte(line)); err != nil {
			return nil, err
		}
		var ev events.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, fmt.Errorf("decode %s: %w", line, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
