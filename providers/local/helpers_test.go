//go:build linux

package local

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// newTestProvider returns a provider whose state lives in a test directory.
func newTestProvider(t testing.TB) *Provider {
	t.Helper()
	return providerAt(t, t.TempDir())
}

// providerAt returns a provider on the state in dir (a test directory),
// closed when t ends, once the trash of what the test deleted is empty,
// and dir removed. A second provider on the same state (as a second CLI
// run) is made with New, and only closed.
func providerAt(t testing.TB, dir string) *Provider {
	t.Helper()
	p, err := New(providers.Config{StateDir: dir})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Runs before TempDir's own cleanup, which cannot enter the mode-000
	// directories overlayfs leaves when the tests run unprivileged, nor
	// remove the files of a user's subordinate ids: only the reaper (in
	// a user namespace that maps them) may, so this waits for it to
	// empty the trash of the sandboxes the test deleted.
	t.Cleanup(func() {
		_ = p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.WaitReaped(ctx)
		// A reaper releases the lock between two passes (see
		// runReaper), where WaitReaped may find it free: what only
		// the reaper may remove is waited for a while more.
		for os.Getuid() != 0 && len(trashEntries(filepath.Join(p.dir, trashDir))) > 0 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		_ = removeTree(dir)
	})
	return p
}

// newSandbox creates a sandbox deleted when t ends.
func newSandbox(t testing.TB, p *Provider, spec providers.Spec) string {
	t.Helper()
	info, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), info.ID); err != nil {
			t.Errorf("Delete(%s): %v", info.ID, err)
		}
	})
	return info.ID
}

// stopSandbox stops id's machine.
func stopSandbox(t testing.TB, p *Provider, id string) {
	t.Helper()
	if err := p.Stop(context.Background(), id); err != nil {
		t.Fatalf("Stop(%s): %v", id, err)
	}
}

// result is what one command produced.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

// run executes a shell command in id.
func run(t testing.TB, p *Provider, id, shell string, mod ...func(*providers.ExecRequest)) result {
	t.Helper()
	var out, errb providertest.Buffer
	req := providers.ExecRequest{Shell: shell, Stdout: &out, Stderr: &errb}
	for _, m := range mod {
		m(&req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := p.Exec(ctx, id, req)
	return result{stdout: out.String(), stderr: errb.String(), code: res.ExitCode, err: err}
}

// mustRun executes shell and fails unless it exits 0.
func mustRun(t testing.TB, p *Provider, id, shell string, mod ...func(*providers.ExecRequest)) string {
	t.Helper()
	r := run(t, p, id, shell, mod...)
	if r.err != nil || r.code != 0 {
		t.Fatalf("exec %q: exit %d, err %v, stderr %q", shell, r.code, r.err, r.stderr)
	}
	return r.stdout
}

// readAll reads a sandbox file through the provider.
func readAll(t testing.TB, p *Provider, id, path string) ([]byte, error) {
	t.Helper()
	rc, err := p.ReadFile(context.Background(), id, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// writeString writes a sandbox file or fails.
func writeString(t testing.TB, p *Provider, id, path, data string) {
	t.Helper()
	if err := p.WriteFile(context.Background(), id, path, strings.NewReader(data), 0o644); err != nil {
		t.Fatalf("WriteFile(%s): %v", path, err)
	}
}

// hostProcesses lists the host pids whose /proc/PID/file (readable) matches.
func hostProcesses(file string, match func(pid int, b []byte) bool) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/" + file); err == nil && match(pid, b) {
			out = append(out, pid)
		}
	}
	return out
}

// waitTrashEmpty waits until the reaper has removed every deleted tree.
func waitTrashEmpty(t testing.TB, p *Provider) {
	t.Helper()
	trash := filepath.Join(p.dir, trashDir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := trashEntries(trash)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trash still holds %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runningMachine is the record of the running machine of sandbox id.
func runningMachine(t testing.TB, p *Provider, id string) machineRecord {
	t.Helper()
	rec, alive := liveMachine(filepath.Join(p.dir, id))
	if !alive {
		t.Fatalf("sandbox %s: no machine runs", id)
	}
	return rec
}

// assertRuns checks that sandbox id runs a command; when says after what.
func assertRuns(t testing.TB, p *Provider, id, when string) {
	t.Helper()
	if got := mustRun(t, p, id, "echo ran"); got != "ran\n" {
		t.Errorf("%s: a command printed %q, want ran", when, got)
	}
}
