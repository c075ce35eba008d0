package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// scriptRunner answers stamp checks from a set and runs "scripts" by
// printing their stdin and exiting with a fixed status.
type scriptRunner struct {
	stamps map[string]bool
	exit   int
	err    error
	calls  []string
}

func (r *scriptRunner) Exec(_ context.Context, _ string, req providers.ExecRequest) (providers.ExecResult, error) {
	switch {
	case strings.HasPrefix(req.Shell, "test -f"):
		r.calls = append(r.calls, "check")
		for h := range r.stamps {
			if strings.Contains(req.Shell, h) {
				return providers.ExecResult{}, nil
			}
		}
		return providers.ExecResult{ExitCode: 1}, nil
	case strings.HasPrefix(req.Shell, "mkdir"):
		r.calls = append(r.calls, "stamp")
		return providers.ExecResult{}, nil
	}
	r.calls = append(r.calls, "run:"+strings.Join(req.Argv, " "))
	if r.err != nil {
		return providers.ExecResult{}, r.err
	}
	data, _ := io.ReadAll(req.Stdin)
	fmt.Fprint(req.Stdout, string(data))
	return providers.ExecResult{ExitCode: r.exit}, nil
}

func writeScript(t *testing.T, body string) *Script {
	t.Helper()
	p := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestArgv(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, want string }{
		{"echo hi\n", "/bin/sh -s"},
		{"#!/bin/bash\necho hi\n", "/bin/bash /dev/stdin"},
		{"#!/usr/bin/env python3\nprint(1)\n", "/usr/bin/env python3 /dev/stdin"},
		{"#!\necho\n", "/bin/sh -s"},
	}
	for _, tt := range tests {
		s := &Script{Content: []byte(tt.body)}
		if got := strings.Join(s.Argv(), " "); got != tt.want {
			t.Errorf("Argv(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	lines := strings.Repeat("line\n", 30) + "boom\n"
	tests := []struct {
		name      string
		body      string
		stamped   bool
		force     bool
		exit      int
		err       error
		wantCalls []string
		wantErr   string
		skipped   bool
	}{
		{name: "fresh", body: "echo ok\n", wantCalls: []string{"check", "run:/bin/sh -s", "stamp"}},
		{name: "stamped skips", body: "echo ok\n", stamped: true, wantCalls: []string{"check"}, skipped: true},
		{name: "force reruns", body: "echo ok\n", stamped: true, force: true, wantCalls: []string{"run:/bin/sh -s", "stamp"}},
		{name: "failure tail", body: lines, exit: 2, wantCalls: []string{"check", "run:/bin/sh -s"}, wantErr: "failed with exit status 2; last 20 lines"},
		{name: "timeout", body: "sleep 1\n", err: providers.ErrTimeout, wantCalls: []string{"check", "run:/bin/sh -s"}, wantErr: "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := writeScript(t, tt.body)
			r := &scriptRunner{stamps: map[string]bool{}, exit: tt.exit, err: tt.err}
			if tt.stamped {
				r.stamps[s.Hash] = true
			}
			var out strings.Builder
			res, err := Run(context.Background(), r, "sb", s, Options{Output: &out, Force: tt.force})
			if !slices.Equal(r.calls, tt.wantCalls) {
				t.Fatalf("calls = %v, want %v", r.calls, tt.wantCalls)
			}
			if tt.wantErr != "" {
				var se *Error
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.exit != 0 && (!strings.Contains(err.Error(), "| boom") || strings.Count(err.Error(), "| ") != TailLines) {
					t.Fatalf("tail missing from error:\n%v", err)
				}
				return
			}
			if err != nil || res.Skipped != tt.skipped {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			if !tt.skipped && out.String() != tt.body {
				t.Fatalf("live output = %q, want the script's output", out.String())
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "missing.sh")); err == nil {
		t.Fatal("missing script must fail")
	}
	p := filepath.Join(t.TempDir(), "empty.sh")
	os.WriteFile(p, nil, 0o600)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty script: %v", err)
	}
}
