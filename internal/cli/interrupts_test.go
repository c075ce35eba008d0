package cli

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// callerBound is the fake provider, claiming to end a command whose
// caller goes away, as a local machine does.
type callerBound struct{ *fake.Provider }

func (p callerBound) Capabilities() providers.Capabilities {
	c := p.Provider.Capabilities()
	c.EndsWithCaller = true
	return c
}

// TestWhenInterruptsArm: every verb arms SIGINT and SIGTERM before it
// runs, but a foreground exec on an existing sandbox of a provider that
// ends a command with its caller, which arms them execArmDelay in.
func TestWhenInterruptsArm(t *testing.T) {
	for _, bound := range []bool{false, true} {
		p := fake.New()
		reg := fake.Registration()
		reg.New = func(providers.Config) (providers.Provider, error) {
			if bound {
				return callerBound{p}, nil
			}
			return p, nil
		}
		env := map[string]string{"HOME": t.TempDir()}
		main := func(args ...string) ([]time.Duration, string) {
			var arms []time.Duration
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"--sandbox", fake.Name}, args...), Deps{
				Streams:       Streams{In: strings.NewReader(""), Out: &out, Err: &errb},
				Registry:      providers.NewRegistry(reg),
				Getenv:        func(k string) (string, bool) { v, ok := env[k]; return v, ok },
				Getwd:         func() (string, error) { return env["HOME"], nil },
				ArmInterrupts: func(d time.Duration) { arms = append(arms, d) },
			})
			if code != 0 {
				t.Fatalf("%q: exit %d: %s", args, code, errb.String())
			}
			return arms, out.String()
		}
		arms, out := main("create")
		if !slices.Equal(arms, []time.Duration{0}) {
			t.Errorf("create armed %v, want [0]", arms)
		}
		id := strings.TrimSpace(out)
		late := time.Duration(0)
		if bound {
			late = execArmDelay
		}
		for _, tc := range []struct {
			args []string
			want time.Duration
		}{
			{[]string{"version"}, 0},
			{[]string{"list"}, 0},
			{[]string{"exec", "--", "true"}, 0}, // a fresh sandbox
			{[]string{"--keep", "exec", "--", "true"}, 0},
			{[]string{"--sandbox-id", id, "exec", "--", "true"}, late},
			{[]string{"--sandbox-id", id, "exec", "-c", "true"}, late},
			{[]string{"--json", "--sandbox-id", id, "exec", "--", "true"}, 0},
			{[]string{"--sandbox-id", id, "ls", "/workspace"}, 0},
		} {
			arms, _ := main(tc.args...)
			if !slices.Equal(arms, []time.Duration{tc.want}) {
				t.Errorf("caller-bound %v, %q armed %v, want [%v]", bound, tc.args, arms, tc.want)
			}
		}
	}
}

// TestInterruptsCancel sends the process itself SIGINT and SIGTERM once
// interruptsCancel armed them, at once and after a delay: each cancels the
// context and the process lives on.
func TestInterruptsCancel(t *testing.T) {
	for _, tc := range []struct {
		sig   syscall.Signal
		after time.Duration
	}{
		{syscall.SIGINT, 0},
		{syscall.SIGTERM, 30 * time.Millisecond},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		arm := interruptsCancel(ctx, cancel)
		arm(tc.after)
		time.Sleep(tc.after + 200*time.Millisecond)
		if ctx.Err() != nil {
			t.Fatalf("%v: cancelled before any signal", tc.sig)
		}
		if err := syscall.Kill(os.Getpid(), tc.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v armed after %v: the context was not cancelled", tc.sig, tc.after)
		}
	}
}
