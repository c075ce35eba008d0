package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitProgram checks that local sandboxes get their inits from
// sandbox-init beside sandbox when it is of the same build, and from
// sandbox itself when it is missing or of another build (its linker flags
// differ here); and that sandbox-init run by hand says what it is for.
func TestInitProgram(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	tests := []struct {
		name    string
		ldflags string // of sandbox-init; "-" builds none
		want    string
	}{
		{"same build", "", "sandbox-init"},
		{"other build", "-X main.other=1", "sandbox"},
		{"none", "-", "sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sandbox"), b, 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.ldflags != "-" {
				out, err := exec.Command("go", "build", "-ldflags="+tt.ldflags, "-o", filepath.Join(dir, "sandbox-init"), "../sandbox-init").CombinedOutput()
				if err != nil {
					t.Fatalf("go build sandbox-init: %v\n%s", err, out)
				}
			}
			c := newRunner(t, filepath.Join(dir, "sandbox"))
			out, err := c.command("create").Output()
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			id := strings.TrimSpace(string(out))
			defer func() {
				if out, err := c.command("delete", id).CombinedOutput(); err != nil {
					t.Errorf("delete: %v\n%s", err, out)
				}
			}()
			if out, err := c.command("--sandbox-id", id, "exec", "--", "echo", "ran").Output(); err != nil || string(out) != "ran\n" {
				t.Fatalf("exec: %q, %v", out, err)
			}
			pidFile, err := os.ReadFile(filepath.Join(c.state, "sandbox", "local", id, "machine.pid"))
			if err != nil {
				t.Fatal(err)
			}
			pid, _, _ := strings.Cut(strings.TrimSpace(string(pidFile)), " ")
			if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || filepath.Base(exe) != tt.want {
				t.Errorf("the machine's init runs %q (%v), want %s", exe, err, tt.want)
			}
		})
	}
	t.Run("by hand", func(t *testing.T) {
		helper := filepath.Join(t.TempDir(), "sandbox-init")
		if out, err := exec.Command("go", "build", "-o", helper, "../sandbox-init").CombinedOutput(); err != nil {
			t.Fatalf("go build sandbox-init: %v\n%s", err, out)
		}
		out, err := exec.Command(helper).CombinedOutput()
		if code := exitCodeOf(err); code != 2 || !strings.Contains(string(out), "run sandbox instead") {
			t.Errorf("sandbox-init by hand: exit %d, %q; want 2 and what to run", code, out)
		}
	})
}
