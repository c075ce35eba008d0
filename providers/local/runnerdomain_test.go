//go:build linux

package local

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/agentbox/sandbox/providers"
)

// TestAbstractSocketsAcrossRunners: each runner restricts itself with a
// Landlock domain of its own. In the sandbox's own network namespace,
// which holds only the sandbox's abstract sockets, no scope stops at a
// domain: a command reaches the abstract socket that a command of another
// runner listens on. In the host's network the abstract-socket scope
// keeps every socket outside the runner's domain out of reach (the
// host's, see TestEscape/34, and so another runner's too) where the
// kernel has it.
func TestAbstractSocketsAcrossRunners(t *testing.T) {
	probe, err := os.ReadFile(buildProbe(t))
	if err != nil {
		t.Fatal(err)
	}
	scoped := "ok\n"
	if abi, err := llsys.LandlockGetABIVersion(); err == nil && abi >= 6 {
		scoped = "denied EPERM\n"
	}
	p := newTestProvider(t)
	cases := []struct {
		name string
		spec providers.Spec
		want string
	}{
		{"own-network", providers.Spec{}, "ok\n"},
		{"host-network", providers.Spec{Network: providers.NetworkOn}, scoped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := newSandbox(t, p, c.spec)
			if err := os.WriteFile(workspaceFile(p, id, "probe"), probe, 0o755); err != nil {
				t.Fatal(err)
			}
			name := "@sandbox-runners-" + token(t)
			// A background command becomes its runner: the
			// connection below comes from another one.
			ctx := context.Background()
			if _, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "exec /workspace/probe listen-unix " + name + " >/tmp/listen.out", Background: true}); err != nil {
				t.Fatalf("background listener: %v", err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(mustRun(t, p, id, "cat /tmp/listen.out"), "listening") {
				if time.Now().After(deadline) {
					t.Fatal("the listener never listened")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if got := mustRun(t, p, id, "/workspace/probe connect-unix "+name); got != c.want {
				t.Errorf("connect to %s from another runner: %q, want %q", name, got, c.want)
			}
		})
	}
}
