//go:build linux

package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Security issue 13, item 12: a sandbox's first command outlived the
// sandbox's delete. These tests delete sandboxes while commands run in
// them and check, from the host's /proc and cgroup trees, that nothing of
// the sandbox is left once Delete returns.

// machineNS is what identifies a running machine on the host: its init's
// pid and the namespaces every process of the sandbox shares with it.
type machineNS struct {
	pid      int
	pidNS    string
	mountNS  string
	sandbox  string
	stateDir string
	// deleting, when set, is when the sandbox's delete began (clock
	// ticks since boot): a process started since is none of its own.
	// Once a namespace is gone its inode number is free, and the next
	// namespace made (a standby machine's, say) may get it.
	deleting uint64
}

// bootTicks is the time since boot in the clock ticks of /proc/PID/stat.
func bootTicks(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	up, _, _ := strings.Cut(string(b), " ")
	secs, err := strconv.ParseFloat(up, 64)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(secs * clockTicks)
}

// sandboxNS reads the namespaces of sandbox id's running machine.
func sandboxNS(t *testing.T, p *Provider, id string) machineNS {
	t.Helper()
	dir := filepath.Join(p.dir, id)
	rec, ok := liveMachine(dir)
	if !ok {
		t.Fatalf("sandbox %s has no running machine", id)
	}
	m := machineNS{pid: rec.pid, sandbox: id, stateDir: dir}
	var err error
	if m.pidNS, err = os.Readlink("/proc/" + strconv.Itoa(rec.pid) + "/ns/pid_for_children"); err != nil {
		t.Fatalf("pid namespace of the machine: %v", err)
	}
	if m.mountNS, err = os.Readlink("/proc/" + strconv.Itoa(rec.pid) + "/ns/mnt"); err != nil {
		t.Fatalf("mount namespace of the machine: %v", err)
	}
	return m
}

// members lists the host pids of the live processes in m's pid or mount
// namespace, the init included. A zombie is not one: it holds nothing but
// its pid until its parent (the CLI that started the machine) reaps it,
// and the kernel makes the init a zombie only once every other process
// of its namespace has ended.
func (m machineNS) members() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if zombie(pid) {
			continue
		}
		if m.deleting != 0 && pid != m.pid {
			if start, err := procStartTime(pid); err != nil || start >= m.deleting {
				continue
			}
		}
		base := "/proc/" + e.Name() + "/ns/"
		pidNS, _ := os.Readlink(base + "pid")
		mntNS, _ := os.Readlink(base + "mnt")
		if pid == m.pid || (pidNS != "" && pidNS == m.pidNS) || (mntNS != "" && mntNS == m.mountNS) {
			out = append(out, pid)
		}
	}
	return out
}

// zombie tells whether pid has exited (or is gone) without being reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] == 'Z' || s[i+2] == 'X'
}

// mountHolders lists the host pids whose mount table still names the
// sandbox's directory (its overlays' layers, its binds).
func (m machineNS) mountHolders() []int {
	return hostProcesses("mountinfo", func(_ int, b []byte) bool {
		return bytes.Contains(b, []byte("/"+m.sandbox+"/")) || bytes.Contains(b, []byte(m.sandbox+"/upper"))
	})
}

// assertSandboxGone checks that nothing of the sandbox m is left on the
// host: no process in its namespaces, no mount naming its directory, no
// cgroup, no directory.
func assertSandboxGone(t *testing.T, p *Provider, m machineNS) {
	t.Helper()
	if left := m.members(); len(left) > 0 {
		t.Errorf("processes of deleted sandbox %s still run: %v (%s)", m.sandbox, left, describePIDs(left))
	}
	if left := m.mountHolders(); len(left) > 0 {
		t.Errorf("mounts of deleted sandbox %s remain, in the mount tables of %v", m.sandbox, left)
	}
	for _, d := range sandboxCgroups(p, m.sandbox) {
		t.Errorf("cgroup of deleted sandbox %s remains: %s", m.sandbox, d)
	}
	if _, err := os.Lstat(m.stateDir); err == nil {
		t.Errorf("the directory of deleted sandbox %s remains", m.sandbox)
	}
}

// sandboxCgroups lists the cgroup directories of sandbox id.
func sandboxCgroups(p *Provider, id string) []string {
	var globs []string
	switch p.cg.kind {
	case cgroupV1:
		for _, ctl := range cgroupControllers {
			globs = append(globs, filepath.Join(p.cg.root, ctl, cgroupParent, id+"-*"))
		}
	case cgroupV2:
		globs = append(globs, filepath.Join(p.cg.v2Parent, cgroupParent+"-"+id+"-*"))
	}
	var out []string
	for _, g := range globs {
		dirs, _ := filepath.Glob(g)
		out = append(out, dirs...)
	}
	return out
}

// describePIDs names processes for a failure message.
func describePIDs(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		b.WriteString(strconv.Itoa(pid) + "=" + strings.ReplaceAll(string(cmd), "\x00", " ") + " [" + strings.TrimSpace(string(stat)) + "]; ")
	}
	return b.String()
}

// waitMember waits until a process whose command line holds marker runs
// in m's namespaces, and returns its host pid.
func waitMember(t *testing.T, m machineNS, marker string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, pid := range m.members() {
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if bytes.Contains(cmd, []byte(marker)) {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no process with %q in sandbox %s: %s", marker, m.sandbox, describePIDs(m.members()))
	return 0
}

// TestDeleteEndsRunningCommands deletes sandboxes while commands run in
// them: the first command of a fresh sandbox in the foreground (in the
// sandbox's network and in the host's), a background command and what it
// detached, a command of a machine started again after a stop, and a
// command that ignores SIGTERM and SIGHUP. Once Delete returns no process,
// mount, cgroup or directory of the sandbox is left, and the foreground
// Exec calls return.
func TestDeleteEndsRunningCommands(t *testing.T) {
	p := newTestProvider(t)
	const loop = "trap '' TERM HUP INT; while :; do sleep 1; done"
	cases := []struct {
		name string
		spec providers.Spec
		// prepare runs before the commands (after Create).
		prepare func(t *testing.T, id string)
		fg      []providers.ExecRequest
		bg      []providers.ExecRequest
	}{
		{name: "first-foreground", fg: []providers.ExecRequest{{Shell: "exec sh -c \"" + loop + "\" MARK-fg"}}},
		{name: "first-foreground-host-network", spec: providers.Spec{Network: providers.NetworkOn},
			fg: []providers.ExecRequest{{Shell: "exec sh -c \"" + loop + "\" MARK-fg", Network: providers.NetworkOn}}},
		{name: "background", bg: []providers.ExecRequest{{Shell: "setsid sh -c \"" + loop + "\" MARK-detached & exec sh -c \"" + loop + "\" MARK-bg"}}},
		{name: "foreground-and-background",
			bg: []providers.ExecRequest{{Shell: "exec sh -c \"" + loop + "\" MARK-bg"}},
			fg: []providers.ExecRequest{{Shell: "exec sh -c \"" + loop + "\" MARK-fg"}, {Shell: "nohup sh -c \"" + loop + "\" MARK-nohup >/dev/null 2>&1 & exec sh -c \"" + loop + "\" MARK-fg2"}}},
		{name: "after-restart",
			prepare: func(t *testing.T, id string) { stopSandbox(t, p, id) },
			fg:      []providers.ExecRequest{{Shell: "exec sh -c \"" + loop + "\" MARK-fg"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, err := p.Create(context.Background(), c.spec)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			id := info.ID
			deleted := false
			t.Cleanup(func() {
				if !deleted {
					_ = p.Delete(context.Background(), id)
				}
			})
			if c.prepare != nil {
				c.prepare(t, id)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var markers []string
			done := make(chan error, len(c.fg))
			for i, req := range c.fg {
				// The foreground commands start concurrently: the
				// first of them starts the machine when it is stopped.
				go func() {
					_, err := p.Exec(ctx, id, req)
					done <- err
				}()
				if i == 0 {
					// Let it start (and the machine with it) first.
					waitStarted := time.Now().Add(20 * time.Second)
					for time.Now().Before(waitStarted) {
						if _, ok := liveMachine(filepath.Join(p.dir, id)); ok {
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
				markers = append(markers, markersOf(req.Shell)...)
			}
			for _, req := range c.bg {
				req.Background = true
				if _, err := p.Exec(ctx, id, req); err != nil {
					t.Fatalf("background exec: %v", err)
				}
				markers = append(markers, markersOf(req.Shell)...)
			}
			m := sandboxNS(t, p, id)
			for _, mk := range markers {
				waitMember(t, m, mk)
			}
			m.deleting = bootTicks(t)
			if err := p.Delete(context.Background(), id); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			deleted = true
			assertSandboxGone(t, p, m)
			for range c.fg {
				select {
				case err := <-done:
					if err == nil {
						t.Errorf("a foreground command of the deleted sandbox reported success")
					}
				case <-time.After(15 * time.Second):
					t.Fatalf("a foreground Exec still waits after the sandbox was deleted")
				}
			}
		})
	}
}

// markersOf lists the MARK-* words of a shell command.
func markersOf(shell string) []string {
	var out []string
	for _, f := range strings.Fields(shell) {
		if strings.HasPrefix(f, "MARK-") {
			out = append(out, f)
		}
	}
	return out
}
