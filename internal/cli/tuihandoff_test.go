package cli

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestTUIHandOver: a program without the TUI hands bare `sandbox` on a
// terminal to providers.CloudProgram with its own arguments, before it
// touches anything; when it cannot, the run exits 125 and says what to
// install. A verb, or no terminal, is no reason to hand over.
func TestTUIHandOver(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		tty      bool
		handoff  func(program string, args []string) error
		wantCode int
		wantCall bool
		wantErr  string
	}{
		{name: "bare on a terminal", args: []string{"--sandbox-id", "sb-1"}, tty: true,
			handoff: func(string, []string) error { return errors.New("not found") }, wantCode: ExitSandbox, wantCall: true,
			wantErr: "install sandbox-cloud beside this program or on PATH"},
		{name: "no hand-over at all", tty: true, wantCode: ExitSandbox,
			wantErr: "run the same command with sandbox-cloud"},
		{name: "bare without a terminal", handoff: func(string, []string) error { return nil }, wantCode: ExitUsage,
			wantErr: "no verb given and no terminal"},
		{name: "a verb on a terminal", args: []string{"exit-codes"}, tty: true, handoff: func(string, []string) error { return nil },
			wantCode: ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			var called []string
			d := Deps{
				Streams:  Streams{In: strings.NewReader(""), Out: &out, Err: &errb, InTTY: tt.tty, OutTTY: tt.tty, ErrTTY: tt.tty},
				Registry: keyedRegistry(),
				Getenv:   func(k string) (string, bool) { return map[string]string{"HOME": t.TempDir()}[k], k == "HOME" },
				Getwd:    func() (string, error) { return t.TempDir(), nil },
			}
			if tt.handoff != nil {
				d.Handoff = func(program string, args []string) error {
					if program != providers.CloudProgram || !slices.Equal(args, tt.args) {
						t.Errorf("handed over to %s %q, want %s %q", program, args, providers.CloudProgram, tt.args)
					}
					called = append(called, program)
					return tt.handoff(program, args)
				}
			}
			code := Main(context.Background(), tt.args, d)
			if code != tt.wantCode || !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errb.String(), tt.wantCode, tt.wantErr)
			}
			if (len(called) > 0) != tt.wantCall {
				t.Errorf("handed over %d times, want %v", len(called), tt.wantCall)
			}
		})
	}
}
