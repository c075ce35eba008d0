//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// TestEscapeOracleBwrap runs the same attacks under bubblewrap, with the
// command line the benchmarks compare against, and under the local
// provider: whatever bwrap denies, the local sandbox must deny too.
func TestEscapeOracleBwrap(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bwrap (Debian package bubblewrap, installed by scripts/test) is the oracle of this test: %v", err)
	}
	e := newEscapeEnv(t)
	ws := worldDir(t)
	probe, err := os.ReadFile(e.probe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "probe"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		// bwrap binds ws in the unprivileged run too.
		if err := os.Chmod(ws, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	envSecret := token(t)
	attacks := []struct {
		name, cmd string
		// ownLayer marks writes that the local sandbox sends to its
		// own persistent layer by design (bwrap's root is read-only):
		// only the host check afterwards decides.
		ownLayer bool
	}{
		{name: "write-workspace", cmd: `echo x > $W/ok$T`},         // sanity: allowed in both
		{name: "write-root", cmd: `echo x > /o$T`, ownLayer: true}, // the machine's root is its own layer
		{name: "write-etc", cmd: `echo x > /etc/o$T && test -e /etc/o$T`, ownLayer: true},
		{name: "read-shadow", cmd: `cat /etc/shadow | grep -q .`},
		{name: "read-host-secret", cmd: `cat $S | grep -q .`},
		{name: "mount-tmpfs", cmd: `mount -t tmpfs none /tmp`},
		{name: "remount-rw", cmd: `mount -o remount,rw /`},
		{name: "nested-userns", cmd: `unshare -Ur true`},
		{name: "nested-userns-remount", cmd: `unshare -Urm mount -o remount,rw /`},
		{name: "ptrace", cmd: `$P ptrace-child | grep -q ok`},
		{name: "process-vm-readv", cmd: `$P vm-readv | grep -q ok`},
		{name: "keyctl", cmd: `$P keyctl | grep -q ok`},
		{name: "io-uring", cmd: `$P io_uring_setup | grep -q ok`},
		{name: "userfaultfd", cmd: `$P userfaultfd | grep -q ok`},
		{name: "tiocsti", cmd: `$P tiocsti | grep -q ok`},
		{name: "proc1-environ", cmd: `cat /proc/1/environ | grep -q .`},
		{name: "kill-host-pid", cmd: `kill -0 $HP`},
		{name: "host-loopback", cmd: `$P connect-tcp 127.0.0.1:$PORT | grep -q ok`},
		{name: "host-abstract-socket", cmd: `$P connect-unix $ABS | grep -q ok`},
		{name: "host-agent-socket", cmd: `$P connect-unix $SOCK | grep -q ok`},
		{name: "sys-class-net", cmd: `ls /sys/class/net | grep -qv '^lo$'`},
		{name: "hardlink-passwd", cmd: `ln /etc/passwd $W/h$T`},
		{name: "mknod", cmd: `mknod $W/n$T c 1 3`},
		{name: "proc-self-comm", cmd: `echo x > /proc/self/comm`},
		{name: "proc-sys", cmd: `echo 1 > /proc/sys/kernel/ns_last_pid`},
		{name: "capabilities", cmd: `grep CapEff /proc/self/status | grep -qv 0000000000000000`},
		{name: "host-env", cmd: `env | grep -q ` + envSecret},
		{name: "network", cmd: `$P connect-tcp 1.1.1.1:53 | grep -q ok`},
	}
	t.Setenv("SANDBOX_ORACLE_SECRET", envSecret)
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			tok := e.token + "o" + a.name
			script := denyShell(a.cmd)
			vars := map[string]string{"T": tok, "S": e.secret, "HP": strconv.Itoa(os.Getpid()),
				"PORT": strconv.Itoa(e.hostPort), "ABS": e.abstract, "SOCK": e.pathSock}
			// bwrap, as the benchmark runs it, plus a
			// workspace and the variables.
			args := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
				"--bind", ws, "/tmp/ws", "--setenv", "W", "/tmp/ws", "--setenv", "P", "/tmp/ws/probe"}
			for k, v := range vars {
				args = append(args, "--setenv", k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bwrap, append(args, "sh", "-c", script)...).Output()
			if err != nil {
				t.Fatalf("bwrap: %v", err)
			}
			theirs := strings.TrimSpace(string(out))
			vars["W"], vars["P"] = "/workspace", "/workspace/probe"
			r := run(t, e.p, e.id, script, func(r *providers.ExecRequest) { r.Env = vars })
			ours := strings.TrimSpace(r.stdout)
			t.Logf("bwrap %s, local %s", theirs, ours)
			if r.err != nil || (ours != "denied" && ours != "allowed") {
				t.Fatalf("local: %q, %v", r.stdout, r.err)
			}
			if a.name == "write-workspace" && (theirs != "allowed" || ours != "allowed") {
				t.Errorf("the control attack must work in both: bwrap %s, local %s", theirs, ours)
			}
			if theirs == "denied" && ours != "denied" && !a.ownLayer {
				t.Errorf("weaker than bwrap: bwrap denies %q, the local sandbox allows it", a.cmd)
			}
			e.assertHostClean(t, tok)
		})
	}
}
