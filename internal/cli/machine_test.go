package cli

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want syscall.Signal
		err  bool
	}{
		{in: "TERM", want: syscall.SIGTERM},
		{in: "SIGTERM", want: syscall.SIGTERM},
		{in: "kill", want: syscall.SIGKILL},
		{in: "INT", want: syscall.SIGINT},
		{in: "HUP", want: syscall.SIGHUP},
		{in: "9", want: syscall.SIGKILL},
		{in: "15", want: syscall.SIGTERM},
		{in: "0", err: true},
		{in: "65", err: true},
		{in: "NOPE", err: true},
		{in: "", err: true},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if tt.err {
			if err == nil || exitCode(err) != ExitUsage {
				t.Errorf("parseSignal(%q) = %v, %v; want a usage error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestAutoStopFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want time.Duration
		err  bool
	}{
		{args: nil, want: 0},
		{args: []string{"0"}, want: -1},
		{args: []string{"1s"}, want: time.Second},
		{args: []string{"2h"}, want: 2 * time.Hour},
		{args: []string{"-1s"}, err: true},
		{args: []string{"soon"}, err: true},
	}
	for _, tt := range tests {
		var f autoStopFlag
		var err error
		for _, a := range tt.args {
			err = f.Set(a)
		}
		if tt.err {
			if err == nil {
				t.Errorf("--auto-stop %v: want an error", tt.args)
			}
			continue
		}
		if err != nil || f.spec() != tt.want {
			t.Errorf("--auto-stop %v: spec %v, %v; want %v", tt.args, f.spec(), err, tt.want)
		}
	}
}

func TestMachineVerbs(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FAKE_API_KEY": "k-123456"}
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout bool
	}{
		{name: "background needs a kept sandbox", args: []string{"exec", "--background", "--", "true"}, code: ExitUsage, stderr: "use --keep or --sandbox-id", noStdout: true},
		{name: "background prints the pid", args: []string{"--keep", "exec", "--background", "--", "echo", "hi"}, code: 0, stdout: "2\n"},
		{name: "kill is no longer delete", args: []string{"kill", "fake-1"}, code: ExitUsage, stderr: "usage: sandbox kill ID PID"},
		{name: "kill needs a numeric pid", args: []string{"kill", "fake-1", "x"}, code: ExitUsage, stderr: "not a process id"},
		{name: "ps of an unknown sandbox", args: []string{"ps", "fake-404"}, code: ExitError, stderr: "sandbox fake-404 not found"},
		{name: "stop of an unknown sandbox", args: []string{"stop", "fake-404"}, code: ExitError, stderr: "sandbox fake-404 not found"},
		{name: "logs id from --sandbox-id", args: []string{"--sandbox-id", "fake-404", "logs", "3"}, code: ExitError, stderr: "sandbox fake-404 not found"},
		{name: "two different ids", args: []string{"--sandbox-id", "fake-1", "ps", "fake-2"}, code: ExitUsage, stderr: "two sandbox ids"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runMain(t, env, append([]string{"--sandbox", "fake"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) || tt.noStdout && stdout != "" {
				t.Fatalf("code %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}

func TestExecBackgroundJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, "--sandbox", "fake", "--keep", "--json", "exec", "--background", "--", "echo", "hi")
	var doc struct {
		PID     int    `json:"pid"`
		Sandbox string `json:"sandbox"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &doc) != nil || doc.PID == 0 || doc.Sandbox == "" {
		t.Fatalf("code %d, stdout %q (one JSON document wanted), stderr %q", code, stdout, stderr)
	}
}
