package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// holderPID returns the recorded holder of id, failing when none is.
func holderPID(t *testing.T, p *Provider, id string) int {
	t.Helper()
	rec, err := readHolderRecord(filepath.Join(p.dir, id))
	if err != nil {
		t.Fatalf("no holder recorded: %v", err)
	}
	return rec.pid
}

// waitGone waits until pid no longer exists.
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists after %v", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHolderReusedAndStoppedByDelete(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	mustRun(t, p, id, "true")
	first := holderPID(t, p, id)
	if got := mustRun(t, p, id, "echo hi"); got != "hi\n" {
		t.Errorf("second exec: %q", got)
	}
	if again := holderPID(t, p, id); again != first {
		t.Errorf("second exec started holder %d, want the first one %d reused", again, first)
	}
	if err := p.Delete(context.Background(), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	waitGone(t, first, 5*time.Second)
	if _, err := os.Lstat(filepath.Join(p.dir, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox directory after Delete: %v", err)
	}
}

func TestHolderKilledIsReplaced(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "true")
	first := holderPID(t, p, id)
	if err := unix.Kill(first, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, first, 5*time.Second)
	if got := mustRun(t, p, id, "echo back"); got != "back\n" {
		t.Errorf("exec after the holder died: %q", got)
	}
	if second := holderPID(t, p, id); second == first {
		t.Error("no new holder was recorded")
	}
}

func TestHolderConcurrentExecs(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			r := run(t, p, id, fmt.Sprintf("echo out%d; echo err%d >&2; exit %d", i, i, i%7))
			if r.err != nil || r.code != i%7 || r.stdout != fmt.Sprintf("out%d\n", i) || r.stderr != fmt.Sprintf("err%d\n", i) {
				t.Errorf("exec %d: %+v", i, r)
			}
		})
	}
	wg.Wait()
}

func TestHolderIdleExit(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	p.holderIdle = 200 * time.Millisecond
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "true")
	first := holderPID(t, p, id)
	waitGone(t, first, 10*time.Second)
	if got := mustRun(t, p, id, "echo again"); got != "again\n" {
		t.Errorf("exec after the idle exit: %q", got)
	}
}

func TestHolderCommandCannotSeeHolder(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	// PID 1 is the command's own init; the holder lives in an ancestor
	// PID namespace, invisible and unsignallable.
	got := mustRun(t, p, id, "cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'")
	if !strings.HasPrefix(got, initArgv0) {
		t.Errorf("PID 1 in the command's namespace: %q", got)
	}
	if r := run(t, p, id, "kill -0 0 2>/dev/null; kill -9 -1 2>/dev/null; true"); r.err != nil {
		t.Errorf("exec: %v", r.err)
	}
	if got := mustRun(t, p, id, "echo alive"); got != "alive\n" {
		t.Errorf("the sandbox after a kill -1: %q", got)
	}
}

// TestColdPath runs the essentials on the path without a holder, which is
// also the fallback when none can start and the path of commands whose
// network differs from the sandbox's.
func TestColdPath(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	p.coldOnly = true
	id := newSandbox(t, p, providers.Spec{})
	if r := run(t, p, id, "exit 3"); r.err != nil || r.code != 3 {
		t.Errorf("exit 3: %+v", r)
	}
	if r := run(t, p, id, "no-such-command-xyz"); r.err != nil || r.code != 127 {
		t.Errorf("missing command: %+v", r)
	}
	caps := mustRun(t, p, id, "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u; grep NoNewPrivs /proc/self/status | awk '{print $2}'")
	if caps != "0000000000000000\n1\n" {
		t.Errorf("caps and NNP: %q", caps)
	}
	r := run(t, p, id, "sleep 30", func(r *providers.ExecRequest) { r.Timeout = 300 * time.Millisecond })
	if !errors.Is(r.err, providers.ErrTimeout) {
		t.Errorf("timeout: %v", r.err)
	}
	if _, err := readHolderRecord(filepath.Join(p.dir, id)); err == nil {
		t.Error("the cold path started a holder")
	}
}
