package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// builtCloud is the program sandbox-cloud, compiled beside the program
// sandbox (see built), where the hand-over looks for it.
func builtCloud() (string, error) {
	bin, err := built()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(bin), "sandbox-cloud"), nil
}

// TestModalHandOver checks that the program sandbox, which does not link
// Modal's SDK, hands every run that uses Modal to sandbox-cloud beside
// it, unchanged: `serve --api modal` becomes sandbox-cloud's emulator (the
// same process: its executable is sandbox-cloud's), and `--sandbox modal
// exec` against it runs the command in a Modal sandbox, stdin, exit
// status and all, and `run --json` of a plan streams its events once.
// Without sandbox-cloud, a run exits 125 and says what to install.
func TestModalHandOver(t *testing.T) {
	if _, err := builtCloud(); err != nil {
		t.Fatal(err)
	}
	c := newRunner(t, buildBinary(t))
	env, pid := startServe(t, c, 3, "--api", "modal")
	if env["MODAL_SERVER_URL"] == "" || env["MODAL_TOKEN_ID"] == "" || env["MODAL_TOKEN_SECRET"] == "" {
		t.Fatalf("serve --api modal printed %v, want MODAL_SERVER_URL, MODAL_TOKEN_ID and MODAL_TOKEN_SECRET", env)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil || filepath.Base(exe) != "sandbox-cloud" {
		t.Errorf("serve --api modal runs %q (%v), want sandbox-cloud", exe, err)
	}

	modal := func(bin string, stdin string, args ...string) (int, string, string) {
		cmd := exec.Command(bin, append([]string{"--sandbox", "modal"}, args...)...)
		cmd.Dir, cmd.Env = c.dir, c.command().Env
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if bin != c.bin {
			// Not one found on the developer's PATH either.
			cmd.Env = append(cmd.Env, "PATH=/usr/bin:/bin")
		}
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return exitCodeOf(err), stdout.String(), stderr.String()
	}
	code, out, errOut := modal(c.bin, "from stdin", "exec", "--", "sh", "-c", "cat; echo; echo on modal; exit 7")
	if code != 7 || out != "from stdin\non modal\n" {
		t.Errorf("--sandbox modal exec: exit %d, stdout %q, stderr %q; want 7 and the command's output", code, out, errOut)
	}

	// A plan, handed over too: its events are sandbox-cloud's, once.
	plan := filepath.Join(c.dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("steps:\n  - write: {path: /workspace/n.txt, content: \"via modal\"}\n  - read: /workspace/n.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = modal(c.bin, "", "run", plan, "--yes", "--json")
	if code != 0 || strings.Count(out, `"type":"run.started"`) != 1 || !strings.Contains(out, `"data":"via modal"`) || !strings.Contains(out, `"provider":"modal"`) {
		t.Errorf("--sandbox modal run --json: exit %d, stdout %s, stderr %s", code, out, errOut)
	}

	// A plan on stdin is read by the program it is handed to, not before.
	code, out, errOut = modal(c.bin, `{"exec":"echo piped plan"}`+"\n", "run", "-", "--yes")
	if code != 0 || out != "piped plan\n" {
		t.Errorf("--sandbox modal run - (plan on stdin): exit %d, stdout %q, stderr %s", code, out, errOut)
	}

	// The emulator's local sandboxes run inits of the program sandbox,
	// not of sandbox-cloud: a kept one is still running.
	if code, out, errOut := modal(c.bin, "", "--keep", "exec", "--", "true"); code != 0 {
		t.Fatalf("--sandbox modal --keep exec: exit %d, %s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		// Handed over too: the Modal sandbox is recorded.
		if code, out, errOut := modal(c.bin, "", "delete", "--all"); code != 0 {
			t.Errorf("delete --all: exit %d, %s%s", code, out, errOut)
		}
	})
	pids, _ := filepath.Glob(filepath.Join(c.state, "sandbox", "local", "sb-*", "machine.pid"))
	if len(pids) == 0 {
		t.Fatal("the emulator's sandbox has no running machine")
	}
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || filepath.Base(exe) != "sandbox" {
			t.Errorf("the init of %s runs %q (%v), want the program sandbox", filepath.Dir(f), exe, err)
		}
	}

	// The program alone: nothing to hand over to.
	alone := aloneCopy(t, c.bin)
	code, _, errOut = modal(alone, "", "exec", "--", "true")
	if code != 125 || !strings.Contains(errOut, "install sandbox-cloud beside this program or on PATH") {
		t.Errorf("--sandbox modal without sandbox-cloud: exit %d, stderr %q; want 125 and what to install", code, errOut)
	}
}

// aloneCopy copies the program bin into a directory of its own, where no
// sandbox-cloud is beside it, and returns the copy's path.
func aloneCopy(t *testing.T, bin string) string {
	t.Helper()
	alone := filepath.Join(t.TempDir(), "sandbox")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return alone
}
