package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built is the program compiled once for the tests that need a real binary
// (signals, terminals); the directory is removed when the tests end.
var built = sync.OnceValues(func() (string, error) {
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set (TestMain sets it)", binDirEnv)
	}
	bin := filepath.Join(dir, "sandbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	// The program the cloud providers' runs are handed to, beside it
	// (see builtCloud).
	cloud := filepath.Join(dir, "sandbox-cloud")
	if out, err := exec.Command("go", "build", "-o", cloud, "../sandbox-cloud").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build sandbox-cloud: %w\n%s", err, out)
	}
	return bin, nil
})

// binDirEnv names the directory, made by TestMain, that holds the binary.
const binDirEnv = "SANDBOX_TEST_BIN_DIR"

// buildBinary returns the compiled program.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

type runner struct {
	t     *testing.T
	bin   string
	state string
	dir   string
}

func newRunner(t *testing.T, bin string) *runner {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	// Before the directory goes (cleanups run last first).
	t.Cleanup(func() { waitReaped(t, state) })
	return &runner{t: t, bin: bin, state: state, dir: dir}
}

// waitReaped waits (a while) until no reaper of the local provider works
// in the state directory state: one a delete or a stop started empties
// the trash and prepares the next start's directories after the CLI has
// exited, holding the trash's lock meanwhile.
func waitReaped(t interface{ Fatal(...any) }, state string) {
	lock, err := os.Open(filepath.Join(state, "sandbox", "local", ".trash", ".lock"))
	if err != nil {
		return // no trash: no reaper
	}
	defer lock.Close()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			t.Fatal("a reaper still works in " + state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *runner) command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + c.dir,
		"XDG_STATE_HOME=" + c.state,
		"XDG_CONFIG_HOME=" + filepath.Join(c.dir, "config"),
		// No standby machine outlives a test (see TestScripts).
		"SANDBOX_LOCAL_STANDBY=0",
	}
	return cmd
}

// sandboxes returns the ids `sandbox list --json` reports.
func (c *runner) sandboxes() []string {
	c.t.Helper()
	out, err := c.command("list", "--json").Output()
	if err != nil {
		c.t.Fatalf("list: %v", err)
	}
	var infos []struct{ ID string }
	if err := json.Unmarshal(out, &infos); err != nil {
		c.t.Fatalf("list --json: %v\n%s", err, out)
	}
	var ids []string
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	return ids
}

// assertNoLeak checks both the provider's view and the state directory.
func (c *runner) assertNoLeak() {
	c.t.Helper()
	if ids := c.sandboxes(); len(ids) > 0 {
		c.t.Errorf("sandbox list still shows %v", ids)
	}
	data, err := os.ReadFile(filepath.Join(c.state, "sandbox", "sandboxes.json"))
	if err == nil && strings.TrimSpace(string(data)) != "[]" {
		c.t.Errorf("registry still holds sandboxes: %s", data)
	}
	entries, _ := os.ReadDir(filepath.Join(c.state, "sandbox", "local"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "sb-") {
			c.t.Errorf("state directory still holds %s", e.Name())
		}
	}
}

// waitFor polls until cond holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exitCodeOf(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// TestInterruptLeavesNothing sends SIGINT or SIGTERM while a sandbox this run
// created is busy (exec, upload, setup) and checks the exit status and that
// no sandbox survives in `sandbox list` or the state directory.
func TestInterruptLeavesNothing(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name   string
		sig    syscall.Signal
		prep   func(c *runner) []string
		marker string // a file in the sandbox's workspace that shows it is busy
	}{
		{
			name: "exec SIGINT", sig: syscall.SIGINT,
			prep: func(c *runner) []string {
				return []string{"exec", "--", "sh", "-c", "touch /workspace/busy; sleep 60"}
			},
			marker: "busy",
		},
		{
			name: "exec SIGTERM", sig: syscall.SIGTERM,
			prep: func(c *runner) []string {
				return []string{"exec", "--", "sh", "-c", "touch /workspace/busy; sleep 60"}
			},
			marker: "busy",
		},
		{
			name: "setup SIGINT", sig: syscall.SIGINT,
			prep: func(c *runner) []string {
				p := filepath.Join(c.dir, "setup.sh")
				os.WriteFile(p, []byte("touch /workspace/busy\nsleep 60\n"), 0o644)
				return []string{"--sandbox-setup", p, "exec", "--", "true"}
			},
			marker: "busy",
		},
		{
			name: "upload SIGINT", sig: syscall.SIGINT,
			prep: func(c *runner) []string {
				// A large sparse file keeps the upload streaming for a while.
				src := filepath.Join(c.dir, "src")
				os.MkdirAll(src, 0o755)
				os.WriteFile(filepath.Join(src, "a.txt"), []byte("a"), 0o644)
				big, _ := os.Create(filepath.Join(src, "big.bin"))
				big.Truncate(8 << 30)
				big.Close()
				return []string{"upload", src, "/workspace/src"}
			},
			// The destination appears once data is flowing into the sandbox.
			marker: "src",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRunner(t, bin)
			cmd := c.command(tt.prep(c)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the sandbox exists (and is busy, where we can tell).
			waitFor(t, "the sandbox to be created", func() bool {
				entries, _ := os.ReadDir(filepath.Join(c.state, "sandbox", "local"))
				for _, e := range entries {
					if !strings.HasPrefix(e.Name(), "sb-") {
						continue
					}
					if tt.marker == "" {
						return true
					}
					if _, err := os.Stat(filepath.Join(c.state, "sandbox", "local", e.Name(), "upper", ".root", "workspace", tt.marker)); err == nil {
						return true
					}
				}
				return false
			})
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if code := exitCodeOf(err); code != 130 {
					t.Errorf("exit status %d, want 130; stderr:\n%s", code, stderr.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("the CLI did not exit after %v; stderr:\n%s", tt.sig, stderr.String())
			}
			c.assertNoLeak()
		})
	}
}

// TestFailuresLeaveNothing checks the exit code of each kind of failure
// (failed setup, provider error, denial, timeout, passthrough, usage) and
// that none leaves a sandbox behind.
func TestFailuresLeaveNothing(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name string
		args func(c *runner) []string
		code int
	}{
		{"failed setup", func(c *runner) []string {
			p := filepath.Join(c.dir, "fail.sh")
			os.WriteFile(p, []byte("echo nope; exit 9\n"), 0o644)
			return []string{"--sandbox-setup", p, "exec", "--", "true"}
		}, 125},
		{"provider error", func(c *runner) []string {
			return []string{"exec", "--cwd", "/no/such/dir", "--", "true"}
		}, 1},
		{"denied operation", func(c *runner) []string {
			return []string{"--deny", "exec", "exec", "--", "true"}
		}, 3},
		{"timeout", func(c *runner) []string {
			return []string{"--timeout", "1s", "exec", "--", "sleep", "30"}
		}, 124},
		{"exit status passes through", func(c *runner) []string {
			return []string{"exec", "--", "sh", "-c", "exit 7"}
		}, 7},
		{"command not found", func(c *runner) []string {
			return []string{"exec", "--", "no-such-command"}
		}, 127},
		{"usage error", func(c *runner) []string {
			return []string{"exec", "--no-such-flag", "--", "true"}
		}, 2},
		{"denied by a policy file in a scripted run", func(c *runner) []string {
			plan := filepath.Join(c.dir, "plan.yaml")
			os.WriteFile(plan, []byte("steps:\n  - exec: \"echo hi\"\n"), 0o644)
			return []string{"run", plan}
		}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRunner(t, bin)
			out, err := c.command(tt.args(c)...).CombinedOutput()
			if code := exitCodeOf(err); code != tt.code {
				t.Errorf("exit status %d, want %d; output:\n%s", code, tt.code, out)
			}
			c.assertNoLeak()
		})
	}
}

// runningSandbox creates a sandbox whose machine runs (one exec ran in
// it), and returns its id and the host directory of its /workspace (in its
// root layer).
func (c *runner) runningSandbox() (id, ws string) {
	c.t.Helper()
	out, err := c.command("create").Output()
	if err != nil {
		c.t.Fatalf("create: %v", err)
	}
	id = strings.TrimSpace(string(out))
	if err := c.command("--sandbox-id", id, "exec", "--", "true").Run(); err != nil {
		c.t.Fatalf("exec: %v", err)
	}
	return id, filepath.Join(c.state, "sandbox", "local", id, "upper", ".root", "workspace")
}

// TestInterruptReusedSandbox interrupts an exec in a reused sandbox, which
// runs in the sandbox's machine: the CLI exits 130, the command's process
// group is killed, the sandbox stays (this run did not create it) and
// works, and deleting it ends its machine.
func TestInterruptReusedSandbox(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	id, ws := c.runningSandbox()
	rec, err := os.ReadFile(filepath.Join(c.state, "sandbox", "local", id, "machine.pid"))
	if err != nil {
		t.Fatalf("no machine after create: %v", err)
	}
	var machine int
	fmt.Sscan(string(rec), &machine)
	cmd := c.command("--sandbox-id", id, "exec", "--", "sh", "-c",
		"(sleep 2; touch /workspace/survived) & touch /workspace/busy; sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command to run", func() bool {
		_, err := os.Stat(filepath.Join(ws, "busy"))
		return err == nil
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitCodeOf(cmd.Wait()); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	time.Sleep(3 * time.Second)
	if _, err := os.Stat(filepath.Join(ws, "survived")); err == nil {
		t.Error("a process of the interrupted command survived")
	}
	if out, err := c.command("--sandbox-id", id, "exec", "--", "echo", "still").Output(); err != nil || string(out) != "still\n" {
		t.Errorf("exec after the interrupt: %q, %v", out, err)
	}
	if err := c.command("delete", id).Run(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitFor(t, "the machine to end", func() bool { return syscall.Kill(machine, 0) != nil })
	c.assertNoLeak()
}

// TestEarlyInterruptReusedSandbox signals an exec in a reused sandbox as
// soon as its command runs, before the CLI arms SIGINT and SIGTERM (it
// waits a while on a local machine, which ends a command whose caller
// dies): the CLI ends by the signal itself, and the machine still kills
// the command's whole process group; the sandbox works on. It tries until
// it has seen that early end once (a slow start can arm first, and then
// the exit is 130 and nothing survives either).
func TestEarlyInterruptReusedSandbox(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	id, ws := c.runningSandbox()
	early := false
	tries := 0
	for ; tries < 20 && !early; tries++ {
		busy := filepath.Join(ws, fmt.Sprintf("busy-%d", tries))
		cmd := c.command("--sandbox-id", id, "exec", "--", "sh", "-c",
			fmt.Sprintf("touch /workspace/busy-%d; (sleep 2; touch /workspace/survived-%d) & sleep 60", tries, tries))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(busy); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the command did not start")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
			if sig := ee.Sys().(syscall.WaitStatus).Signal(); sig != syscall.SIGTERM {
				t.Fatalf("the CLI ended by %v, want SIGTERM", sig)
			}
			early = true
		case exitCodeOf(err) == 130: // armed already
		default:
			t.Fatalf("exec after SIGTERM: %v, want an end by SIGTERM or exit 130", err)
		}
	}
	if !early {
		t.Fatalf("in %d tries, the CLI never ended by the signal itself: it armed the signals at once", tries)
	}
	time.Sleep(3 * time.Second)
	for i := range tries {
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("survived-%d", i))); err == nil {
			t.Errorf("try %d: a process of the interrupted command survived", i)
		}
	}
	if out, err := c.command("--sandbox-id", id, "exec", "--", "echo", "still").Output(); err != nil || string(out) != "still\n" {
		t.Errorf("exec after the interrupt: %q, %v", out, err)
	}
	if err := c.command("delete", id).Run(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c.assertNoLeak()
}
