//go:build linux

package local

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// The escape suite: every attack of the 39-item checklist in
// ../shared/reference/local-isolation.md §2 (the numbers are the checklist's),
// run as whoever runs the tests and, when that is root, once more as an
// unprivileged user (TestEscapeUnprivileged). Each row asserts the outcome
// inside the sandbox and, afterwards, that the host is unchanged: no file
// carrying the row's token appeared in the host directories a sandbox could
// aim at, and the watched host files kept their contents.

// escapeEnv is what the rows share.
type escapeEnv struct {
	p     *Provider
	id    string // the shared sandbox
	root  bool
	token string // base token; each row appends its id
	// probe is the host path of the compiled probe program, copied into
	// each sandbox's workspace as /workspace/probe.
	probe string
	// secretDir is a host directory holding a planted secret file.
	secretDir, secret string
	// watched are host files whose contents must never change.
	watched map[string]string
	// hostPort is a TCP listener on the host's loopback.
	hostPort int
	// abstract and pathSock are host Unix listeners.
	abstract, pathSock string
	// hostMark is a pattern matching only the command line of a host
	// process started for the suite.
	hostMark string
}

// escapeCase is one row of the checklist.
type escapeCase struct {
	id   int
	name string
	// shell runs inside the sandbox with $T (the row's token), $P (the
	// probe), $S (the host's secret file), $HP (a host pid), $HM (a
	// pattern matching a host process's command line), $PORT (the host
	// listener), $ABS and $SOCK (host Unix sockets) set.
	shell string
	// want is the expected stdout; wantRoot replaces it when the tests
	// run as root.
	want, wantRoot string
	// own runs the row in a sandbox of its own, created with spec.
	own  bool
	spec providers.Spec
	// check runs host-side steps and assertions of the row (instead of,
	// or after, shell).
	check func(t *testing.T, e *escapeEnv, id string, token string)
}

// probeEnvVar passes the compiled probe from TestEscapeUnprivileged to the
// test binary it starts.
const probeEnvVar = "SANDBOX_ESCAPE_PROBE"

// buildProbe compiles testdata/probe.c into a world-readable directory.
func buildProbe(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(probeEnvVar); p != "" {
		return p
	}
	dir := worldDir(t)
	out := filepath.Join(dir, "probe")
	src, err := filepath.Abs("testdata/probe.c")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gcc", "-O1", "-Wall", "-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc probe.c: %v\n%s", err, b)
	}
	return out
}

// worldDir is a temporary directory others may enter (the unprivileged
// run reads the probe and test binary from it).
func worldDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Parents created by TempDir are 0700.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// token returns a random marker for file names.
func token(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sbx" + hex.EncodeToString(b)
}

// hashFile returns the sha256 of a file ("" if unreadable).
func hashFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hostDirsToWatch are the host directories in which a row's token must
// never appear.
func (e *escapeEnv) hostDirsToWatch() []string {
	dirs := []string{"/", "/etc", "/usr", "/usr/local", "/usr/bin", "/var", "/var/tmp", "/opt", "/tmp", "/dev/shm", e.secretDir}
	if h := os.Getenv("HOME"); h != "" {
		dirs = append(dirs, h)
	}
	if e.root {
		dirs = append(dirs, "/root")
	}
	return dirs
}

// assertHostClean checks that nothing named with tok appeared on the host
// and that no watched file changed.
func (e *escapeEnv) assertHostClean(t *testing.T, tok string) {
	t.Helper()
	for _, d := range e.hostDirsToWatch() {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, en := range entries {
			if strings.Contains(en.Name(), tok) {
				t.Errorf("host changed: %s appeared", filepath.Join(d, en.Name()))
			}
		}
	}
	for path, sum := range e.watched {
		if got := hashFile(path); got != sum {
			t.Errorf("host changed: %s has new contents", path)
		}
	}
}

// newEscapeEnv builds the shared state of the suite.
func newEscapeEnv(t *testing.T) *escapeEnv {
	t.Helper()
	e := &escapeEnv{root: os.Getuid() == 0, token: token(t), probe: buildProbe(t)}
	e.p = newTestProvider(t)
	e.id = newSandbox(t, e.p, providers.Spec{})
	e.installProbe(t, e.id)

	// A host process whose command line the sandbox must not see.
	nonce := strconv.FormatInt(time.Now().UnixNano(), 10)
	marked := exec.Command("sleep", "600."+nonce)
	if err := marked.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = marked.Process.Kill(); _ = marked.Wait() })
	e.hostMark = "600[.]" + nonce

	// A secret on the host, outside anything the sandbox mounts.
	e.secretDir = t.TempDir()
	e.secret = filepath.Join(e.secretDir, "secret-"+e.token)
	if err := os.WriteFile(e.secret, []byte("host secret "+e.token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.watched = map[string]string{}
	for _, f := range []string{"/etc/passwd", "/etc/hosts", "/etc/hostname", "/etc/group", e.secret, e.probe, filepath.Join(os.Getenv("HOME"), ".bashrc")} {
		if h := hashFile(f); h != "" {
			e.watched[f] = h
		}
	}
	if e.root {
		e.watched["/etc/shadow"] = hashFile("/etc/shadow")
	}
	e.hostPort = listener(t)
	// Host Unix listeners: an abstract one, and a pathname one in the
	// host's /tmp (where agent sockets live).
	e.abstract = "@sandbox-escape-" + e.token
	e.pathSock = filepath.Join(t.TempDir(), "agent.sock")
	for _, addr := range []string{e.abstract, e.pathSock} {
		name := addr
		if strings.HasPrefix(name, "@") {
			name = "\x00" + name[1:]
		}
		ln, err := net.Listen("unix", name)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		acceptAndClose(t, ln)
	}
	return e
}

// installProbe copies the probe into a sandbox's workspace from the host.
func (e *escapeEnv) installProbe(t *testing.T, id string) {
	t.Helper()
	b, err := os.ReadFile(e.probe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(workspaceFile(e.p, id, "probe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// runRow runs a row's shell in sandbox id with the suite's variables.
func (e *escapeEnv) runRow(t *testing.T, id, tok, shell string, mod ...func(*providers.ExecRequest)) result {
	t.Helper()
	env := map[string]string{
		"T": tok, "P": "/workspace/probe", "S": e.secret, "HP": strconv.Itoa(os.Getpid()),
		"PORT": strconv.Itoa(e.hostPort), "ABS": e.abstract, "SOCK": e.pathSock, "HM": e.hostMark,
	}
	return run(t, e.p, id, shell, append([]func(*providers.ExecRequest){func(r *providers.ExecRequest) { r.Env = env }}, mod...)...)
}

// denyShell prints "denied" when cmd fails and "allowed" when it succeeds.
func denyShell(cmd string) string {
	return "if (" + cmd + ") >/dev/null 2>&1; then echo allowed; else echo denied; fi"
}

// escapeCases is the checklist.
func escapeCases() []escapeCase {
	probeAll := func(ops ...string) string {
		var b strings.Builder
		for _, op := range ops {
			fmt.Fprintf(&b, "printf '%s: '; $P %s; ", op, op)
		}
		return b.String()
	}
	probeWant := func(want string, ops ...string) string {
		var b strings.Builder
		for _, op := range ops {
			fmt.Fprintf(&b, "%s: %s\n", op, want)
		}
		return b.String()
	}
	mountOps := []string{"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr"}
	kernelOps := []string{"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"}
	return []escapeCase{
		// Filesystem, from inside.
		{id: 1, name: "write-host-paths",
			// Chosen differently: the sandbox is a machine whose
			// whole root is its own writable layer; root writes into
			// it (installs persist there). An unprivileged user owns
			// the root and the top of each layer, so it may create
			// files directly in /, /etc, /usr or /opt, but nothing
			// below the host's root-owned directories (overlayfs
			// cannot copy them up). /var/tmp is the sandbox's own
			// (open to all, like the host's, which it never shows).
			// /sys is not there to write into, nor /home for root
			// (its HOME is /root; a user's home is under /home).
			// Nobody reaches the host.
			shell:    `for d in /etc /usr /usr/local /var/tmp /opt / /home /sys; do if (echo x > $d/w$T) 2>/dev/null; then echo "$d layer"; else echo "$d denied"; fi; done`,
			want:     "/etc layer\n/usr layer\n/usr/local denied\n/var/tmp layer\n/opt layer\n/ layer\n/home layer\n/sys denied\n",
			wantRoot: "/etc layer\n/usr layer\n/usr/local layer\n/var/tmp layer\n/opt layer\n/ layer\n/home denied\n/sys denied\n",
			check: func(t *testing.T, e *escapeEnv, id, tok string) {
				// What was written is in the sandbox's upper layer.
				for _, p := range []string{"etc", "usr", "opt", rootLayerName, "var/tmp"} {
					if _, err := os.Lstat(filepath.Join(e.p.dir, id, upperDir, p, "w"+tok)); err != nil {
						t.Errorf("write to /%s is not in the sandbox's layer: %v", p, err)
					}
				}
				if _, err := os.Lstat("/w" + tok); err == nil {
					t.Errorf("a write to the sandbox's / reached the host's")
				}
			}},
		{id: 2, name: "write-workspace",
			shell: `echo hello > /workspace/w$T && echo ok`, want: "ok\n",
			check: func(t *testing.T, e *escapeEnv, id, tok string) {
				if b, err := os.ReadFile(workspaceFile(e.p, id, "w"+tok)); err != nil || string(b) != "hello\n" {
					t.Errorf("workspace write not on the host: %q, %v", b, err)
				}
			}},
		{id: 3, name: "tmp-private",
			// Chosen differently: /tmp is the machine's, kept from one
			// command to the next and cleared when it stops (a
			// reboot); never the host's.
			shell: `echo x > /tmp/t$T && cat /tmp/t$T`, want: "x\n",
			check: func(t *testing.T, e *escapeEnv, id, tok string) {
				if _, err := os.Lstat("/tmp/t" + tok); err == nil {
					t.Errorf("the sandbox's /tmp is the host's")
				}
				if r := e.runRow(t, id, tok, `test -e /tmp/t$T && echo kept || echo gone`); r.stdout != "kept\n" {
					t.Errorf("/tmp after the exec: %q, want kept", r.stdout)
				}
				// A stop of a sandbox of its own: the rows run at once
				// in the shared one, whose commands a stop would end.
				own := newSandbox(t, e.p, providers.Spec{})
				if r := e.runRow(t, own, tok, `echo x > /tmp/t$T && test -e /tmp/t$T && echo kept || echo gone`); r.stdout != "kept\n" {
					t.Errorf("/tmp after the exec: %q, want kept", r.stdout)
				}
				stopSandbox(t, e.p, own)
				if r := e.runRow(t, own, tok, `test -e /tmp/t$T && echo kept || echo gone`); r.stdout != "gone\n" {
					t.Errorf("/tmp after a stop: %q, want gone", r.stdout)
				}
			}},
		{id: 4, name: "dev-minimal",
			shell: `for n in null zero full random urandom tty; do test -c /dev/$n || echo "not a device: $n"; done; echo x > /dev/null && ls /dev | tr '\n' ' '`,
			want:  "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "},
		{id: 5, name: "symlink-write-out",
			shell: `ln -s /w$T /workspace/l$T && ` + denyShell(`echo x > /workspace/l$T`) + `; ln -s /etc/passwd /workspace/p$T && ` + denyShell(`echo x >> /workspace/p$T`),
			// The link's target is the sandbox's own /, never the
			// host's (checked); root may append to its own layer's
			// copy of /etc/passwd; the host's is watched.
			want: "allowed\ndenied\n", wantRoot: "allowed\nallowed\n",
			check: func(t *testing.T, e *escapeEnv, id, tok string) {
				if _, err := os.Lstat("/w" + tok); err == nil {
					t.Errorf("a write through a link to / reached the host's /")
				}
			}},
		{id: 6, name: "hardlink-host-file",
			shell: denyShell(`ln /etc/passwd /workspace/h$T`) + "; " + denyShell(`ln /usr/bin/true /workspace/h2$T`), want: "denied\ndenied\n"},
		{id: 7, name: "mknod-and-setuid",
			shell: denyShell(`mknod /workspace/n$T c 1 3`) + `; cp /bin/cat /workspace/c$T && chmod 4755 /workspace/c$T && /workspace/c$T /proc/self/status | grep -E '^(Uid|CapEff)' | awk '{print $1, ($1 == "Uid:") ? $3 : $2}'; id -u`,
			want:  "denied\nUid: " + strconv.Itoa(os.Getuid()) + "\nCapEff: 0000000000000000\n" + strconv.Itoa(os.Getuid()) + "\n"},
		{id: 8, name: "read-hidden",
			// Root reads its own copies of the shadow files, with no
			// password hash in them (see etcBase).
			shell: `for f in $S; do if cat $f 2>/dev/null | grep -q .; then echo "read $f"; fi; done; for f in /etc/shadow /etc/gshadow; do awk -F: '$2 != "*" {print FILENAME ": " $1}' $f 2>/dev/null; done; echo done`,
			want:  "done\n",
			check: func(t *testing.T, e *escapeEnv, id, tok string) {
				if !e.root {
					return
				}
				// Root's copy lists the host's users and groups.
				for _, f := range []string{"/etc/shadow", "/etc/gshadow"} {
					host, err := os.ReadFile(f)
					if err != nil {
						continue
					}
					r := e.runRow(t, id, tok, "cut -d: -f1 "+f)
					var names []string
					for _, l := range strings.Split(strings.TrimSpace(string(host)), "\n") {
						names = append(names, strings.Split(l, ":")[0])
					}
					if r.stdout != strings.Join(names, "\n")+"\n" {
						t.Errorf("root's %s lists %q, the host's %q", f, r.stdout, names)
					}
				}
			}},
		{id: 9, name: "workspace-metadata",
			// Chosen differently: the workspace is the sandbox's own
			// copy (uploaded into it), not the user's checkout, so
			// .git and rc files in it are the sandbox's to change; the
			// host's own files stay untouched (watched).
			shell: `mkdir -p /workspace/.git/hooks && echo x > /workspace/.git/hooks/pre-commit && echo x > /workspace/.git/config && echo x >> ~/.bashrc && echo ok`,
			want:  "ok\n"},
		{id: 10, name: "masked-not-scratch", own: true,
			// Root's /etc/gshadow is its own sanitized copy: writing it
			// changes the sandbox's layer only (the host's is watched).
			// /proc and /dev are read-only mounts; the rest of the
			// root is the sandbox's own (row 1).
			shell:    denyShell(`echo x >> /etc/gshadow`) + "; " + denyShell(`touch /proc/x$T`) + "; " + denyShell(`touch /dev/x$T`) + "; " + denyShell(`echo x > /etc/shadow`),
			want:     "denied\ndenied\ndenied\ndenied\n",
			wantRoot: "allowed\ndenied\ndenied\nallowed\n"},
		{id: 11, name: "proc-writes",
			shell: denyShell(`echo x > /proc/self/comm`) + "; " + denyShell(`echo 1 > /proc/sys/kernel/ns_last_pid`) + "; " + denyShell(`echo sbx > /proc/sys/kernel/hostname`) + "; " + denyShell(`echo 0 > /proc/self/oom_score_adj`),
			want:  "denied\ndenied\ndenied\ndenied\n"},
		{id: 12, name: "mount-family",
			shell: denyShell(`mount -t tmpfs none /tmp`) + "; " + denyShell(`umount /etc/shadow`) + "; " + denyShell(`mount -o remount,rw /`) + "; " + probeAll(mountOps...),
			want:  "denied\ndenied\ndenied\n" + probeWant("denied EPERM", mountOps...)},
		{id: 13, name: "nested-userns",
			shell: denyShell(`unshare -Ur true`) + "; " + denyShell(`unshare -Urm sh -c 'umount /etc/shadow'`) + "; " + probeAll("unshare-user", "unshare-ns", "unshare-net", "clone-user", "setns", "clone3", "clone-plain", "fork", "unshare-files"),
			want: "denied\ndenied\n" + probeWant("denied EPERM", "unshare-user", "unshare-ns", "unshare-net", "clone-user", "setns") +
				"clone3: denied ENOSYS\nclone-plain: ok\nfork: ok\nunshare-files: ok\n"},

		// Host-side file API.
		{id: 14, name: "api-symlink", own: true, check: checkAPISymlink},
		{id: 15, name: "api-symlink-swap", own: true, check: checkSymlinkSwap},
		{id: 16, name: "api-bad-paths", own: true, check: checkBadPaths},
		{id: 17, name: "delete-with-host-links", own: true, check: checkDeleteLinks},

		// Processes.
		{id: 18, name: "host-processes",
			shell: `cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -c "$HM"; kill -0 $HP 2>&1 | grep -o 'No such process'`,
			want:  "0\nNo such process\n"},
		{id: 19, name: "init-proc",
			shell: denyShell(`cat /proc/1/environ`) + "; " + denyShell(`readlink /proc/1/exe`) + "; " + denyShell(`ls /proc/1/root/`) + "; " + denyShell(`head -c1 /proc/1/mem`) + "; " + denyShell(`echo x > /proc/1/exe`) + "; " + probeAll("ptrace-init"),
			want:  "denied\ndenied\ndenied\ndenied\ndenied\nptrace-init: denied EPERM\n"},
		{id: 20, name: "ptrace-and-vm",
			shell: probeAll("ptrace-child", "ptrace-traceme", "vm-readv", "vm-writev") + denyShell(`strace -o /dev/null true`),
			want:  probeWant("denied EPERM", "ptrace-child", "ptrace-traceme", "vm-readv", "vm-writev") + "denied\n"},
		{id: 21, name: "background-reaped", own: true, check: checkBackgroundReaped},
		{id: 22, name: "kill-cli-and-init", own: true, check: checkKillTree},
		{id: 23, name: "no-zombies",
			// (A zombie may exist for the instant between its exit and
			// the init's wait: one must not stay.)
			shell: `for i in $(seq 100); do (sleep 0.01 &) ; done; sleep 0.5; for try in 1 2 3 4 5; do n=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); [ $n = 0 ] && break; sleep 0.2; done; echo $n`,
			want:  "0\n"},
		{id: 24, name: "exit-status", own: true, check: checkExitStatus},
		{id: 25, name: "resources", own: true, check: checkResources},

		// Privileges.
		{id: 26, name: "caps-nnp-seccomp",
			shell: `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status | awk '{print $1, $2}'`,
			want:  "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n"},
		{id: 27, name: "root-owned-binaries",
			// exec of a root-owned (and a setuid-root host) binary
			// brings no capability back.
			shell: `/usr/bin/env grep CapEff /proc/self/status | awk '{print $2}'; s=$(find /usr/bin -perm -4000 | head -1); test -n "$s" && echo setuid-present && $s --help >/dev/null 2>&1; $P fds`,
			want:  "0000000000000000\nsetuid-present\n0 1 2 \n"},
		{id: 28, name: "sudo-su",
			// Root stays root without capabilities; nobody gains any.
			shell: `su -c 'grep CapEff /proc/self/status' root </dev/null 2>/dev/null | grep -v 0000000000000000 | grep -c CapEff; ` + denyShell(`sudo -n true`),
			want:  "0\ndenied\n"},
		{id: 29, name: "tiocsti",
			shell: probeAll("tiocsti", "tiocsti-high", "tioclinux", "tiocgwinsz") + denyShell(`: > /dev/tty`),
			want:  "tiocsti: denied EPERM\ntiocsti-high: denied EPERM\ntioclinux: denied EPERM\ntiocgwinsz: ok\ndenied\n"},
		{id: 30, name: "kernel-surface",
			// Also the x32 ABI and the i386 entry point, whose syscall
			// numbers the filter does not check: killed (SIGSYS).
			shell: probeAll(kernelOps...) + `$P x32 2>/dev/null; echo "x32 $?"; $P int80 2>/dev/null; echo "int80 $?"`,
			want:  probeWant("denied EPERM", kernelOps...) + "x32 159\nint80 159\n"},
		{id: 31, name: "fds",
			shell: `$P fds; ls /proc/self/fd | tr '\n' ' '`, want: "0 1 2 \n0 1 2 3 "},

		// Network.
		{id: 32, name: "network-off",
			shell: denyShell(`curl -sS -m 3 http://example.com`) + "; " + denyShell(`wget -q -T 3 -O- http://example.com`) + "; " + denyShell(`getent hosts example.com`) +
				"; " + denyShell(`ssh -o BatchMode=yes -o ConnectTimeout=3 git@github.com true`) + "; " + denyShell(`bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'`) + "; $P connect-tcp 1.1.1.1:53",
			want: "denied\ndenied\ndenied\ndenied\ndenied\ndenied ENETUNREACH\n"},
		{id: 33, name: "host-loopback",
			shell: `$P connect-tcp 127.0.0.1:$PORT`, want: "denied ECONNREFUSED\n"},
		{id: 34, name: "host-abstract-socket",
			// Refused by the network namespace, and by Landlock's
			// abstract-socket scope where the kernel has it (EPERM).
			shell: `$P connect-unix $ABS | sed 's/EPERM/ECONNREFUSED/'`, want: "denied ECONNREFUSED\n"},
		{id: 35, name: "host-pathname-socket", own: true, check: checkPathSocket},
		{id: 36, name: "io-uring",
			shell: probeAll("io_uring_setup"), want: "io_uring_setup: denied EPERM\n"},
		{id: 37, name: "no-proxy-no-network",
			// Chosen differently: there is no allowlist proxy; the
			// network is on or off, and off means nothing at all.
			shell: `env | grep -ci _proxy; $P connect-tcp 93.184.215.14:80; $P connect-tcp 127.0.0.1:3128`,
			want:  "0\ndenied ENETUNREACH\ndenied ECONNREFUSED\n"},
		{id: 38, name: "no-host-net-info",
			shell: `test -e /sys/class/net && echo sys || echo nosys; awk 'NR>2 {print $1}' /proc/net/dev | tr '\n' ' '; echo; awk 'NR>1' /proc/net/route | wc -l; awk 'NR>1' /proc/net/arp | wc -l; grep -ci ":$(printf '%04X' $PORT) " /proc/net/tcp`,
			want:  "nosys\nlo: \n0\n0\n0\n"},
		{id: 39, name: "host-env", own: true, check: checkHostEnv},
	}
}

// TestEscape runs the checklist as the current user.
func TestEscape(t *testing.T) {
	e := newEscapeEnv(t)
	seen := map[int]bool{}
	for _, c := range escapeCases() {
		seen[c.id] = true
		t.Run(fmt.Sprintf("%02d-%s", c.id, c.name), func(t *testing.T) {
			t.Parallel()
			tok := e.token + "x" + strconv.Itoa(c.id)
			id := e.id
			if c.own {
				id = newSandbox(t, e.p, c.spec)
				e.installProbe(t, id)
			}
			if c.shell != "" {
				r := e.runRow(t, id, tok, c.shell)
				want := c.want
				if e.root && c.wantRoot != "" {
					want = c.wantRoot
				}
				if r.err != nil || r.stdout != want {
					t.Errorf("#%d %s:\n got %q (exit %d, err %v, stderr %q)\nwant %q", c.id, c.name, r.stdout, r.code, r.err, r.stderr, want)
				}
			}
			if c.check != nil {
				c.check(t, e, id, tok)
			}
			e.assertHostClean(t, tok)
		})
	}
	for i := 1; i <= 39; i++ {
		if !seen[i] {
			t.Errorf("checklist item %d has no row", i)
		}
	}
}

// checkAPISymlink (#14): symlinks planted in the workspace, by the sandbox
// or on the host, are followed inside the sandbox's view by read,
// download, upload and stat: the host's secret is never reached, and
// writes never land on the host.
func checkAPISymlink(t *testing.T, e *escapeEnv, id, tok string) {
	ctx := context.Background()
	e.runRow(t, id, tok, `ln -s $S /workspace/secret; ln -s `+e.secretDir+` /workspace/secretdir; ln -s /etc /workspace/etc; ln -s /etc/shadow /workspace/shadow`)
	if err := os.Symlink(e.secret, workspaceFile(e.p, id, "hostlink")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secret", "hostlink", "shadow"} {
		b, err := readAll(t, e.p, id, "/workspace/"+name)
		if strings.Contains(string(b), "host secret") || (name == "shadow" && hasPasswordHash(b)) {
			t.Errorf("read /workspace/%s returned the host's data: %q", name, b)
		}
		if err == nil && name != "shadow" {
			t.Errorf("read /workspace/%s succeeded", name)
		}
		var buf bytes.Buffer
		_ = e.p.Download(ctx, id, "/workspace/"+name, &buf)
		if strings.Contains(buf.String(), "host secret") {
			t.Errorf("download /workspace/%s carried the host's secret", name)
		}
	}
	// A download of the whole workspace keeps links as links.
	var buf bytes.Buffer
	if err := e.p.Download(ctx, id, "/workspace", &buf); err != nil {
		t.Fatalf("download /workspace: %v", err)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		if strings.Contains(string(b), "host secret") {
			t.Errorf("download entry %s carried the host's secret", h.Name)
		}
	}
	// Exec through the link sees nothing.
	if r := e.runRow(t, id, tok, `cat /workspace/hostlink /workspace/secret /workspace/secretdir/* 2>/dev/null; echo end`); strings.Contains(r.stdout, "host secret") {
		t.Errorf("exec read the host's secret through a link: %q", r.stdout)
	}
	// Writes and uploads through a link to a host directory stay inside.
	if err := e.p.WriteFile(ctx, id, "/workspace/secretdir/w"+tok, strings.NewReader("x"), 0o644); err == nil {
		t.Errorf("write through a link to a host directory succeeded")
	}
	_ = e.p.Upload(ctx, id, "/workspace/secretdir", bytes.NewReader(tarOf(t, &tar.Header{Name: "u" + tok, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})))
	if _, err := os.Lstat(filepath.Join(e.secretDir, "u"+tok)); err == nil {
		t.Errorf("upload through a link reached the host")
	}
}

// hasPasswordHash tells whether a shadow file holds anything but "*" as a
// password.
func hasPasswordHash(b []byte) bool {
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) > 1 && f[1] != "*" {
			return true
		}
	}
	return false
}

// checkSymlinkSwap (#15): the sandbox swaps a directory and a link to /
// while the host uploads into it: nothing is ever written outside.
func checkSymlinkSwap(t *testing.T, e *escapeEnv, id, tok string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.runRow(t, id, tok, `end=$(( $(date +%s) + 4 )); while [ $(date +%s) -lt $end ]; do rm -rf /workspace/d; mkdir /workspace/d; rm -rf /workspace/d; ln -s / /workspace/d; done`,
			func(r *providers.ExecRequest) { r.Timeout = 10 * time.Second })
	}()
	for i := 0; i < 15; i++ {
		_ = e.p.Upload(ctx, id, "/workspace/d", bytes.NewReader(tarOf(t, &tar.Header{Name: "f" + tok, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})))
		_ = e.p.WriteFile(ctx, id, "/workspace/d/w"+tok, strings.NewReader("x"), 0o644)
	}
	cancel()
	<-done
	// Through the swapped link, the writes may land in the sandbox's
	// own root (it is writable), never in the host's.
	for _, name := range []string{"f" + tok, "w" + tok} {
		if _, err := os.Lstat("/" + name); err == nil {
			t.Errorf("the upload landed in the host's /: %s", name)
		}
	}
}

// checkBadPaths (#16, a gap): API paths with "..", NUL or relative
// escapes are refused before anything starts; FIFOs and devices are
// refused without blocking.
func checkBadPaths(t *testing.T, e *escapeEnv, id, tok string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range []string{"/workspace/../etc/passwd", "../../etc/passwd", "/workspace/a\x00b", "/workspace/a/../../etc"} {
		if _, err := e.p.ReadFile(ctx, id, p); !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("ReadFile(%q) = %v, want ErrInvalid", p, err)
		}
		if err := e.p.WriteFile(ctx, id, p, strings.NewReader("x"), 0o644); !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("WriteFile(%q) = %v, want ErrInvalid", p, err)
		}
	}
	e.runRow(t, id, tok, `mkfifo /workspace/fifo`)
	for _, p := range []string{"/workspace/fifo", "/dev/zero", "/dev/tty"} {
		start := time.Now()
		_, err := readAll(t, e.p, id, p)
		if err == nil {
			t.Errorf("read %s succeeded", p)
		}
		if time.Since(start) > 10*time.Second || ctx.Err() != nil {
			t.Errorf("read %s blocked", p)
		}
	}
	var buf bytes.Buffer
	if err := e.p.Download(ctx, id, "/workspace", &buf); err != nil {
		t.Errorf("download of a workspace holding a FIFO: %v", err)
	}
}

// checkDeleteLinks (#17, a gap): deleting a sandbox whose workspace links
// to host directories removes only the sandbox.
func checkDeleteLinks(t *testing.T, e *escapeEnv, id, tok string) {
	info, err := e.p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	ws := workspaceFile(e.p, info.ID, "")
	if err := os.Symlink(e.secretDir, filepath.Join(ws, "hostdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.secret, filepath.Join(ws, "hostfile")); err != nil {
		t.Fatal(err)
	}
	e.runRow(t, info.ID, tok, `ln -s / /workspace/root; ln -s `+e.secretDir+` /workspace/inner`)
	if err := e.p.Delete(context.Background(), info.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(e.secret); err != nil {
		t.Errorf("deleting the sandbox removed the host's file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.p.dir, info.ID)); err == nil {
		t.Errorf("the sandbox directory survived")
	}
	waitTrashEmpty(t, e.p)
	if _, err := os.Stat(e.secret); err != nil {
		t.Errorf("the reaper removed the host's file: %v", err)
	}
}

// checkBackgroundReaped (#21, chosen differently: the sandbox is a
// machine): background, setsid'd, nohup'd and double-forked children live
// on after their exec, inside the sandbox's cgroups, and are gone once it
// stops.
func checkBackgroundReaped(t *testing.T, e *escapeEnv, id, tok string) {
	r := e.runRow(t, id, tok, "setsid sh -c '"+waitForGo+"; touch /workspace/a' >/dev/null 2>&1 & nohup sh -c '"+waitForGo+"; touch /workspace/b' >/dev/null 2>&1 & (sh -c '"+waitForGo+"; touch /workspace/c' &) ; sh -c '"+waitForGo+"; touch /workspace/d' >/dev/null 2>&1 & exit 0")
	if r.err != nil || r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	// The four settle as themselves a moment after the exec returns (a
	// forked subshell briefly carries the whole command line).
	if r := e.runRow(t, id, tok, "for i in $(seq 50); do n=$(ps -eo args | grep -c '[w]orkspace/go'); [ $n = 4 ] && break; sleep 0.1; done; echo $n"); strings.TrimSpace(r.stdout) != "4" {
		t.Errorf("background processes after their exec: %q, want 4", r.stdout)
	}
	stopSandbox(t, e.p, id)
	assertNoneSurvived(t, e.p, id, "a", "b", "c", "d")
	assertNoProcess(t, e.p, id)
}

// assertNoProcess fails if a process of the host still runs in sandbox
// id's directory's machine: none may outlive a stop or a delete.
func assertNoProcess(t *testing.T, p *Provider, id string) {
	t.Helper()
	if _, alive := liveMachine(filepath.Join(p.dir, id)); alive {
		t.Errorf("sandbox %s's machine still runs", id)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(b), "/workspace/go") && strings.Contains(string(b), "touch /workspace/") {
			// A test's own marker loop in another sandbox may run:
			// only this sandbox's cgroups are checked below.
			continue
		}
	}
	if p.cg.kind == cgroupNone || !p.cg.controllers["pids"] {
		return
	}
	dir := p.cg.dirOf("pids", id+"-"+machineCgroup)
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil && strings.TrimSpace(string(b)) != "" {
		t.Errorf("processes left in sandbox %s's cgroup: %q", id, b)
	}
}

// helperEnvVar makes TestEscapeHelperProcess run one long exec (#22).
const helperEnvVar = "SANDBOX_ESCAPE_HELPER"

// TestEscapeHelperProcess is not a test: checkKillTree starts the test
// binary with it selected and helperEnvVar set, and SIGKILLs it mid-exec.
func TestEscapeHelperProcess(t *testing.T) {
	spec := os.Getenv(helperEnvVar)
	if spec == "" {
		return
	}
	stateDir, id, _ := strings.Cut(spec, "|")
	p, err := New(providers.Config{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = p.Exec(context.Background(), id, providers.ExecRequest{Shell: "sh -c '" + waitForGo + "; touch /workspace/cli' >/dev/null 2>&1 & touch /workspace/started; sleep 60"})
}

// startHelper starts the test binary as TestEscapeHelperProcess on sandbox
// id of p and returns once the helper's command runs.
func startHelper(t *testing.T, p *Provider, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEscapeHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnvVar+"="+filepath.Dir(p.dir)+"|"+id)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitStarted(p, id) {
		_ = cmd.Process.Kill()
		t.Fatal("the helper's command never started")
	}
	return cmd
}

// waitStarted waits up to 30 seconds for a command in sandbox id to create
// /workspace/started, and reports whether it did.
func waitStarted(p *Provider, id string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Lstat(workspaceFile(p, id, "started")); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkKillTree (#22): SIGKILL of the CLI (a process running Exec) and a
// timeout kill the command's process group (the machine lives on); a
// SIGKILL of the machine's init from the host ends every process of the
// sandbox, and the next operation starts it again with its files.
func checkKillTree(t *testing.T, e *escapeEnv, id, tok string) {
	cmd := startHelper(t, e.p, id)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	time.Sleep(500 * time.Millisecond)
	assertNoneSurvived(t, e.p, id, "cli")
	setGo(t, e.p, id, false)
	r := e.runRow(t, id, tok, "sh -c '"+waitForGo+"; touch /workspace/timeout' >/dev/null 2>&1 & sleep 60", func(r *providers.ExecRequest) { r.Timeout = time.Second })
	if !errors.Is(r.err, providers.ErrTimeout) {
		t.Fatalf("exec with a timeout: %v", r.err)
	}
	assertNoneSurvived(t, e.p, id, "timeout")
	setGo(t, e.p, id, false)
	// The init, killed from the host, takes everything with it.
	marker := "touch /workspace/init-" + tok
	e.runRow(t, id, tok, "setsid sh -c '"+waitForGo+"; "+marker+"' >/dev/null 2>&1 & echo kept > /workspace/k$T")
	rec, alive := liveMachine(filepath.Join(e.p.dir, id))
	if !alive {
		t.Fatal("no machine runs")
	}
	if err := syscall.Kill(rec.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Until the kernel has ended the whole sandbox (a loaded machine
	// takes a while), the init still counts as running.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if state, start, err := procStat(rec.pid); err != nil || state == 'Z' || start != rec.start {
			break
		}
	}
	// Nothing of the sandbox runs any more: the background command is
	// looked for on the host itself.
	var left []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		left = hostProcesses("cmdline", func(pid int, b []byte) bool {
			state, _, err := procStat(pid)
			return err == nil && state != 'Z' && bytes.Contains(b, []byte(marker))
		})
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("a background process of the killed machine survived: %v", left)
	}
	if r := e.runRow(t, id, tok, "cat /workspace/k$T"); r.stdout != "kept\n" {
		t.Errorf("after the init was killed: %q (err %v), want the files intact", r.stdout, r.err)
	}
	if note := e.p.TakeNote(id); !strings.Contains(note, "started again") {
		t.Errorf("no note of the restart after a killed init: %q", note)
	}
}

// checkExitStatus (#24): statuses pass through; 127 differs from a sandbox
// that could not start.
func checkExitStatus(t *testing.T, e *escapeEnv, id, tok string) {
	for shell, want := range map[string]int{"exit 0": 0, "exit 7": 7, "kill -9 $$": 137, "kill -TERM $$": 143, "no-such-command-" + tok: 127} {
		if r := e.runRow(t, id, tok, shell); r.err != nil || r.code != want {
			t.Errorf("%q: exit %d err %v, want %d", shell, r.code, r.err, want)
		}
	}
	_, err := e.p.Exec(context.Background(), id, providers.ExecRequest{Argv: []string{"true"}, Cwd: "/workspace/missing"})
	if err == nil {
		t.Errorf("a sandbox that could not start the command reported no error")
	}
}

// checkResources (#25, a gap): a fork bomb, a memory hog and a disk
// filler are bounded and the host stays responsive.
func checkResources(t *testing.T, e *escapeEnv, id, tok string) {
	ctx := context.Background()
	// Default process limit, in this row's sandbox.
	if r := e.runRow(t, id, tok, `$P procs 1500`); r.err != nil || !withinCount(r.stdout, 900, defaultPids+machinePidsAllowance) {
		t.Errorf("default process limit: started %q (err %v, stderr %q), want at most %d", r.stdout, r.err, r.stderr, defaultPids+machinePidsAllowance)
	}
	// A sandbox asking for 64.
	info, err := e.p.Create(ctx, providers.Spec{Resources: providers.Resources{Pids: 64}})
	if err != nil {
		t.Fatalf("create with pids 64: %v", err)
	}
	t.Cleanup(func() { _ = e.p.Delete(context.Background(), info.ID) })
	e.installProbe(t, info.ID)
	// The limit holds for the whole machine (its init and runners count
	// too), for every operation, whatever ran before.
	for _, path := range []string{"first operation", "second operation"} {
		if r := e.runRow(t, info.ID, tok, `$P procs 500`); r.err != nil || !withinCount(r.stdout, 40, 64+machinePidsAllowance) {
			t.Errorf("pids 64, %s: started %q (err %v, stderr %q)", path, r.stdout, r.err, r.stderr)
		}
	}
	assertMachine(t, e.p, info.ID)
	// A real fork bomb, ended by a timeout, in a reused sandbox and as a
	// fresh sandbox's first operation; meanwhile the host forks.
	fresh, err := e.p.Create(ctx, providers.Spec{Resources: providers.Resources{Pids: 64}})
	if err != nil {
		t.Fatalf("create with pids 64: %v", err)
	}
	t.Cleanup(func() { _ = e.p.Delete(context.Background(), fresh.ID) })
	bombs := make(chan result, 2)
	for _, bid := range []string{info.ID, fresh.ID} {
		go func() {
			// The bomb starts from a subshell: the command's own shell
			// forks once, before the bomb fills the limit (a shell
			// whose fork fails exits, and would end the command early).
			bombs <- e.runRow(t, bid, tok, `(bomb() { bomb | bomb & }; bomb) 2>/dev/null; exec sleep 30`, func(r *providers.ExecRequest) { r.Timeout = 4 * time.Second })
		}()
	}
	time.Sleep(time.Second)
	if out, err := exec.Command("sh", "-c", "echo responsive").Output(); err != nil || string(out) != "responsive\n" {
		t.Errorf("the host could not start a process during the fork bombs: %v", err)
	}
	for range 2 {
		if r := <-bombs; !errors.Is(r.err, providers.ErrTimeout) {
			t.Errorf("fork bomb: exit %d, err %v, stderr %q; want the timeout to end it", r.code, r.err, r.stderr)
		}
	}

	// Memory: a per-process data limit always; a cgroup limit for the
	// whole sandbox where this host allows one.
	// The per-process limit is soft: a sanitizer build may lift it.
	r := e.runRow(t, id, tok, `ulimit -d; $P malloc $(( $(ulimit -d) / 1024 + 1024 )); bash -c 'ulimit -d unlimited && ulimit -d'`)
	if r.err != nil || !strings.HasSuffix(r.stdout, "denied ENOMEM\nunlimited\n") || strings.HasPrefix(r.stdout, "unlimited") {
		t.Errorf("memory beyond the data limit: %q (err %v)", r.stdout, r.err)
	}
	memSpec := providers.Spec{Resources: providers.Resources{MemoryMB: 128}}
	if e.p.cg.controllers["memory"] {
		info, err := e.p.Create(ctx, memSpec)
		if err != nil {
			t.Fatalf("create with memory 128: %v", err)
		}
		t.Cleanup(func() { _ = e.p.Delete(context.Background(), info.ID) })
		e.installProbe(t, info.ID)
		for _, path := range []string{"first operation", "second operation"} {
			r := e.runRow(t, info.ID, tok, `$P hog 1024`)
			if r.err != nil || strings.Contains(r.stdout, "ok") || (r.code != 137 && !strings.Contains(r.stdout, "denied")) {
				t.Errorf("memory hog under a 128 MiB limit, %s: %q, exit %d, err %v", path, r.stdout, r.code, r.err)
			}
		}
		assertMachine(t, e.p, info.ID)
		// /tmp is sized to the limit as well.
		if r := e.runRow(t, info.ID, tok, denyShell(`fallocate -l 200M /tmp/fill`)); r.stdout != "denied\n" {
			t.Errorf("/tmp beyond half the memory limit: %q", r.stdout)
		}
	} else {
		_, err := e.p.Create(ctx, memSpec)
		if !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), "cgroup") {
			t.Errorf("--memory on a host without a usable cgroup: %v, want ErrUnsupported naming cgroups", err)
		}
		_, err = e.p.Create(ctx, providers.Spec{Resources: providers.Resources{CPUs: 1}})
		if !errors.Is(err, providers.ErrUnsupported) {
			t.Errorf("--cpus on a host without a usable cgroup: %v, want ErrUnsupported", err)
		}
	}
	// Disk: /tmp has a size, and no file may outgrow the file-size limit
	// (a sparse write at the limit is refused at once).
	var free uint64
	var st syscall.Statfs_t
	if err := syscall.Statfs(e.p.dir, &st); err == nil {
		free = st.Bavail * uint64(st.Bsize)
	}
	r = e.runRow(t, id, tok, `df -k /tmp | awk 'NR==2 {print $2}'; `+denyShell(`fallocate -l $(( $(df -k /tmp | awk 'NR==2 {print $2}') + 1024 ))K /tmp/fill`)+`; `+
		denyShell(`dd if=/dev/zero of=/workspace/big$T bs=512 count=1 seek=$(ulimit -f)`)+`; rm -f /workspace/big$T; echo $(( $(ulimit -f) * 512 ))`)
	lines := strings.Fields(r.stdout)
	if len(lines) != 4 || lines[1] != "denied" || lines[2] != "denied" {
		t.Fatalf("disk limits: %q (stderr %q)", r.stdout, r.stderr)
	}
	tmpKB, _ := strconv.ParseUint(lines[0], 10, 64)
	if mem := hostMemory(); tmpKB == 0 || tmpKB*1024 > mem/2 {
		t.Errorf("/tmp is %d KiB, want a size bounded by the host's memory", tmpKB)
	}
	fsize, _ := strconv.ParseUint(lines[3], 10, 64)
	if free > 0 && (fsize == 0 || fsize > free) {
		t.Errorf("file size limit %d, free space %d", fsize, free)
	}
}

// assertMachine fails unless sandbox id's machine runs.
func assertMachine(t *testing.T, p *Provider, id string) {
	t.Helper()
	if _, alive := liveMachine(filepath.Join(p.dir, id)); !alive {
		t.Errorf("sandbox %s has no running machine", id)
	}
}

// withinCount parses a count printed by the probe and checks its range.
func withinCount(out string, lo, hi int) bool {
	n, err := strconv.Atoi(strings.TrimSpace(out))
	return err == nil && n >= lo && n <= hi
}

// checkPathSocket (#35): pathname sockets of host services are out of
// reach: /tmp, /run and homes are never mounted, and a socket in the
// host's system directories cannot be connected to through the overlay.
// A socket that a host process places in the workspace itself is
// reachable: the workspace is shared on purpose (chosen differently from
// the checklist, which asks for a policy denial).
func checkPathSocket(t *testing.T, e *escapeEnv, id, tok string) {
	r := e.runRow(t, id, tok, `$P connect-unix $SOCK; $P connect-unix /run/docker.sock; $P connect-unix /var/run/docker.sock`)
	if r.stdout != "denied ENOENT\ndenied ENOENT\ndenied ENOENT\n" {
		t.Errorf("host sockets: %q", r.stdout)
	}
	// A host socket under /var/tmp, open to every host user: not even
	// visible (the sandbox's /var/tmp is its own).
	tmpSock := filepath.Join("/var/tmp", "sock-"+tok)
	tmpLn, err := net.Listen("unix", tmpSock)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmpSock)
	defer tmpLn.Close()
	if r := e.runRow(t, id, tok, `$P connect-unix /var/tmp/sock-$T`); r.stdout != "denied ENOENT\n" {
		t.Errorf("host socket in /var/tmp: %q", r.stdout)
	}
	if e.root {
		// A host socket in /var/lib: visible through the overlay,
		// but not connectable.
		sock := filepath.Join("/var/lib", "sock-"+tok)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(sock)
		defer ln.Close()
		if r := e.runRow(t, id, tok, `$P connect-unix /var/lib/sock-$T`); r.stdout != "denied ECONNREFUSED\n" {
			t.Errorf("host socket below an overlay: %q", r.stdout)
		}
		ln.Close()
		os.Remove(sock)
	}
}

// checkHostEnv (#39): the host's environment never reaches the sandbox.
func checkHostEnv(t *testing.T, e *escapeEnv, id, tok string) {
	r := run(t, e.p, id, `env`)
	for _, k := range []string{"SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DOCKER_HOST", "USER=", "PWD=" + mustGetwd(t)} {
		if strings.Contains(r.stdout, k) {
			t.Errorf("host variable %s in the sandbox", k)
		}
	}
	// HOME is the sandbox user's, which may be the invoking user's own
	// (see TestIsolationView) and so carry its name (the host's USER).
	var env strings.Builder
	for line := range strings.Lines(r.stdout) {
		if !strings.HasPrefix(line, "HOME=") {
			env.WriteString(line)
		}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) >= 8 && k != "HOME" && k != "PATH" && strings.Contains(env.String(), v) {
			t.Errorf("the value of host variable %s is in the sandbox", k)
		}
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestEscapeUnprivileged runs TestEscape again as uid 65534 when the tests
// run as root (as in CI), with a state directory, HOME and TMPDIR of that
// user, through setpriv.
func TestEscapeUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("already unprivileged: TestEscape itself is the unprivileged run")
		return
	}
	runUnprivileged(t, []string{probeEnvVar + "=" + buildProbe(t)}, "TestEscape", "TestHostSecretsInvisible", "TestEscapeOracleBwrap", "TestWeakMode", "TestInstallsPersist",
		"TestStateDirHidden", "TestVarTmpPrivateInOldSandbox", "TestMountinfoHidesStatePaths", "TestDeleteEndsRunningCommands",
		"TestUsers", "TestMachineRefusesOtherUsers", "TestDiskQuota", "TestDiskQuotaDefied", "TestWeakDeleteEndsCommands", "TestWeakStateDirHidden", "TestStateRemovableByOwner")
}

// unprivUID is the unprivileged user the root run switches to.
const unprivUID = 65534

// runUnprivileged runs the named tests of this binary as unprivUID, with
// env added to its environment, and checks that each of them ran and
// passed.
func runUnprivileged(t *testing.T, env []string, tests ...string) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to run as an unprivileged user: %v", err)
	}
	dir := worldDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	if err := copyFile(self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, unprivUID, unprivUID); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = removeTree(tmp) })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid="+strconv.Itoa(unprivUID), "--regid="+strconv.Itoa(unprivUID), "--clear-groups",
		bin, "-test.run=^("+strings.Join(tests, "|")+")$", "-test.count=1", "-test.v")
	// Run from the world-readable directory: the checkout may sit
	// below a directory the user cannot enter (what the tests need
	// comes in through env, nothing else reads testdata).
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nPASS\n") {
		t.Fatalf("as uid %d: %v\n%s", unprivUID, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" (") {
			t.Errorf("as uid %d, %s did not run and pass:\n%s", unprivUID, name, out)
		}
	}
	t.Logf("as uid %d: %d tests and subtests passed", unprivUID, strings.Count(string(out), "--- PASS"))
}

// copyFile copies a file with the given mode.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
