//go:build linux

package local

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

func TestStandbySockName(t *testing.T) {
	tests := []struct {
		name      string
		pid       int
		start     uint64
		ready, ok bool
	}{
		{name: "abc-12-345.sock", pid: 12, start: 345, ready: true, ok: true},
		{name: "abc-12-345.wait", pid: 12, start: 345, ok: true},
		{name: "abc-12-345.sock.claim"},
		{name: "other-12-345.sock"},
		{name: "abc-x-345.sock"},
		{name: "abc-0-345.sock"},
		{name: "abc-12.sock"},
		{name: "abc-12-y.sock"},
		{name: "new-99.sock"},
	}
	for _, tt := range tests {
		pid, start, ready, ok := parseStandbySock("abc", tt.name)
		if ok != tt.ok || pid != tt.pid || start != tt.start || ready != tt.ready {
			t.Errorf("parseStandbySock(%q) = %d, %d, %v, %v; want %d, %d, %v, %v",
				tt.name, pid, start, ready, ok, tt.pid, tt.start, tt.ready, tt.ok)
		}
		if tt.ok {
			if got := standbySockName("abc", tt.pid, tt.start, tt.ready); got != tt.name {
				t.Errorf("standbySockName(%d, %d, %v) = %q, want %q", tt.pid, tt.start, tt.ready, got, tt.name)
			}
		}
	}
}

// waitStandby waits until p has a standby machine ready and returns its
// init's pid.
func waitStandby(t *testing.T, p *Provider) int {
	t.Helper()
	dir := filepath.Join(p.dir, standbyDir)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if names := p.standbys(dir, p.standbyKey(), false); len(names) > 0 {
			pid, _, _, _ := parseStandbySock(p.standbyKey(), names[0])
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no standby machine became ready in %s", dir)
	return 0
}

// TestStandbyMachine: a start leaves a standby machine behind, and the
// next start claims it: the sandbox's machine is that init, in the
// sandbox's own cgroups with the sandbox's limits (renamed, no standby
// cgroup left), at the normal priority, and works as a fresh one does.
// A standby machine ends once its directory is gone.
func TestStandbyMachine(t *testing.T) {
	p := newTestProvider(t)
	if !p.standbyOn() {
		t.Logf("no standby machines here (%s)", p.cg.describe())
		return
	}
	// As on a freshly booted host: no sandbox has made the provider's
	// cgroup in the controllers only a standby sets (cpu). Removed only
	// while empty.
	if p.cg.kind == cgroupV1 {
		_ = unix.Rmdir(filepath.Dir(p.cg.dirOf("cpu", "x")))
	}
	first := newSandbox(t, p, providers.Spec{})
	if got := mustRun(t, p, first, "echo one"); got != "one\n" {
		t.Fatalf("first sandbox: %q", got)
	}
	p.standbyNow()
	standby := waitStandby(t, p)

	res := providers.Resources{Pids: 55}
	if p.cg.controllers["cpu"] {
		res.CPUs = 0.5
	}
	second := newSandbox(t, p, providers.Spec{Resources: res})
	rec, err := readMachineRecord(filepath.Join(p.dir, second))
	if err != nil {
		t.Fatal(err)
	}
	if rec.pid != standby {
		t.Fatalf("the second sandbox's machine is init %d, want the standby init %d", rec.pid, standby)
	}
	if got := mustRun(t, p, second, "echo hi > /workspace/f && cat /workspace/f && hostname"); got != "hi\n"+hostname+"\n" {
		t.Errorf("a command in the claimed machine printed %q", got)
	}
	writeString(t, p, second, "/tmp/x", "kept")
	if b, err := readAll(t, p, second, "/tmp/x"); err != nil || string(b) != "kept" {
		t.Errorf("read back /tmp/x: %q, %v", b, err)
	}
	procs := []int{rec.pid}
	for i := 0; i < len(procs); i++ {
		procs = append(procs, childrenOf(procs[i])...)
	}
	if p.uid == 0 {
		for _, pid := range procs {
			tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
			for _, task := range tasks {
				tid, _ := strconv.Atoi(task.Name())
				// getpriority returns 20 - nice.
				if prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil && prio != 20 {
					t.Errorf("thread %d of process %d of the claimed machine has nice %d, want 0", tid, pid, 20-prio)
				}
			}
		}
	}
	if p.cg.kind == cgroupV1 {
		want := second + "-" + machineCgroup
		for _, pid := range procs {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
			if err != nil {
				continue // ended since it was listed
			}
			if got := string(b); !strings.Contains(got, "pids:/"+cgroupParent+"/"+want) && !exiting(pid) {
				t.Errorf("process %d of the claimed machine is in\n%s\nwant the sandbox's cgroup %s", pid, got, want)
			}
		}
		if p.cg.controllers["pids"] {
			d := p.cg.limitDir("pids", want)
			if got := readCg(t, filepath.Join(d, "pids.max")); got != strconv.Itoa(res.Pids+machinePidsAllowance)+"\n" {
				t.Errorf("%s/pids.max = %q, want %d", d, got, res.Pids+machinePidsAllowance)
			}
		}
		if p.cg.controllers["cpu"] {
			d := p.cg.dirOf("cpu", want)
			if got := readCg(t, filepath.Join(d, "cpu.cfs_quota_us")); got != "50000\n" {
				t.Errorf("%s/cpu.cfs_quota_us = %q, want 50000", d, got)
			}
		}
		for _, d := range p.cg.dirsOf(standbyCgroup(standby)) {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("the claimed standby's cgroup %s is left", d)
			}
		}
	}

	// The claim asked for the next one; it ends with its directory.
	p.standbyNow()
	next := waitStandby(t, p)
	if next == standby {
		t.Fatalf("the claimed init %d is still listed as a standby", next)
	}
	if p.uid == 0 {
		// A start that sees another mount table than the standby
		// init's starter did does not take it.
		mnt := t.TempDir()
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		third := newSandbox(t, p, providers.Spec{})
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
		if rec, err := readMachineRecord(filepath.Join(p.dir, third)); err != nil || rec.pid == next {
			t.Errorf("a start after a host mount took the standby init %d made before it (%v)", next, err)
		}
	}
	start, err := procStartTime(next)
	if err != nil {
		t.Fatal(err)
	}
	// The starts above asked for standby machines in the background,
	// and a standby renames its socket when ready: the removal may
	// race them; it goes again until the directory is gone.
	p.bg.wg.Wait()
	var err2 error
	for range 50 {
		if err2 = os.RemoveAll(filepath.Join(p.dir, standbyDir)); !errors.Is(err2, unix.ENOTEMPTY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err2 != nil {
		t.Fatal(err2)
	}
	waitGone(t, next, start, "its directory")
}

// TestStandbyOff: SANDBOX_LOCAL_STANDBY=0 keeps none, and a socket of an
// init that ended is no standby machine (and goes).
func TestStandbyOff(t *testing.T) {
	p := newProviderWith(t, standbyEnvVar, "0")
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "true")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.dir, standbyDir)); len(entries) != 0 {
		t.Errorf("%s=0 left %v", standbyEnvVar, entries)
	}

	p.standby = true
	sd := filepath.Join(p.dir, standbyDir)
	if err := os.MkdirAll(sd, 0o700); err != nil {
		t.Fatal(err)
	}
	// A pid that cannot be running with that start time.
	stale := filepath.Join(sd, standbySockName(p.standbyKey(), os.Getpid(), 1, true))
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := p.standbys(sd, p.standbyKey(), true); len(got) != 0 {
		t.Errorf("a stale socket counts as a standby machine: %v", got)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a stale standby socket stayed")
	}
}

// TestStandbyEndsWithItsBinary: a standby machine whose binary is removed
// (an upgrade replaced it, a test binary ended) ends: no start could
// claim it, its binary's identity being gone.
func TestStandbyEndsWithItsBinary(t *testing.T) {
	p := newTestProvider(t)
	if !p.standbyOn() {
		t.Logf("no standby machines here (%s)", p.cg.describe())
		return
	}
	p.exe = copyTestBinary(t)
	p.identity = exeIdentity(p.exe)
	if err := p.spawnStandby(); err != nil {
		t.Fatal(err)
	}
	pid := waitStandby(t, p)
	start, err := procStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p.exe); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, start, "its binary")
}

// waitGone waits up to 10 s for the standby init pid (started at start)
// to end once what it needs is gone.
func waitGone(t *testing.T, pid int, start uint64, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := procStartTime(pid); err != nil || st != start || zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby init %d outlived %s", pid, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exiting reports whether process pid is ending or gone: the kernel shows
// an ending process's cgroup v1 paths as the root, whatever cgroup it
// ends in (a runner the machine let go while the test looked).
func exiting(pid int) bool {
	f, err := statFields(pid)
	if err != nil {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	const pfExiting = 0x4 // PF_EXITING, include/linux/sched.h
	return err != nil || flags&pfExiting != 0
}

// TestStandbyVouchesForMasks: as root, a start that claims a standby
// machine whose watch saw no change since it checked the masks cache (see
// maskWatch) runs no check of its own; a secret the host makes while a
// standby waits is masked all the same: the watch saw it, and the start
// checks.
func TestStandbyVouchesForMasks(t *testing.T) {
	if os.Getuid() != 0 {
		t.Logf("only root's starts check the host's secrets beside the start")
		return
	}
	p := newTestProvider(t)
	if !p.standbyOn() {
		t.Logf("no standby machines here (%s)", p.cg.describe())
		return
	}
	id := newSandbox(t, p, providers.Spec{}) // its start writes the cache
	stopSandbox(t, p, id)
	// start runs a command in the stopped sandbox from a new provider (a
	// new CLI, which reads the cache) once a standby waits, and says
	// whether the start checked the host.
	start := func(cmd string) (result, bool) {
		t.Helper()
		p.standbyNow()
		waitStandby(t, p)
		// Ready before its watch's check ends, at the lowest priority.
		time.Sleep(time.Second)
		q, err := New(providers.Config{StateDir: filepath.Dir(p.dir)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		r := run(t, q, id, cmd)
		q.mask.mu.Lock()
		checked := q.mask.check != nil
		q.mask.mu.Unlock()
		stopSandbox(t, p, id)
		return r, checked
	}
	// Another test may change a watched directory meanwhile (they plant
	// secrets in /etc): a start that checked tries again.
	vouched := false
	for range 3 {
		r, checked := start("echo ok")
		if r.stdout != "ok\n" || r.code != 0 {
			t.Fatalf("a command in the claimed machine: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		if !checked {
			vouched = true
			break
		}
	}
	if !vouched {
		t.Errorf("every start claiming a standby checked the host's secrets; want one vouched for")
	}
	p.standbyNow()
	waitStandby(t, p)
	time.Sleep(time.Second)
	secret := filepath.Join("/etc", "sandbox-watched-"+token(t))
	plantFile(t, secret, "watched secret\n", 0o600)
	t.Cleanup(func() { os.Remove(secret) })
	r, checked := start("cat " + secret)
	if strings.Contains(r.stdout+r.stderr, "watched secret") || r.code == 0 && r.stdout != "" {
		t.Errorf("a secret made while a standby waited: exit %d, %q %q, want it masked", r.code, r.stdout, r.stderr)
	}
	if !checked {
		t.Errorf("the start after a secret was made did not check the host")
	}
}

// inotifyHolders lists the processes (pid/fd) holding an inotify
// instance that watches the file path.
func inotifyHolders(t *testing.T, path string) []string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	want := "ino:" + strconv.FormatUint(st.Ino, 16) + " "
	infos, _ := filepath.Glob("/proc/[0-9]*/fdinfo/*")
	var out []string
	for _, info := range infos {
		b, err := os.ReadFile(info)
		if err == nil && strings.Contains(string(b), want) {
			out = append(out, strings.TrimPrefix(strings.Replace(info, "/fdinfo/", "/", 1), "/proc/"))
		}
	}
	return out
}

// TestWatchHandedOn: a claimed standby hands its masks watch to the
// claimer and keeps none (its end, 2-3 ms in the kernel, is then none of
// the machine's: a one-off exec's delete waited for it); the claimer
// gives it to the standby machine it starts next, which closes it once
// ready, so that in the end nobody holds it.
func TestWatchHandedOn(t *testing.T) {
	t.Run("handTo", func(t *testing.T) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[1])
		f := os.NewFile(uintptr(fds[0]), "claim")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		w := &maskWatch{fd: in}
		if err := w.handTo(c.(*net.UnixConn), claimAnswer(7)); err != nil {
			t.Fatal(err)
		}
		if w.fd != -1 {
			t.Errorf("the watch is still open in the standby (fd %d)", w.fd)
		}
		b := make([]byte, 16)
		oob := make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := unix.Recvmsg(fds[1], b, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		got := rightsOf(oob[:oobn])
		if n != len(claimAnswer(7)) || len(got) != 1 {
			t.Fatalf("the claimer got %d bytes and descriptors %v, want the answer and one", n, got)
		}
		defer unix.Close(got[0])
		if link, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(got[0])); link != "anon_inode:inotify" {
			t.Errorf("the descriptor handed over is %q, want the inotify instance", link)
		}
	})
	t.Run("next standby closes it", func(t *testing.T) {
		p := newTestProvider(t)
		if !p.standbyOn() {
			t.Logf("no standby machines here (%s)", p.cg.describe())
			return
		}
		marker := filepath.Join(t.TempDir(), "watched")
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.InotifyAddWatch(in, marker, unix.IN_MODIFY); err != nil {
			t.Fatal(err)
		}
		p.keepWatch([]int{in})
		if got := inotifyHolders(t, marker); len(got) != 1 {
			t.Fatalf("the kept watch is held by %v, want this process alone", got)
		}
		if err := p.spawnStandby(); err != nil {
			t.Fatal(err)
		}
		pid := waitStandby(t, p)
		if w := p.takeWatch(); w != nil {
			w.Close()
			t.Fatal("the standby machine started did not take the watch")
		}
		if _, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fdinfo"); err != nil {
			// Not dumpable, and this user is not root: what it holds
			// cannot be seen from here (root's run checks it).
			t.Logf("the standby's descriptors are not visible to uid %d: %v", os.Getuid(), err)
			return
		}
		deadline := time.Now().Add(5 * time.Second)
		for got := inotifyHolders(t, marker); len(got) > 0; got = inotifyHolders(t, marker) {
			if time.Now().After(deadline) {
				t.Fatalf("the watch handed on is still held by %v", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("claimed machine keeps none", func(t *testing.T) {
		p := newTestProvider(t)
		if !p.standbyOn() {
			t.Logf("no standby machines here (%s)", p.cg.describe())
			return
		}
		newSandbox(t, p, providers.Spec{}) // writes the masks cache, leaves a standby
		p.standbyNow()
		pid := waitStandby(t, p)
		if os.Getuid() == 0 {
			time.Sleep(time.Second) // its watch checked the cache
		}
		id := newSandbox(t, p, providers.Spec{})
		if rec := runningMachine(t, p, id); rec.pid != pid {
			t.Fatalf("the sandbox's machine is %d, not the standby %d", rec.pid, pid)
		}
		fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
		for _, fd := range fds {
			if link, _ := os.Readlink(fd); link == "anon_inode:inotify" {
				t.Errorf("the claimed machine still holds a masks watch (%s)", fd)
			}
		}
		if os.Getuid() == 0 {
			p.bg.wg.Wait()
			if w := p.takeWatch(); w != nil {
				w.Close()
				t.Error("the watch the claim brought was not handed to the next standby")
			}
		}
	})
}
