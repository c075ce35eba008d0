package approval

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// termFake is a provider with terminals whose sessions end at once with
// the exit status 5.
type termFake struct {
	*fakeProvider
	mu     sync.Mutex
	opened []providers.ExecRequest
}

func (f *termFake) ExecTerminal(ctx context.Context, id string, req providers.ExecRequest, term providers.TerminalRequest) (providers.TerminalSession, error) {
	f.mu.Lock()
	f.opened = append(f.opened, req)
	f.mu.Unlock()
	return doneSession{}, nil
}

// doneSession is a terminal session whose command has ended.
type doneSession struct{}

func (doneSession) Read([]byte) (int, error)    { return 0, io.EOF }
func (doneSession) Write(b []byte) (int, error) { return len(b), nil }
func (doneSession) Close() error                { return nil }
func (doneSession) Resize(uint16, uint16) error { return nil }
func (doneSession) Wait() (providers.ExecResult, error) {
	return providers.ExecResult{ExitCode: 5}, nil
}

// TestGateExecTerminal checks that a terminal session is decided as one
// exec of its command, and refused on providers without terminals.
func TestGateExecTerminal(t *testing.T) {
	t.Parallel()
	shell := providers.ExecRequest{Argv: []string{"bash", "-l"}}
	for _, tc := range []struct {
		name     string
		inner    providers.Provider
		policy   string
		allow    bool
		wantErr  func(error) bool
		wantAsks int
	}{
		{name: "allowed once", inner: &termFake{fakeProvider: newFake()}, policy: "ask: [\"*\"]\n", allow: true, wantAsks: 1},
		{name: "denied by the approver", inner: &termFake{fakeProvider: newFake()}, policy: "ask: [\"*\"]\n", wantAsks: 1,
			wantErr: func(err error) bool { var d *DeniedError; return errors.As(err, &d) }},
		{name: "denied by a rule on the shell", inner: &termFake{fakeProvider: newFake()}, policy: "deny: [\"exec:bash *\"]\n",
			wantErr: func(err error) bool { var d *DeniedError; return errors.As(err, &d) }},
		{name: "no terminals", inner: newFake(), policy: "ask: [\"*\"]\n",
			wantErr: func(err error) bool {
				return errors.Is(err, providers.ErrUnsupported) && strings.Contains(err.Error(), "no terminals")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []Request
			g := NewGate(tc.inner, GateOptions{
				Policy: mustPolicy(t, tc.policy),
				Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
					asked = append(asked, req)
					return Decision{Allow: tc.allow}, nil
				}),
			})
			s, err := g.ExecTerminal(WithSource(context.Background(), SourceAgent), "sb", shell, providers.TerminalRequest{})
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("error = %v, want the refusal", err)
				}
			} else {
				if err != nil {
					t.Fatalf("ExecTerminal: %v", err)
				}
				if res, err := s.Wait(); err != nil || res.ExitCode != 5 {
					t.Fatalf("Wait = %+v, %v; want the session's status 5", res, err)
				}
			}
			if len(asked) != tc.wantAsks {
				t.Fatalf("approver asked %d times, want %d", len(asked), tc.wantAsks)
			}
			if len(asked) > 0 && (asked[0].Kind != KindExec || strings.Join(asked[0].Argv, " ") != "bash -l") {
				t.Fatalf("decided as %s %v, want an exec of bash -l", asked[0].Kind, asked[0].Argv)
			}
			if f, ok := tc.inner.(*termFake); ok {
				f.mu.Lock()
				opened := len(f.opened)
				f.mu.Unlock()
				if want := map[bool]int{true: 1, false: 0}[err == nil]; opened != want {
					t.Fatalf("the provider opened %d terminals, want %d", opened, want)
				}
			}
		})
	}
}
