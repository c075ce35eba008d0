//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

func TestExecExitCodes(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	tests := []struct {
		name string
		req  providers.ExecRequest
		want int
	}{
		{"true", providers.ExecRequest{Argv: []string{"true"}}, 0},
		{"exit-3", providers.ExecRequest{Shell: "exit 3"}, 3},
		{"missing-argv", providers.ExecRequest{Argv: []string{"no-such-command-xyz"}}, 127},
		{"missing-shell", providers.ExecRequest{Shell: "no-such-command-xyz"}, 127},
		{"missing-path", providers.ExecRequest{Argv: []string{"/no/such/binary"}}, 127},
		{"not-executable", providers.ExecRequest{Argv: []string{"/etc/hostname"}}, 126},
		{"self-killed", providers.ExecRequest{Shell: "kill -9 $$"}, 128 + 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stderr providertest.Buffer
			tc.req.Stderr = &stderr
			res, err := p.Exec(context.Background(), id, tc.req)
			if err != nil {
				t.Fatalf("Exec: %v (a command that ran must return a nil error)", err)
			}
			if res.ExitCode != tc.want {
				t.Errorf("ExitCode = %d, want %d (stderr %q)", res.ExitCode, tc.want, stderr.String())
			}
			if tc.want >= 126 && tc.want <= 127 && stderr.String() == "" {
				t.Errorf("exit %d without a message on stderr", tc.want)
			}
		})
	}
}

func TestExecBadRequests(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	tests := []struct {
		name string
		req  providers.ExecRequest
		kind error
	}{
		{"no-command", providers.ExecRequest{}, providers.ErrInvalid},
		{"both", providers.ExecRequest{Argv: []string{"true"}, Shell: "true"}, providers.ErrInvalid},
		{"cwd-dotdot", providers.ExecRequest{Argv: []string{"true"}, Cwd: "/workspace/../etc"}, providers.ErrInvalid},
		{"cwd-missing", providers.ExecRequest{Argv: []string{"true"}, Cwd: "/workspace/nope"}, providers.ErrNotFound},
		{"cwd-file", providers.ExecRequest{Argv: []string{"true"}, Cwd: "/etc/hostname"}, providers.ErrInvalid},
		{"network", providers.ExecRequest{Argv: []string{"true"}, Network: "maybe"}, providers.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := p.Exec(context.Background(), id, tc.req)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Exec = %v, want an error matching %v", err, tc.kind)
			}
		})
	}
	if _, err := p.Exec(context.Background(), "sb-aaaaaaaaaa", providers.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Exec on a missing sandbox = %v, want ErrNotFound", err)
	}
}

func TestExecCwdEnvStdin(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{Env: map[string]string{"A": "spec", "B": "spec"}})
	mustRun(t, p, id, "mkdir -p /workspace/sub")
	if got := mustRun(t, p, id, "pwd", func(r *providers.ExecRequest) { r.Cwd = "sub" }); got != "/workspace/sub\n" {
		t.Errorf("pwd with Cwd sub = %q", got)
	}
	got := mustRun(t, p, id, `echo "$A $B $C"`, func(r *providers.ExecRequest) { r.Env = map[string]string{"B": "req", "C": "req"} })
	if got != "spec req req\n" {
		t.Errorf("env = %q, want %q", got, "spec req req\n")
	}
	got = mustRun(t, p, id, "tr a-z A-Z", func(r *providers.ExecRequest) { r.Stdin = strings.NewReader("hello\n") })
	if got != "HELLO\n" {
		t.Errorf("stdin = %q", got)
	}
}

func TestExecEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("SANDBOX_HOST_SECRET", "leak")
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	got := mustRun(t, p, id, "env")
	if strings.Contains(got, "SANDBOX_HOST_SECRET") || strings.Contains(got, "leak") {
		t.Errorf("host environment leaked into the sandbox:\n%s", got)
	}
	for _, want := range []string{"PATH=", "HOME=" + p.home} {
		if !strings.Contains(got, want) {
			t.Errorf("env lacks %s:\n%s", want, got)
		}
	}
}

func TestExecStreams(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	out := &providertest.Buffer{}
	done := make(chan error, 1)
	go func() {
		_, err := p.Exec(context.Background(), id, providers.ExecRequest{Shell: "echo a; sleep 5; echo b", Stdout: out})
		done <- err
	}()
	deadline := time.Now().Add(4 * time.Second)
	for out.String() == "" {
		if time.Now().After(deadline) {
			t.Fatal("no output within 4s of a command that prints at once and then sleeps 5s")
		}
		select {
		case err := <-done:
			t.Fatalf("Exec returned (%v) before the first output was observed", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got := out.String(); got != "a\n" {
		t.Errorf("while the command sleeps stdout = %q, want %q", got, "a\n")
	}
	if err := <-done; err != nil || out.String() != "a\nb\n" {
		t.Errorf("Exec = %v, stdout %q", err, out.String())
	}
}

// workspaceFile is the host path of a file in a sandbox's workspace.
func workspaceFile(p *Provider, id, name string) string {
	return filepath.Join(workspacePath(filepath.Join(p.dir, id)), name)
}

// TestExecTimeoutKillsProcessGroup: a timeout kills the command's process
// group (its background children, nohup or not), not the machine: a
// process that left the group (setsid) lives on, and the next command
// runs. The command's runner lives on too, quietly (it once crashed on
// its next wait, and printed its panic to the command's stderr).
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	start := time.Now()
	r := run(t, p, id, "echo $PPID > /workspace/runner; setsid sh -c '"+waitForGo+"; touch /workspace/escaped' >/dev/null 2>&1 & nohup sh -c '"+waitForGo+"; touch /workspace/nohup' >/dev/null 2>&1 & ("+waitForGo+"; touch /workspace/sub) & touch /workspace/started; sleep 30",
		func(r *providers.ExecRequest) { r.Timeout = 1500 * time.Millisecond })
	if !errors.Is(r.err, providers.ErrTimeout) || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Exec = %v, want ErrTimeout", r.err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if _, err := os.Lstat(workspaceFile(p, id, "started")); err != nil {
		t.Fatalf("the command never ran before the timeout: %v", err)
	}
	if r.stderr != "" {
		t.Errorf("stderr of the timed-out command: %q, want nothing", r.stderr)
	}
	// First of all operations after the timeout: the runner went back
	// to a pool that has room for it (its successor and itself), and
	// this operation takes one of the two. Later operations may find
	// the pool full, and a runner let go then ends, as it should.
	if got := run(t, p, id, "kill -0 $(cat /workspace/runner) 2>&1 && echo alive"); got.stdout != "alive\n" {
		t.Errorf("the timed-out command's runner: %+v, want it alive", got)
	}
	assertNoneSurvived(t, p, id, "nohup", "sub")
	if _, err := os.Lstat(workspaceFile(p, id, "escaped")); err != nil {
		t.Errorf("a process that left the command's group did not live on: %v", err)
	}
	assertRuns(t, p, id, "the command after a timeout")
}

// TestBackgroundSurvivesExec: what a command starts in the background
// (with &, nohup, setsid, a double fork) keeps running after the command
// returned, sees the files of later commands, and is visible to them.
func TestBackgroundSurvivesExec(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	start := time.Now()
	r := run(t, p, id, "setsid sh -c '"+waitForGo+"; touch /workspace/left' >/dev/null 2>&1 & ("+waitForGo+"; touch /workspace/sub) & nohup sh -c '"+waitForGo+"; touch /workspace/nohup' & (sh -c '"+waitForGo+"; touch /workspace/daemon' &) ; echo started")
	if r.err != nil || r.code != 0 || r.stdout != "started\n" {
		t.Fatalf("exec: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("exec waited %v for its background children", d)
	}
	// The subshell that started the "daemon" may still be there for a
	// moment, its sh -c on its way: the count settles at 4.
	var got string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got = strings.TrimSpace(mustRun(t, p, id, "ps -eo args | grep -c '[w]orkspace/go'"))
		if got == "4" || time.Now().After(deadline) {
			break
		}
	}
	if got != "4" {
		t.Errorf("background processes seen by the next command: %q, want 4", got)
	}
	mustRun(t, p, id, "touch /workspace/go")
	deadline := time.Now().Add(5 * time.Second)
	for _, name := range []string{"left", "sub", "nohup", "daemon"} {
		for {
			if _, err := os.Lstat(workspaceFile(p, id, name)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the background process %s did not survive its exec", name)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitForGo is a shell loop that blocks until /workspace/go exists: the
// background children of these tests run it so that they can only leave
// their marker if they are still alive when the test creates the file.
const waitForGo = "while [ ! -e /workspace/go ]; do sleep 0.05; done"

// assertNoneSurvived creates /workspace/go and checks, a second later, that
// no child left one of the named markers in the workspace.
func assertNoneSurvived(t *testing.T, p *Provider, id string, markers ...string) {
	t.Helper()
	setGo(t, p, id, true)
	time.Sleep(time.Second)
	for _, name := range markers {
		if _, err := os.Lstat(workspaceFile(p, id, name)); err == nil {
			t.Errorf("a background process (%s) survived", name)
		}
	}
}

// setGo makes (on) or removes the file /workspace/go that waitForGo waits
// for: through the sandbox while its machine runs (overlayfs may miss, or
// refuse with ESTALE, what the host changes in a mounted layer), else on
// the host, which leaves the sandbox stopped.
func setGo(t *testing.T, p *Provider, id string, on bool) {
	t.Helper()
	if _, running := liveMachine(filepath.Join(p.dir, id)); running {
		if on {
			writeString(t, p, id, "/workspace/go", "")
		} else {
			mustRun(t, p, id, "rm /workspace/go")
		}
		return
	}
	var err error
	if on {
		err = os.WriteFile(workspaceFile(p, id, "go"), nil, 0o644)
	} else {
		err = os.Remove(workspaceFile(p, id, "go"))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestExecCancel(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "sleep 30"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, providers.ErrTimeout) {
		t.Fatalf("Exec = %v, want context.Canceled", err)
	}
}

func TestOverlayPersistsAndHostUnchanged(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	name := "sandbox-test-" + id
	// As root, the sandbox's root changes the host's system directories
	// in its layer. An unprivileged host user's sandbox does not map the
	// host's root (with subordinate ids or without): what the host's root
	// owns there belongs to no user of the sandbox and stays read-only
	// to all of them; the sandbox's own /var/tmp (see privateVarTmp),
	// mode 1777, takes anyone's files into its layer.
	dirs := []string{"/var/tmp"}
	if os.Getuid() == 0 {
		dirs = append(dirs, "/usr/local")
		mustRun(t, p, id, "rm -rf /usr/share/doc && echo ok > /etc/"+name)
		if got := mustRun(t, p, id, "test -e /usr/share/doc || echo gone; cat /etc/"+name); got != "gone\nok\n" {
			t.Errorf("second exec sees %q", got)
		}
	} else {
		users := []string{""}
		if p.host().uids.ranged() {
			users = append(users, "root")
		}
		for _, u := range users {
			r := run(t, p, id, "echo x > /usr/local/"+name+" 2>/dev/null; rm -rf /usr/share/doc 2>/dev/null; test -d /usr/share/doc && echo kept",
				func(r *providers.ExecRequest) { r.User = u })
			if r.stdout != "kept\n" || run(t, p, id, "test -e /usr/local/"+name).code == 0 {
				t.Errorf("user %q of an unprivileged host user's sandbox changed what the host's root owns: %q", u, r.stdout)
			}
		}
	}
	for _, d := range dirs {
		mustRun(t, p, id, "echo installed > "+d+"/"+name)
		if got := mustRun(t, p, id, "cat "+d+"/"+name); got != "installed\n" {
			t.Errorf("second exec sees %q in %s", got, d)
		}
	}
	for _, host := range []string{"/usr/local/" + name, "/etc/" + name, "/var/tmp/" + name} {
		if _, err := os.Lstat(host); err == nil {
			t.Errorf("the host got %s", host)
		}
	}
	if _, err := os.Stat("/usr/share/doc"); err != nil {
		t.Errorf("host /usr/share/doc: %v", err)
	}
	// A second sandbox does not see the first one's layer.
	other := newSandbox(t, p, providers.Spec{})
	if r := run(t, p, other, "test -e /var/tmp/"+name+" || test -e /usr/local/"+name); r.code == 0 {
		t.Error("another sandbox sees the first one's install")
	}
}

func TestIsolationView(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	if os.Getuid() == 0 {
		// Something of the host's /root that must stay invisible.
		marker, err := os.CreateTemp("/root", ".sandbox-host-marker-")
		if err != nil {
			t.Fatal(err)
		}
		marker.Close()
		t.Cleanup(func() { os.Remove(marker.Name()) })
	}

	// /home holds nothing of the host: only the user's own HOME when
	// that is where it lives.
	ownHome := ""
	if h, ok := strings.CutPrefix(p.home, "/home/"); ok {
		ownHome = h + " "
	}
	// A host process with a mark on its command line; the pattern the
	// sandbox greps for does not match itself.
	mark := strconv.FormatInt(time.Now().UnixNano(), 10)
	host := exec.Command("sleep", "600."+mark)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	hostMark := "'600[.]" + mark + "'"
	checks := []struct {
		name, shell, want string
	}{
		// Unreadable, or (root) the sandbox's own copy without hashes.
		{"shadow", `awk -F: '$2 != "*"' /etc/shadow 2>/dev/null | wc -l`, "0\n"},
		{"gshadow", `awk -F: '$2 != "*"' /etc/gshadow 2>/dev/null | wc -l`, "0\n"},
		{"host-root", "ls -A /root | grep -c sandbox-host-marker || true", "0\n"},
		{"host-home", "ls -A /home 2>/dev/null | tr '\\n' ' '", ownHome},
		{"no-sys", "test -e /sys/class/net && echo present || echo absent", "absent\n"},
		{"caps", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u", "0000000000000000\n"},
		{"nnp", "grep NoNewPrivs /proc/self/status | awk '{print $2}'", "1\n"},
		// The host's processes are not there: neither this test's
		// marker process nor the test itself (as a command line).
		{"pids", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c " + hostMark + " || true", "0\n"},
		{"hostname", "hostname; cat /etc/hostname", "sandbox\nsandbox\n"},
		{"fds", "ls /proc/self/fd | tr '\\n' ' '", "0 1 2 3 "},
		{"init-exe", "cat /proc/1/environ >/dev/null 2>&1 && echo open || echo denied", "denied\n"},
		{"landlock-proc", "(echo x > /proc/self/comm) 2>/dev/null && echo written || echo denied", "denied\n"},
		{"root-writable", "(touch /newfile && mkdir -p /srv/app /data) 2>/dev/null && echo written || echo denied", "written\n"},
		{"proc-readonly", "(echo 1 > /proc/sys/kernel/ns_last_pid) 2>/dev/null && echo written || echo denied", "denied\n"},
		{"mount", "(mount -t tmpfs none /tmp) 2>/dev/null && echo mounted || echo denied", "denied\n"},
		{"no-tty", "(: > /dev/tty) 2>/dev/null && echo tty || echo none", "none\n"},
		{"tmp-writable", "echo x > /tmp/f && cat /tmp/f", "x\n"},
		{"devnull", "echo x > /dev/null && echo ok", "ok\n"},
		// (libmount, run by the mount check beside, may make
		// /run/mount for its table.)
		{"run-empty", "ls -A /run | grep -vx mount | wc -l", "0\n"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, p, id, c.shell)
			if r.err != nil || r.stdout != c.want {
				t.Errorf("%s: stdout %q, err %v, stderr %q; want %q", c.shell, r.stdout, r.err, r.stderr, c.want)
			}
		})
	}
	t.Run("tmp-private", func(t *testing.T) {
		t.Parallel()
		mustRun(t, p, id, "echo x > /tmp/sandbox-private-"+id)
		if _, err := os.Stat("/tmp/sandbox-private-" + id); err == nil {
			t.Error("sandbox /tmp reached the host")
		}
		if r := run(t, p, id, "test -e /tmp/sandbox-private-"+id); r.code != 0 {
			t.Error("/tmp did not persist into the next exec")
		}
	})
	t.Run("home-persists", func(t *testing.T) {
		t.Parallel()
		mustRun(t, p, id, "echo kept > ~/.profile-test")
		if got := mustRun(t, p, id, "cat "+p.home+"/.profile-test"); got != "kept\n" {
			t.Errorf("HOME did not persist: %q", got)
		}
	})
}

// listener accepts connections on the host's loopback until t ends.
func listener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acceptAndClose(t, ln)
	return ln.Addr().(*net.TCPAddr).Port
}

// acceptAndClose accepts and closes every connection to ln until t ends.
func acceptAndClose(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func TestNetwork(t *testing.T) {
	t.Parallel()
	port := listener(t)
	p := newTestProvider(t)
	probe := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>&1 && echo connected || true", port)

	off := newSandbox(t, p, providers.Spec{})
	if got := mustRun(t, p, off, probe); strings.Contains(got, "connected") || !strings.Contains(got, "refused") {
		// "refused" rather than "unreachable": loopback is up inside.
		t.Errorf("network off: %q, want a refused connection", got)
	}
	if got := mustRun(t, p, off, probe, func(r *providers.ExecRequest) { r.Network = providers.NetworkOn }); !strings.Contains(got, "connected") {
		t.Errorf("network on for one command: %q, want connected", got)
	}
	on := newSandbox(t, p, providers.Spec{Network: providers.NetworkOn})
	if got := mustRun(t, p, on, probe); !strings.Contains(got, "connected") {
		t.Errorf("network on: %q, want connected", got)
	}
	if got := mustRun(t, p, on, "cat /etc/resolv.conf"); got == "" {
		hostResolv, _ := os.ReadFile("/etc/resolv.conf")
		if len(hostResolv) > 0 {
			t.Errorf("network on: /etc/resolv.conf is empty, the host's is %q", hostResolv)
		}
	}
	if got := mustRun(t, p, off, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/1' 2>&1 || true"); !strings.Contains(got, "refused") {
		t.Errorf("loopback inside: %q, want connection refused (lo up)", got)
	}
}

// slowWriter counts what it takes, a small write at a time with a pause
// after each, like a caller that reads its output slowly.
type slowWriter struct {
	n int64
	h hash.Hash
}

func (w *slowWriter) Write(b []byte) (int, error) {
	for rest := b; len(rest) > 0; {
		n := min(len(rest), 64<<10)
		w.h.Write(rest[:n])
		w.n += int64(n)
		rest = rest[n:]
		time.Sleep(time.Millisecond)
	}
	return len(b), nil
}

// TestSlowReaderGetsAllOutput: a caller that reads slower than the command
// writes holds the command back (its output pipes fill) and still gets
// every byte of both streams, in order: a relay whose move found its
// caller's end full must wait, not give up.
func TestSlowReaderGetsAllOutput(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	const size = 16 << 20
	out, errw := &slowWriter{h: sha256.New()}, &slowWriter{h: sha256.New()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := fmt.Sprintf("seq 1 %d | head -c %d; seq 1 %d | head -c %d >&2", size, size, size, size)
	res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: cmd, Stdout: out, Stderr: errw})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: exit %d, err %v", res.ExitCode, err)
	}
	want := sha256.Sum256([]byte(mustRun(t, p, id, fmt.Sprintf("seq 1 %d | head -c %d", size, size))))
	for name, w := range map[string]*slowWriter{"stdout": out, "stderr": errw} {
		if w.n != size || !bytes.Equal(w.h.Sum(nil), want[:]) {
			t.Errorf("%s: got %d bytes (sum %x), want %d (sum %x)", name, w.n, w.h.Sum(nil), size, want)
		}
	}
}
