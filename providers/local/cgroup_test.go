//go:build linux

package local

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// fakeCgroupTree lays out cgroup files under a temporary root. The kernel's
// semantics are not there; what the provider writes, and where, is.
func fakeCgroupTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		plantFile(t, full, content, 0o644)
	}
	return root
}

func readCg(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", path, err)
	}
	return string(b)
}

// cgroupLine is the path of controller ctl in the contents of a
// /proc/PID/cgroup file (cgroup v1).
func cgroupLine(procCgroup, ctl string) string {
	for line := range strings.Lines(procCgroup) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), ctl) {
			return f[2]
		}
	}
	return ""
}

// rootedCgroups says whether every hierarchy of a /proc/PID/cgroup file
// shows its process at the root of its cgroup namespace.
func rootedCgroups(procCgroup string) bool {
	for line := range strings.Lines(procCgroup) {
		if f := strings.SplitN(strings.TrimSpace(line), ":", 3); len(f) != 3 || f[2] != "/" {
			return false
		}
	}
	return procCgroup != ""
}

// TestOwnCgroupNamespace: what runs in a sandbox, its commands and its
// file operations, as root or not, sees its cgroups as the root of its
// own cgroup namespace, and nothing of the host's cgroup tree (which
// names the sandbox).
func TestOwnCgroupNamespace(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	for range 2 {
		if got := mustRun(t, p, id, "cat /proc/self/cgroup"); !rootedCgroups(got) || strings.Contains(got, id) {
			t.Errorf("/proc/self/cgroup of a command:\n%s\nwant the root of its cgroup namespace, and no host cgroup named", got)
		}
	}
	rc, err := p.ReadFile(context.Background(), id, "/proc/self/cgroup")
	if err != nil {
		t.Fatalf("file operation: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !rootedCgroups(string(b)) {
		t.Errorf("/proc/self/cgroup read by a file operation:\n%s\nwant the root of its cgroup namespace", b)
	}
}

func TestCgroups(t *testing.T) {
	t.Parallel()
	res := providers.Resources{MemoryMB: 128, CPUs: 1.5, Pids: 64}
	pid := strconv.Itoa(os.Getpid())
	t.Run("v1-root", func(t *testing.T) {
		root := fakeCgroupTree(t, map[string]string{"pids/": "", "memory/": "", "cpu/": ""})
		c := detectCgroupsAt(root, "", 0)
		if c.kind != cgroupV1 || len(c.controllers) != 3 {
			t.Fatalf("detect = %+v", c)
		}
		if _, err := c.enter(os.Getpid(), "sb-x-0", res); err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]string{
			"pids/sandbox/sb-x-0/pids.max": "64", "pids/sandbox/sb-x-0/cgroup.procs": pid,
			"memory/sandbox/sb-x-0/memory.limit_in_bytes": "134217728", "memory/sandbox/sb-x-0/cgroup.procs": pid,
			"cpu/sandbox/sb-x-0/cpu.cfs_quota_us": "150000", "cpu/sandbox/sb-x-0/cpu.cfs_period_us": "100000",
		} {
			if got := readCg(t, filepath.Join(root, file)); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
		// The default pids limit applies without a request.
		if _, err := c.enter(os.Getpid(), "sb-x-1", providers.Resources{}); err != nil {
			t.Fatal(err)
		}
		if got := readCg(t, filepath.Join(root, "pids/sandbox/sb-x-1/pids.max")); got != strconv.Itoa(defaultPids) {
			t.Errorf("default pids.max = %q", got)
		}
	})
	t.Run("v1-warm", func(t *testing.T) {
		// prewarm writes this process into the pids cgroup it is in.
		root := fakeCgroupTree(t, map[string]string{"pids/user.slice/": "", "memory/": ""})
		c := detectCgroupsAt(root, "9:name=systemd:/\n8:pids:/user.slice\n7:memory:/\n", 0)
		want := filepath.Join(root, "pids", "user.slice", "cgroup.procs")
		if c.warm != want {
			t.Fatalf("warm = %q, want %q", c.warm, want)
		}
		c.warmUp()
		if got := readCg(t, want); got != pid {
			t.Errorf("warm write = %q, want %q", got, pid)
		}
		// Without the pids controller there is nothing to warm.
		root = fakeCgroupTree(t, map[string]string{"memory/": ""})
		if c := detectCgroupsAt(root, "8:pids:/\n7:memory:/\n", 0); c.warm != "" {
			t.Errorf("warm without pids = %q", c.warm)
		}
	})
	t.Run("v1-user", func(t *testing.T) {
		root := fakeCgroupTree(t, map[string]string{"pids/": "", "memory/": ""})
		c := detectCgroupsAt(root, "", 1000)
		if c.kind != cgroupNone {
			t.Fatalf("an unprivileged user on v1 got %+v", c)
		}
		err := c.check(providers.Resources{MemoryMB: 10})
		if !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), "Delegate=yes") {
			t.Errorf("check(--memory) = %v, want ErrUnsupported with the way out", err)
		}
		if err := c.check(providers.Resources{Pids: 10}); err != nil {
			t.Errorf("check(--pids) for a user = %v, want nil (RLIMIT_NPROC)", err)
		}
	})
	t.Run("v2-root", func(t *testing.T) {
		root := fakeCgroupTree(t, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids", "cgroup.subtree_control": "cpu memory pids"})
		c := detectCgroupsAt(root, "0::/init.scope\n", 0)
		if c.kind != cgroupV2 || c.v2Parent != root || c.delegate != nil {
			t.Fatalf("detect = %+v", c)
		}
		if _, err := c.enter(os.Getpid(), "sb-x-0", res); err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]string{"sandbox-sb-x-0/pids.max": "64", "sandbox-sb-x-0/memory.max": "134217728",
			"sandbox-sb-x-0/memory.swap.max": "0", "sandbox-sb-x-0/cpu.max": "150000 100000", "sandbox-sb-x-0/cgroup.procs": pid} {
			if got := readCg(t, filepath.Join(root, file)); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
	})
	t.Run("v2-delegated", func(t *testing.T) {
		scope := "user.slice/user-1000.slice/run-1.scope"
		root := fakeCgroupTree(t, map[string]string{"cgroup.controllers": "cpu memory pids",
			scope + "/cgroup.controllers": "cpu memory pids", scope + "/cgroup.subtree_control": "", scope + "/cgroup.procs": pid})
		c := detectCgroupsAt(root, "0::/"+scope+"\n", 1000)
		if c.kind != cgroupV2 || c.v2Parent != filepath.Join(root, scope) || c.delegate == nil || !c.controllers["memory"] {
			t.Fatalf("detect = %+v", c)
		}
		if err := c.check(res); err != nil {
			t.Fatalf("check = %v", err)
		}
		// Without a request nothing is needed: no move.
		if set, err := c.enter(os.Getpid(), "sb-x-0", providers.Resources{}); err != nil || set != nil {
			t.Fatalf("enter without limits = %v, %v", set, err)
		}
		if _, err := os.Stat(filepath.Join(root, scope, cgroupCLILeaf)); err == nil {
			t.Fatal("the process moved without a need")
		}
		if _, err := c.enter(os.Getpid(), "sb-x-1", providers.Resources{MemoryMB: 128}); err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]string{cgroupCLILeaf + "/cgroup.procs": pid, "cgroup.subtree_control": "+pids +memory +cpu",
			"sandbox-sb-x-1/memory.max": "134217728"} {
			if got := readCg(t, filepath.Join(root, scope, file)); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
		// A later provider in the moved process finds the same parent.
		again := detectCgroupsAt(root, "0::/"+scope+"/"+cgroupCLILeaf+"\n", 1000)
		if again.v2Parent != filepath.Join(root, scope) {
			t.Errorf("after the move the parent is %q", again.v2Parent)
		}
	})
	t.Run("v2-not-delegated", func(t *testing.T) {
		root := fakeCgroupTree(t, map[string]string{"cgroup.controllers": "cpu memory pids"})
		if c := detectCgroupsAt(root, "0::/user.slice/missing.scope\n", 1000); c.kind != cgroupNone {
			t.Errorf("detect = %+v, want none", c)
		}
	})
}

func TestLimitsFor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mem := hostMemory()
	l := limitsFor(dir, providers.Resources{}, false)
	if l.NProc != defaultPids+machinePidsAllowance || l.Data == 0 || l.Data > mem || l.FSize == 0 || l.TmpSize != mem/4 || !l.NoCores {
		t.Errorf("defaults = %+v (host memory %d)", l, mem)
	}
	l = limitsFor(dir, providers.Resources{MemoryMB: 256, Pids: 50}, true)
	if l.NProc != 50+machinePidsAllowance || l.Data != 0 || l.TmpSize != 128<<20 || l.ShmSize != 64<<20 {
		t.Errorf("with a cgroup memory limit = %+v", l)
	}
	l = limitsFor(dir, providers.Resources{MemoryMB: 256}, false)
	if l.Data != 256<<20 {
		t.Errorf("memory without a cgroup: data = %d, want the limit", l.Data)
	}
	if got := tmpfsOpts("mode=1777", 4096); got != "mode=1777,size=4096" {
		t.Errorf("tmpfsOpts = %q", got)
	}
}

// TestCgroupsReal checks, where this process may manage cgroups (root in
// CI), that every process of a sandbox (its init, its commands, its file
// operations) runs in the sandbox's one cgroup with the limits asked for,
// and that deleting the sandbox removes its cgroups.
func TestCgroupsReal(t *testing.T) {
	p := newTestProvider(t)
	if p.cg.kind == cgroupNone || !p.cg.controllers["pids"] {
		t.Logf("no cgroup this user may manage (%s): RLIMIT_NPROC bounds the sandbox, see TestEscape/25", p.cg.describe())
		return
	}
	if p.cg.warm != "" {
		// Warming moves nothing: this process stays where it is.
		before, _ := os.ReadFile("/proc/self/cgroup")
		p.cg.warmUp()
		if after, _ := os.ReadFile("/proc/self/cgroup"); string(after) != string(before) {
			t.Errorf("warming moved the process:\n%s\nbefore:\n%s", after, before)
		}
	}
	info, err := p.Create(context.Background(), providers.Spec{Resources: providers.Resources{Pids: 77}})
	if err != nil {
		t.Fatal(err)
	}
	want := info.ID + "-" + machineCgroup
	// Every process of the machine, its first runner too (started
	// before the init was in its cgroups), is in the machine's cgroup;
	// on cgroup v1 all but the init are in its work child, which holds
	// the limits of pids and memory, and of the init's threads only its
	// two process starters are.
	rec, err := readMachineRecord(filepath.Join(p.dir, info.ID))
	if err != nil {
		t.Fatal(err)
	}
	procs := []int{rec.pid}
	for i := 0; i < len(procs); i++ {
		procs = append(procs, childrenOf(procs[i])...)
	}
	if len(procs) < 2 {
		t.Errorf("the machine runs %v, want its init and a runner", procs)
	}
	v1 := p.cg.kind == cgroupV1
	for i, pid := range procs {
		got := readCg(t, "/proc/"+strconv.Itoa(pid)+"/cgroup")
		if !strings.Contains(got, want) {
			t.Errorf("process %d of the machine is in\n%s\nwant the machine's cgroup", pid, got)
		}
		if inWork := cgroupLine(got, "pids") == "/"+cgroupParent+"/"+want+"/"+cgroupWork; v1 && inWork != (i > 0) {
			t.Errorf("process %d (the init: %v) of the machine is in\n%s\nwant the init alone outside the work cgroup", pid, i == 0, got)
		}
	}
	if v1 {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(rec.pid) + "/task")
		inWork := 0
		for _, task := range tasks {
			got := readCg(t, "/proc/"+strconv.Itoa(rec.pid)+"/task/"+task.Name()+"/cgroup")
			switch cgroupLine(got, "pids") {
			case "/" + cgroupParent + "/" + want + "/" + cgroupWork:
				inWork++
			case "/" + cgroupParent + "/" + want:
			default:
				t.Errorf("the init's thread %s is in\n%s\nwant the machine's cgroup", task.Name(), got)
			}
		}
		if inWork != 2 {
			t.Errorf("%d of the init's %d threads are in its work cgroup; want its two process starters", inWork, len(tasks))
		}
		if got := readCg(t, filepath.Join(p.cg.dirOf("pids", want), "pids.max")); got != "max\n" {
			t.Errorf("the init's own pids cgroup has the limit %q; want none", got)
		}
	}
	// The init is above the commands' work cgroups (their own cgroup
	// namespace is rooted at them, see TestOwnCgroupNamespace).
	if init := mustRun(t, p, info.ID, "cat /proc/1/cgroup"); v1 && cgroupLine(init, "pids") != "/.." {
		t.Errorf("/proc/1/cgroup:\n%s\nwant the init above the command's work cgroup", init)
	}
	var pattern string
	if p.cg.kind == cgroupV1 {
		pattern = filepath.Join(p.cg.root, "pids", cgroupParent, info.ID+"-*")
	} else {
		pattern = filepath.Join(p.cg.v2Parent, cgroupParent+"-"+info.ID+"-*")
	}
	dirs, _ := filepath.Glob(pattern)
	if len(dirs) != 1 || !strings.HasSuffix(dirs[0], want) {
		t.Errorf("cgroups %v, want the machine's alone", dirs)
	}
	for _, d := range dirs {
		if v1 {
			d = filepath.Join(d, cgroupWork)
		}
		if got, want := readCg(t, filepath.Join(d, "pids.max")), strconv.Itoa(77+machinePidsAllowance)+"\n"; got != want {
			t.Errorf("%s/pids.max = %q, want %q (77 and the machine's allowance)", d, got, want)
		}
	}
	if len(dirs) == 0 {
		t.FailNow()
	}
	// An empty cgroup of a sandbox that no longer exists goes too.
	stale := filepath.Join(filepath.Dir(dirs[0]), strings.Replace(filepath.Base(dirs[0]), info.ID, "sb-zzzzzzzzzz", 1))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if dirs, _ := filepath.Glob(pattern); len(dirs) != 0 {
		t.Errorf("deleting the sandbox left its cgroups: %v", dirs)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("a stale empty cgroup survived a delete: %s", stale)
		os.Remove(stale)
	}
}

// TestDefaultMemoryLimit: a sandbox that asks for no memory limit gets
// half of the host's memory as a cgroup limit where one is available (its
// tmpfs pages are charged there), and info shows the limits in force.
func TestDefaultMemoryLimit(t *testing.T) {
	p := newTestProvider(t)
	ctx := context.Background()
	if !p.cg.controllers["memory"] {
		// Where none is (an unprivileged user on most hosts), info
		// shows no memory limit, --memory is refused as a limit the
		// host cannot enforce, and each process gets the soft
		// RLIMIT_DATA.
		t.Logf("no memory cgroup (%s): checking the sandbox without one", p.cg.describe())
		id := newSandbox(t, p, providers.Spec{})
		info, err := p.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := (providers.Resources{Pids: defaultPids, DiskMB: defaultDiskMB}); info.Resources != want {
			t.Errorf("info.Resources = %+v, want %+v", info.Resources, want)
		}
		if _, err := p.Create(ctx, providers.Spec{Resources: providers.Resources{MemoryMB: 300}}); !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), "--memory") {
			t.Errorf("--memory without a memory cgroup: %v, want ErrUnsupported naming --memory", err)
		}
		var host unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_DATA, &host); err != nil {
			t.Fatal(err)
		}
		want := uint64(float64(hostMemory()) * defaultDataShare)
		if host.Max != unix.RLIM_INFINITY && host.Max < want {
			want = host.Max
		}
		got := strings.Fields(mustRun(t, p, id, "grep '^Max data size' /proc/self/limits"))
		hard := "unlimited"
		if host.Max != unix.RLIM_INFINITY {
			hard = strconv.FormatUint(host.Max, 10)
		}
		if len(got) < 6 || got[3] != strconv.FormatUint(want, 10) || got[4] != hard {
			t.Errorf("the RLIMIT_DATA of a command: %q, want a soft limit of %d and the host's hard limit (%s)", got, want, hard)
		}
		return
	}
	half := int(hostMemory() / 2 >> 20)
	tests := []struct {
		name string
		res  providers.Resources
		want providers.Resources
	}{
		{"defaults", providers.Resources{}, providers.Resources{MemoryMB: half, Pids: defaultPids, DiskMB: defaultDiskMB}},
		{"asked", providers.Resources{MemoryMB: 300, Pids: 50, DiskMB: 700}, providers.Resources{MemoryMB: 300, Pids: 50, DiskMB: 700}},
	}
	for _, tt := range tests {
		id := newSandbox(t, p, providers.Spec{Resources: tt.res})
		info, err := p.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Resources != tt.want {
			t.Errorf("%s: info.Resources = %+v, want %+v", tt.name, info.Resources, tt.want)
		}
		if info.AutoStop != DefaultAutoStop {
			t.Errorf("%s: info.AutoStop = %v, want %v", tt.name, info.AutoStop, DefaultAutoStop)
		}
		file := filepath.Join(p.cg.limitDir("memory", id+"-"+machineCgroup), "memory.limit_in_bytes")
		if p.cg.kind == cgroupV2 {
			file = filepath.Join(p.cg.limitDir("memory", id+"-"+machineCgroup), "memory.max")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: the machine's memory limit: %v", tt.name, err)
		}
		if got, want := strings.TrimSpace(string(b)), strconv.Itoa(tt.want.MemoryMB<<20); got != want {
			t.Errorf("%s: %s = %s, want %s", tt.name, file, got, want)
		}
	}
}

// TestRoomFor: an operation the machine could start no process for is
// told the limit that stopped it: memory where the OOM killer ended a
// process since the operation began, else processes.
func TestRoomFor(t *testing.T) {
	t.Parallel()
	p := &Provider{}
	for _, tc := range []struct {
		name      string
		oomKilled func() bool
		want      string
	}{
		{"no memory limit", nil, "process limit"},
		{"no OOM kill", func() bool { return false }, "process limit"},
		{"an OOM kill", func() bool { return true }, "memory limit is reached"},
	} {
		got := p.roomFor("sb-x", &proc{oomKilled: tc.oomKilled})
		if !strings.Contains(got, tc.want) || !strings.Contains(got, makeRoom) {
			t.Errorf("%s: %q; want it to name the %s and say what to do", tc.name, got, tc.want)
		}
	}
}
