//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// Faults of a sandbox's machine (see machine.go): the machine verbs on
// sandboxes that do not exist, signals that must not reach what is not the
// sandbox's, starts and stops that race each other and the operations, a
// stop or a kill of the init in the middle of a command, and what the
// sandbox's own processes must not do to their init.

// machineInits lists the host pids of the running machine inits of
// sandbox id: the processes of this binary started as an init that hold
// the sandbox's directory as their state directory (machineDirFD). An
// unprivileged user cannot follow that descriptor (/proc/PID/fd of an
// init, which is not dumpable, is the owner's only with CAP_SYS_PTRACE):
// it is then told by the inode and mount of the file it opens, which
// /proc/PID/fdinfo shows.
func machineInits(t *testing.T, p *Provider, id string) []int {
	t.Helper()
	dir := filepath.Join(p.dir, id)
	var want unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_INO|unix.STATX_MNT_ID, &want); err != nil {
		t.Fatal(err)
	}
	if want.Mask&unix.STATX_MNT_ID == 0 {
		t.Fatalf("statx %s: no mount id", dir)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(cmd) != initArgv0+"\x00" {
			continue
		}
		fd := strconv.Itoa(machineDirFD)
		if target, err := os.Readlink("/proc/" + e.Name() + "/fd/" + fd); err == nil {
			if target == dir {
				out = append(out, pid)
			}
			continue
		}
		info, err := os.ReadFile("/proc/" + e.Name() + "/fdinfo/" + fd)
		// An init still setting itself up (another test's, mostly: its
		// ids not yet mapped) may refuse a moment longer.
		for try := 0; errors.Is(err, fs.ErrPermission) && try < 100; try++ {
			time.Sleep(10 * time.Millisecond)
			info, err = os.ReadFile("/proc/" + e.Name() + "/fdinfo/" + fd)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // ended, or has no such descriptor
		}
		if err != nil {
			if procUID(pid) != os.Getuid() {
				continue // another user's
			}
			t.Fatalf("init %d: neither its fd %s nor its fdinfo can be read: %v", pid, fd, err)
		}
		var ino, mnt uint64
		for _, line := range strings.Split(string(info), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "ino":
				ino, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			case "mnt_id":
				mnt, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			}
		}
		if ino == 0 || mnt == 0 {
			t.Fatalf("init %d: fdinfo %s has no inode or mount id: %q", pid, fd, info)
		}
		if ino == want.Ino && mnt == want.Mnt_id {
			out = append(out, pid)
		}
	}
	// A runner the init is starting looks like the init until it
	// executes: it is the init's child.
	all := slices.Clone(out)
	return slices.DeleteFunc(out, func(pid int) bool {
		return slices.Contains(all, parentOf(pid))
	})
}

// procUID is the real user id of the host process pid (-1 when unknown).
func procUID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	if f := strings.Fields(statusLine(b, "Uid")); len(f) > 0 {
		if uid, err := strconv.Atoi(f[0]); err == nil {
			return uid
		}
	}
	return -1
}

// parentOf is the parent pid of the host process pid (0 when unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// assertOneMachine fails unless exactly one init runs for sandbox id and
// its pid file names it.
func assertOneMachine(t *testing.T, p *Provider, id string) {
	t.Helper()
	inits := machineInits(t, p, id)
	rec, alive := liveMachine(filepath.Join(p.dir, id))
	if len(inits) != 1 || !alive || rec.pid != inits[0] {
		t.Errorf("sandbox %s: inits %v, %s names pid %d (alive %v); want exactly one init, the recorded one", id, inits, machinePidFile, rec.pid, alive)
	}
}

// waitExited waits up to ten seconds for the host process pid to end and
// be reaped (an init is the child of the process that started it, here
// the test's, which reaps it).
func waitExited(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after 10s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startBackground starts shell in the background in sandbox id and
// returns its pid.
func startBackground(t *testing.T, p *Provider, id, shell string) int {
	t.Helper()
	res, err := p.Exec(context.Background(), id, providers.ExecRequest{Shell: shell, Background: true})
	if err != nil || res.PID <= 0 {
		t.Fatalf("Exec(%q, Background): pid %d, err %v", shell, res.PID, err)
	}
	return res.PID
}

// runningBackground reports whether Processes lists pid as a running
// background command.
func runningBackground(t *testing.T, p *Provider, id string, pid int) bool {
	t.Helper()
	procs, err := p.Processes(context.Background(), id)
	if err != nil {
		t.Fatalf("Processes(%s): %v", id, err)
	}
	return slices.ContainsFunc(procs, func(pr providers.Process) bool {
		return pr.PID == pid && pr.Background && pr.ExitCode == nil
	})
}

// TestMachineVerbsUnknownSandbox: every verb of providers.Machine on a
// sandbox that does not exist (never created, malformed, deleted) fails
// with ErrNotFound and an error that names the sandbox, and creates
// nothing.
func TestMachineVerbsUnknownSandbox(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	info, err := p.Create(context.Background(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	verbs := []struct {
		name string
		call func(ctx context.Context, id string) error
	}{
		{"Start", func(ctx context.Context, id string) error { return p.Start(ctx, id) }},
		{"Stop", func(ctx context.Context, id string) error { return p.Stop(ctx, id) }},
		{"Processes", func(ctx context.Context, id string) error { _, err := p.Processes(ctx, id); return err }},
		{"Signal", func(ctx context.Context, id string) error { return p.Signal(ctx, id, 2, syscall.SIGTERM) }},
		{"Logs", func(ctx context.Context, id string) error {
			_, err := p.Logs(ctx, id, 2, false, io.Discard)
			return err
		}},
		{"Logs-follow", func(ctx context.Context, id string) error {
			_, err := p.Logs(ctx, id, 2, true, io.Discard)
			return err
		}},
	}
	ids := []struct {
		name, id string
	}{
		{"never-created", "sb-aaaaaaaaaa"},
		{"malformed", "not-a-sandbox"},
		{"path", "../sb-aaaaaaaaaa"},
		{"deleted", info.ID},
	}
	for _, v := range verbs {
		for _, tc := range ids {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				err := v.call(ctx, tc.id)
				if !errors.Is(err, providers.ErrNotFound) {
					t.Fatalf("%s(%q): err = %v, want one matching ErrNotFound", v.name, tc.id, err)
				}
				if !strings.Contains(err.Error(), tc.id) && !strings.Contains(err.Error(), strconv.Quote(tc.id)) {
					t.Errorf("%s(%q): error %q does not name the sandbox", v.name, tc.id, err)
				}
			})
		}
	}
	if _, err := os.Stat(filepath.Join(p.dir, "sb-aaaaaaaaaa")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a verb on an unknown sandbox left a directory behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.dir, info.ID, machinePidFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a verb on a deleted sandbox started a machine: %v", err)
	}
}

// TestSignalOutsideSandbox: Signal reaches only the sandbox's own
// processes. A pid of the host, one that does not exist, the init, and
// the pids kill(2) reads as groups (0, -1) are refused with ErrNotFound
// and a clear message, and nothing is signalled: the host process, the
// sandbox's background command and its init live on.
func TestSignalOutsideSandbox(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	host := exec.Command("sleep", "300")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
	})
	bg := startBackground(t, p, id, "exec sleep 300")
	rec := runningMachine(t, p, id)

	tests := []struct {
		name string
		pid  int
		sig  syscall.Signal
	}{
		{"host-process", host.Process.Pid, syscall.SIGKILL},
		{"no-such-pid", 999999, syscall.SIGTERM},
		{"init", 1, syscall.SIGKILL},
		{"init-host-pid", rec.pid, syscall.SIGKILL},
		{"group-zero", 0, syscall.SIGKILL},
		{"every-process", -1, syscall.SIGKILL},
		{"group-of-background", -bg, syscall.SIGKILL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Signal(context.Background(), id, tc.pid, tc.sig)
			if !errors.Is(err, providers.ErrNotFound) {
				t.Fatalf("Signal(%d, %v): err = %v, want one matching ErrNotFound", tc.pid, tc.sig, err)
			}
			if want := "no process with pid " + strconv.Itoa(tc.pid); !strings.Contains(err.Error(), want) {
				t.Errorf("Signal(%d): error %q does not say %q", tc.pid, err, want)
			}
		})
	}
	if err := host.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host process was signalled through the sandbox: %v", err)
	}
	if !runningBackground(t, p, id, bg) {
		t.Errorf("the sandbox's background command %d no longer runs after the refused signals", bg)
	}
	if now, alive := liveMachine(filepath.Join(p.dir, id)); !alive || now != rec {
		t.Errorf("the machine changed (%+v, alive %v; was %+v) after the refused signals", now, alive, rec)
	}
	if got := mustRun(t, p, id, "echo alive"); got != "alive\n" {
		t.Errorf("exec after the refused signals: %q", got)
	}

	// A stopped sandbox has no process to signal, and stays stopped.
	stopSandbox(t, p, id)
	err := p.Signal(context.Background(), id, bg, syscall.SIGTERM)
	if !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Signal(%d) in a stopped sandbox: err = %v, want ErrNotFound saying it is stopped", bg, err)
	}
	if machineState(filepath.Join(p.dir, id)) != providers.StateStopped {
		t.Errorf("Signal started the stopped sandbox")
	}
}

// TestConcurrentStartsOneMachine: starts of a stopped sandbox racing each
// other (Start, and operations that start it) all succeed and leave one
// machine.
func TestConcurrentStartsOneMachine(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	writeString(t, p, id, "/workspace/kept", "kept\n")
	for round := range 3 {
		stopSandbox(t, p, id)
		if inits := machineInits(t, p, id); len(inits) != 0 {
			t.Fatalf("round %d: inits %v still run after Stop", round, inits)
		}
		starters := []func() error{
			func() error { return p.Start(context.Background(), id) },
			func() error { return p.Start(context.Background(), id) },
			func() error {
				if r := run(t, p, id, "cat /workspace/kept"); r.err != nil || r.stdout != "kept\n" {
					return fmt.Errorf("exec: stdout %q, exit %d, err %v", r.stdout, r.code, r.err)
				}
				return nil
			},
			func() error {
				_, err := readAll(t, p, id, "/workspace/kept")
				return err
			},
		}
		errs := make([]error, len(starters))
		var wg sync.WaitGroup
		for i, start := range starters {
			wg.Go(func() { errs[i] = start() })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: concurrent start %d of the stopped sandbox: %v", round, i, err)
			}
		}
		assertOneMachine(t, p, id)
		if note := p.TakeNote(id); note != "" {
			t.Errorf("round %d: a stopped sandbox's start left a note of a crash: %q", round, note)
		}
	}
}

// TestStopDuringForegroundCommand: a command running when its sandbox is
// stopped ends with the status of the signal that ended it (143 for the
// stop's SIGTERM, 137 for the SIGKILL after the grace period), and the
// stop is not reported as a crash of the sandbox.
func TestStopDuringForegroundCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		shell string
		codes []int
	}{
		{"ends-on-term", "echo started; sleep 30", []int{143}},
		// The shell ignores SIGTERM, its sleep does not: either ends it.
		{"ignores-term", "trap '' TERM; echo started; while :; do sleep 1; done", []int{137, 143}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newTestProvider(t)
			id := newSandbox(t, p, providers.Spec{})
			var out, errb providertest.Buffer
			done := make(chan struct{})
			var res providers.ExecResult
			var err error
			go func() {
				defer close(done)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				res, err = p.Exec(ctx, id, providers.ExecRequest{Shell: tc.shell, Stdout: &out, Stderr: &errb})
			}()
			deadline := time.Now().Add(30 * time.Second)
			for out.String() != "started\n" {
				if time.Now().After(deadline) {
					t.Fatalf("the command never started: stdout %q", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			stopSandbox(t, p, id)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Exec did not return within 30s of the stop")
			}
			if err != nil {
				if errors.Is(err, providers.ErrUnavailable) || strings.Contains(err.Error(), "ended without reporting") {
					t.Fatalf("Exec during Stop reported a crash: %v", err)
				}
				if !strings.Contains(err.Error(), "stopped") {
					t.Fatalf("Exec during Stop: err = %v, want a status or an error saying the sandbox was stopped", err)
				}
			}
			if !slices.Contains(tc.codes, res.ExitCode) {
				t.Errorf("Exec during Stop: exit %d (err %v, stderr %q), want one of %v", res.ExitCode, err, errb.String(), tc.codes)
			}
			if note := p.TakeNote(id); note != "" {
				t.Errorf("a stop left a note of a crash: %q", note)
			}
			if machineState(filepath.Join(p.dir, id)) != providers.StateStopped {
				t.Errorf("the sandbox is not stopped after Stop")
			}
			assertRuns(t, p, id, "exec after the stop")
			if note := p.TakeNote(id); note != "" {
				t.Errorf("the start after a stop left a note of a crash: %q", note)
			}
		})
	}
}

// TestCommandSignalDefaults: the signals the init ignores are back to
// their defaults in the sandbox's commands (foreground and background):
// none is ignored or blocked, and Signal ends a background command with
// any of them.
func TestCommandSignalDefaults(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	const show = "grep -E '^Sig(Ign|Blk):' /proc/self/status"
	want := "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
	if got := mustRun(t, p, id, show); got != want {
		t.Errorf("a command's ignored and blocked signals:\n%s\nwant none:\n%s", got, want)
	}
	pid := startBackground(t, p, id, show)
	var b providertest.Buffer
	if code, err := p.Logs(context.Background(), id, pid, true, &b); err != nil || code == nil || *code != 0 || b.String() != want {
		t.Errorf("a background command's ignored and blocked signals: %q (status %s, err %v), want none", b.String(), codeText(code), err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGALRM, syscall.SIGPIPE} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			pid := startBackground(t, p, id, "exec sleep 300")
			if err := p.Signal(context.Background(), id, pid, sig); err != nil {
				t.Fatalf("Signal(%d, %v): %v", pid, sig, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			code, err := p.Logs(ctx, id, pid, true, io.Discard)
			if err != nil || code == nil || *code != 128+int(sig) {
				t.Errorf("background command after %v: status %s, err %v; want %d", sig, codeText(code), err, 128+int(sig))
			}
		})
	}
}

// codeText shows an exit status that may be missing.
func codeText(code *int) string {
	if code == nil {
		return "none"
	}
	return strconv.Itoa(*code)
}

// TestInitKilledDuringCommand: a command whose machine is killed (not
// stopped) ends in an error that says the sandbox ended without
// reporting, never that it was stopped, and the next start notes it. What
// the init wrote to its stderr (where its runtime explains a fatal error)
// is in both; the test writes those words itself before the kill.
func TestInitKilledDuringCommand(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	for _, background := range []bool{false, true} {
		var out providertest.Buffer
		done := make(chan error, 1)
		go func() {
			_, err := p.Exec(context.Background(), id, providers.ExecRequest{Shell: "echo started; exec sleep 30", Stdout: &out})
			done <- err
		}()
		if background {
			startBackground(t, p, id, "exec sleep 300")
		}
		deadline := time.Now().Add(30 * time.Second)
		for out.String() != "started\n" {
			if time.Now().After(deadline) {
				t.Fatalf("the command never started: stdout %q", out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		dir := filepath.Join(p.dir, id)
		rec, alive := liveMachine(dir)
		if !alive {
			t.Fatal("no machine runs")
		}
		// Only root may look into the (undumpable) init.
		if os.Geteuid() == 0 {
			stderr, err := os.Readlink("/proc/" + strconv.Itoa(rec.pid) + "/fd/2")
			if err != nil || stderr != filepath.Join(dir, lastWordsFile) {
				t.Errorf("the init's stderr is %q (%v), want its state's %s", stderr, err, lastWordsFile)
			}
		}
		words := ""
		if !background {
			words = "fatal error: the test's last words"
			if err := os.WriteFile(filepath.Join(dir, lastWordsFile), []byte("\n"+words+"\n\ngoroutine 1 [running]:\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Kill(rec.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Exec did not return within 30s of the init's death")
		}
		if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "ended without reporting") || strings.Contains(err.Error(), "stopped") {
			t.Errorf("Exec whose init was killed (background command running: %v): err = %v, want ErrUnavailable saying the sandbox ended without reporting", background, err)
		}
		if words != "" && !strings.HasSuffix(err.Error(), "the machine ended: "+words+"; goroutine 1 [running]:") {
			t.Errorf("Exec whose init wrote %q before it was killed: err = %v, want its first two lines", words, err)
		}
		waitExited(t, rec.pid)
		assertRuns(t, p, id, "exec after the init was killed")
		why := "(its machine was killed, or the host restarted)"
		if words != "" {
			why = "(its machine ended: " + words + "; goroutine 1 [running]:)"
		}
		if note := p.TakeNote(id); !strings.Contains(note, "without being asked") || !strings.Contains(note, why) {
			t.Errorf("TakeNote after the init was killed during a command: %q, want it to say %q", note, why)
		}
	}
}

// TestInitKilledFromHost: a SIGKILL of the init from the host ends the
// machine; the sandbox counts as stopped, and the next operation starts
// it again with its files, once TakeNote says what happened.
func TestInitKilledFromHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		next func(t *testing.T, p *Provider, id string) error
	}{
		{"exec", func(t *testing.T, p *Provider, id string) error {
			if r := run(t, p, id, "cat /workspace/kept"); r.err != nil || r.stdout != "kept\n" {
				return fmt.Errorf("exec: stdout %q, exit %d, err %v", r.stdout, r.code, r.err)
			}
			return nil
		}},
		{"read", func(t *testing.T, p *Provider, id string) error {
			b, err := readAll(t, p, id, "/workspace/kept")
			if err == nil && string(b) != "kept\n" {
				err = fmt.Errorf("read %q", b)
			}
			return err
		}},
		{"write", func(t *testing.T, p *Provider, id string) error {
			return p.WriteFile(context.Background(), id, "/workspace/other", strings.NewReader("x"), 0o644)
		}},
		{"start", func(t *testing.T, p *Provider, id string) error { return p.Start(context.Background(), id) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newTestProvider(t)
			id := newSandbox(t, p, providers.Spec{})
			dir := filepath.Join(p.dir, id)
			writeString(t, p, id, "/workspace/kept", "kept\n")
			mustRun(t, p, id, "echo scratch > /tmp/scratch")
			bg := startBackground(t, p, id, "exec sleep 300")
			rec, alive := liveMachine(dir)
			if !alive {
				t.Fatal("no machine runs")
			}
			if err := syscall.Kill(rec.pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitExited(t, rec.pid)
			if got := machineState(dir); got != providers.StateStopped {
				t.Errorf("state after the init was killed: %s, want stopped", got)
			}
			if info, err := p.Get(context.Background(), id); err != nil || info.State != providers.StateStopped {
				t.Errorf("Get after the init was killed: %+v, %v; want it stopped", info, err)
			}
			if err := tc.next(t, p, id); err != nil {
				t.Fatalf("the next operation (%s) after the init was killed: %v", tc.name, err)
			}
			assertOneMachine(t, p, id)
			if now, _ := liveMachine(dir); now == rec {
				t.Errorf("the machine record did not change: %+v", now)
			}
			note := p.TakeNote(id)
			for _, want := range []string{id, "without being asked", "started again", "files intact"} {
				if !strings.Contains(note, want) {
					t.Errorf("TakeNote after a killed init = %q, want it to say %q", note, want)
				}
			}
			if again := p.TakeNote(id); again != "" {
				t.Errorf("a second TakeNote = %q, want the note given once", again)
			}
			if got := mustRun(t, p, id, "cat /workspace/kept; ls /tmp | wc -l"); got != "kept\n0\n" {
				t.Errorf("after the restart: %q, want the workspace kept and /tmp empty", got)
			}
			if runningBackground(t, p, id, bg) {
				t.Errorf("the background command %d runs on after its init was killed", bg)
			}
		})
	}
}

// TestConcurrentOpsAndStops: twenty goroutines running commands, writing
// files and stopping one sandbox at once leave it consistent: each call
// either worked or failed with a clear error, the next command works, Get
// works, and at most one machine runs (exactly one while it counts as
// running).
func TestConcurrentOpsAndStops(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	const workers, rounds = 20, 4
	var mu sync.Mutex
	var failures []string
	ok := 0
	record := func(op string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			ok++
			return
		}
		// A call cut by a stop is refused as unavailable (try again)
		// or reports the stop; none hangs, panics or names a crash.
		if !errors.Is(err, providers.ErrUnavailable) && !strings.Contains(err.Error(), "stop") {
			failures = append(failures, op+": "+err.Error())
		}
		if strings.Contains(err.Error(), "ended without reporting") {
			failures = append(failures, op+" reported a crash: "+err.Error())
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				name := fmt.Sprintf("/workspace/w%d-%d", w, r)
				switch (w + r) % 4 {
				case 0:
					res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "echo " + name + " > " + name + "; cat " + name, Stdout: io.Discard})
					if err == nil && res.ExitCode != 0 && res.ExitCode != 137 && res.ExitCode != 143 {
						err = fmt.Errorf("exit %d", res.ExitCode)
					}
					record("exec", err)
				case 1:
					record("write", p.WriteFile(ctx, id, name, strings.NewReader(name), 0o644))
				case 2:
					record("stop", p.Stop(ctx, id))
				case 3:
					_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "sleep 0.2", Background: true})
					record("background", err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Errorf("a call during the stops failed unclearly: %s", f)
	}
	if ok == 0 {
		t.Errorf("no call of %d succeeded", workers*rounds)
	}
	info, err := p.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get after the storm: %v", err)
	}
	inits := machineInits(t, p, id)
	switch {
	case len(inits) > 1:
		t.Errorf("%d machines run for one sandbox: %v", len(inits), inits)
	case info.State == providers.StateRunning && len(inits) != 1:
		t.Errorf("Get says running, but %d inits run", len(inits))
	case info.State == providers.StateStopped && len(inits) != 0:
		t.Errorf("Get says stopped, but inits %v run", inits)
	}
	if got := mustRun(t, p, id, "echo final"); got != "final\n" {
		t.Errorf("the command after the storm: %q", got)
	}
	assertOneMachine(t, p, id)
	if note := p.TakeNote(id); note != "" {
		t.Errorf("stops left a note of a crash: %q", note)
	}
}

// TestInitUnreachableFromInside: the sandbox's own processes can do
// nothing to their init (PID 1): not read its descriptors (one of which is
// the sandbox's directory on the host), memory, environment or root, not
// trace it, not end it with any signal, and not reach the socket through
// which the host drives it.
func TestInitUnreachableFromInside(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	dir := filepath.Join(p.dir, id)
	rec, alive := liveMachine(dir)
	if !alive {
		t.Fatal("no machine runs")
	}
	// assertSameInit fails unless the init that ran at the start still
	// runs and answers.
	// A failure restarts the sandbox and compares later checks with the
	// new init.
	assertSameInit := func(t *testing.T, after string) {
		t.Helper()
		now, alive := liveMachine(dir)
		got := mustRun(t, p, id, "echo next")
		note := p.TakeNote(id)
		if !alive || now != rec {
			t.Errorf("after %s the init is gone (%+v, alive %v; was %+v); the next operation started the sandbox again (note %q)", after, now, alive, rec, note)
			rec, _ = liveMachine(dir)
			return
		}
		if got != "next\n" || note != "" {
			t.Errorf("after %s: exec printed %q, note %q; want the same machine answering", after, got, note)
		}
	}

	t.Run("descriptors", func(t *testing.T) {
		// Not one descriptor can be opened, followed or described, in
		// particular the sandbox's directory on the host (machineDirFD)
		// and the machine's socket (machineListenFD). (Where the host
		// user is root, the sandbox's root owns the init's /proc entries
		// and may list the numbers in /proc/1/fd; nothing more.)
		dirFD, lnFD := strconv.Itoa(machineDirFD), strconv.Itoa(machineListenFD)
		for _, shell := range []string{
			"ls /proc/1/fdinfo",
			"cat /proc/1/fdinfo/0",
			"cat /proc/1/fdinfo/" + dirFD,
			"ls /proc/1/fd/" + dirFD + "/",
			"cat /proc/1/fd/" + dirFD + "/" + metaFile,
			"cd /proc/1/fd/" + dirFD,
			"cat /proc/1/fd/0",
			"readlink /proc/1/fd/" + dirFD,
			"readlink /proc/1/fd/" + lnFD,
			"exec 9</proc/1/fd/" + dirFD,
			"ls /proc/1/cwd/",
			"readlink /proc/1/cwd",
			"ls /proc/1/map_files/",
		} {
			r := run(t, p, id, shell)
			if r.err != nil {
				t.Fatalf("%q: %v", shell, r.err)
			}
			if r.code == 0 {
				t.Errorf("%q inside the sandbox succeeded (%q): the init's descriptors must be out of reach", shell, r.stdout)
			}
		}
		// Every descriptor, whatever the listing shows: none can be
		// followed, and nothing shows the host's side.
		r := run(t, p, id, `for n in $(seq 0 64); do readlink /proc/1/fd/$n && echo "FOLLOWED-$n"; cat /proc/1/fd/$n/`+metaFile+` 2>/dev/null && echo "READ-$n"; done 2>/dev/null; ls -la /proc/1/fd/ 2>&1; echo end`)
		if r.err != nil || !strings.HasSuffix(r.stdout, "end\n") {
			t.Fatalf("the descriptor walk: stdout %q, err %v", r.stdout, r.err)
		}
		for _, leak := range []string{"FOLLOWED-", "READ-", "->", id, "created_at", "socket:", p.dir} {
			if strings.Contains(r.stdout, leak) {
				t.Errorf("the sandbox reached its init's descriptors (%q in the output): %q", leak, r.stdout)
			}
		}
	})

	t.Run("ptrace", func(t *testing.T) {
		for _, shell := range []string{
			"head -c1 /proc/1/mem",
			"cat /proc/1/environ",
			"cat /proc/1/maps",
			"cat /proc/1/stack",
			"cat /proc/1/syscall",
			"ls /proc/1/root/",
			"readlink /proc/1/exe",
			"cat /proc/1/exe",
		} {
			r := run(t, p, id, shell)
			if r.err != nil {
				t.Fatalf("%q: %v", shell, r.err)
			}
			if r.code == 0 {
				t.Errorf("%q inside the sandbox succeeded (%d bytes): the init must not be inspectable", shell, len(r.stdout))
			}
		}
		if r := run(t, p, id, "command -v python3"); r.code != 0 {
			t.Logf("no python3 in the sandbox: ptrace(2) itself is not tried (the /proc checks above stand for it)")
			return
		}
		// ptrace(2) itself: attach, and seize, to PID 1.
		const script = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
for name, req in (("attach", 16), ("seize", 0x4206)):
    r = libc.ptrace(ctypes.c_long(req), ctypes.c_long(1), None, None)
    print(name, "ok" if r == 0 else "denied " + os.strerror(ctypes.get_errno()))
`
		r := run(t, p, id, "python3 -c \"$S\"", func(r *providers.ExecRequest) { r.Env = map[string]string{"S": script} })
		if r.err != nil || r.code != 0 {
			t.Fatalf("the ptrace probe: exit %d, err %v, stderr %q", r.code, r.err, r.stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if !strings.Contains(line, "denied") {
				t.Errorf("ptrace of the init: %q, want it denied", line)
			}
		}
		if strings.Count(r.stdout, "denied") != 2 {
			t.Errorf("the ptrace probe printed %q, want two denials", r.stdout)
		}
		assertSameInit(t, "the ptrace attempts")
	})

	t.Run("signals", func(t *testing.T) {
		// Every signal by name, as kill(1) and as a shell's kill
		// builtin; the init must ignore them all.
		sigs := []string{"KILL", "TERM", "INT", "HUP", "QUIT", "ABRT", "USR1", "USR2", "ALRM", "PIPE",
			"SEGV", "BUS", "FPE", "ILL", "TRAP", "SYS", "XCPU", "XFSZ", "STKFLT", "PROF", "VTALRM", "IO", "PWR",
			"STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH"}
		for _, sig := range sigs {
			t.Run(sig, func(t *testing.T) {
				r := run(t, p, id, "kill -s "+sig+" 1; /bin/kill -s "+sig+" 1 2>/dev/null; echo sent")
				if r.err != nil || !strings.HasSuffix(r.stdout, "sent\n") {
					t.Fatalf("kill -s %s 1: stdout %q, err %v", sig, r.stdout, r.err)
				}
				// A stopped init answers no operation: wait a little
				// for a signal that takes effect late.
				time.Sleep(50 * time.Millisecond)
				assertSameInit(t, "kill -s "+sig+" 1")
			})
		}
		// Real-time signals, by number.
		r := run(t, p, id, `for s in $(seq 34 64); do kill -s $s 1 2>/dev/null || kill -$s 1; done; echo sent`)
		if r.err != nil || !strings.HasSuffix(r.stdout, "sent\n") {
			t.Fatalf("real-time signals: stdout %q, err %v", r.stdout, r.err)
		}
		assertSameInit(t, "the real-time signals")

		if r := run(t, p, id, "command -v python3"); r.code != 0 {
			t.Logf("no python3 in the sandbox: queued signals are not tried")
			return
		}
		// Signals that carry a code of their own, which the Go runtime
		// of the init cannot tell from a fault of its own: queued
		// (SI_QUEUE) to the process, to each of its threads, through a
		// pidfd, and sent by the kernel for I/O on a descriptor the
		// init was made the owner of (F_SETOWN, F_SETSIG). Each route
		// must fail or be ignored.
		const script = `import ctypes, fcntl, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
class SigInfo(ctypes.Structure):
    _fields_ = [("signo", ctypes.c_int), ("errno", ctypes.c_int), ("code", ctypes.c_int), ("pad", ctypes.c_byte * 116)]
route, sig = sys.argv[1], int(sys.argv[2])
queue, tgqueue, pidfd_open, pidfd_send = (int(a) for a in sys.argv[3:7])
info = SigInfo(sig, 0, -1)
if route == "queue":
    libc.syscall(L(queue), L(1), L(sig), ctypes.byref(info))
elif route == "tgqueue":
    for tid in os.listdir("/proc/1/task"):
        libc.syscall(L(tgqueue), L(1), L(int(tid)), L(sig), ctypes.byref(info))
elif route == "pidfd":
    fd = libc.syscall(L(pidfd_open), L(1), L(0))
    libc.syscall(L(pidfd_send), L(fd), L(sig), ctypes.byref(info), L(0))
elif route == "setsig":
    r, w = os.pipe()
    try:
        fcntl.fcntl(r, fcntl.F_SETOWN, 1)
        fcntl.fcntl(r, 10, sig)  # F_SETSIG
        fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
        os.write(w, b"x")
    except OSError:
        pass
print("sent")
`
		nums := []string{strconv.Itoa(unix.SYS_RT_SIGQUEUEINFO), strconv.Itoa(unix.SYS_RT_TGSIGQUEUEINFO),
			strconv.Itoa(unix.SYS_PIDFD_OPEN), strconv.Itoa(unix.SYS_PIDFD_SEND_SIGNAL)}
		for _, route := range []string{"queue", "tgqueue", "pidfd", "setsig"} {
			for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGSTKFLT, syscall.SIGTERM} {
				name := route + "-" + unix.SignalName(sig)
				t.Run(name, func(t *testing.T) {
					args := append([]string{route, strconv.Itoa(int(sig))}, nums...)
					r := run(t, p, id, `python3 -c "$S" `+strings.Join(args, " "), func(r *providers.ExecRequest) { r.Env = map[string]string{"S": script} })
					time.Sleep(50 * time.Millisecond)
					assertSameInit(t, name)
					if r.err != nil || r.stdout != "sent\n" {
						t.Errorf("the %s probe: stdout %q, exit %d, err %v, stderr %q", name, r.stdout, r.code, r.err, r.stderr)
					}
				})
			}
		}
	})

	t.Run("control-socket", func(t *testing.T) {
		sock := filepath.Join(dir, machineSockName())
		if _, err := os.Stat(sock); err != nil {
			t.Fatalf("the machine's socket is not at %s on the host: %v", sock, err)
		}
		// Its host path and its directory are not there inside.
		for _, path := range []string{sock, dir, p.dir} {
			if r := run(t, p, id, "test -e '"+path+"'"); r.err != nil || r.code == 0 {
				t.Errorf("%s is visible inside the sandbox (exit %d, err %v)", path, r.code, r.err)
			}
		}
		if r := run(t, p, id, "find / -xdev -name 'machine-*.sock' 2>/dev/null; find /tmp /run /workspace $HOME -name '*.sock' 2>/dev/null; echo end"); r.stdout != "end\n" {
			t.Errorf("a machine socket is visible inside the sandbox: %q", r.stdout)
		}
		if r := run(t, p, id, "command -v python3"); r.code != 0 {
			t.Logf("no python3 in the sandbox: connect(2) is not tried")
			return
		}
		// connect(2): the socket's name as an abstract address, its
		// host path, and the init's listening descriptor through /proc.
		const script = `import socket, sys
for addr in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr.replace("@", "\0", 1) if addr.startswith("@") else addr)
        print(addr, "connected")
    except OSError as e:
        print(addr, "refused", e.errno)
    finally:
        s.close()
`
		addrs := []string{"@" + machineSockName(), "@" + sock, sock, "/proc/1/fd/" + strconv.Itoa(machineListenFD)}
		r := run(t, p, id, `python3 -c "$S" `+strings.Join(quoteAll(addrs), " "), func(r *providers.ExecRequest) {
			r.Env = map[string]string{"S": script}
		})
		if r.err != nil || r.code != 0 {
			t.Fatalf("the connect probe: exit %d, err %v, stderr %q", r.code, r.err, r.stderr)
		}
		if strings.Contains(r.stdout, "connected") || strings.Count(r.stdout, "refused") != len(addrs) {
			t.Errorf("connecting to the machine's socket from inside: %q, want every attempt refused", r.stdout)
		}
		assertSameInit(t, "the connect attempts")
	})
}

// quoteAll single-quotes words for a shell.
func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return out
}

// TestSeccompSignalRules: the filter's rules that keep signals with a
// code of their own from the init (see TestInitUnreachableFromInside for
// their effect): a queue to PID 1 or its threads, F_SETSIG, and a
// pidfd_send_signal carrying a siginfo fail with EPERM; the same calls
// otherwise pass.
func TestSeccompSignalRules(t *testing.T) {
	t.Parallel()
	raw, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	tests := []struct {
		name string
		nr   uintptr
		args []uint64
		want uint32
	}{
		{"sigqueue-init", unix.SYS_RT_SIGQUEUEINFO, []uint64{1, uint64(unix.SIGSEGV), 0x1000}, secEPERM},
		{"sigqueue-init-high-bits", unix.SYS_RT_SIGQUEUEINFO, []uint64{0xffffffff00000001, uint64(unix.SIGSEGV), 0x1000}, secEPERM},
		{"sigqueue-other", unix.SYS_RT_SIGQUEUEINFO, []uint64{42, uint64(unix.SIGUSR1), 0x1000}, secAllow},
		{"tgsigqueue-init", unix.SYS_RT_TGSIGQUEUEINFO, []uint64{1, 7, uint64(unix.SIGBUS), 0x1000}, secEPERM},
		{"tgsigqueue-other", unix.SYS_RT_TGSIGQUEUEINFO, []uint64{42, 42, uint64(unix.SIGUSR1), 0x1000}, secAllow},
		{"fcntl-setsig", unix.SYS_FCNTL, []uint64{3, unix.F_SETSIG, uint64(unix.SIGSEGV)}, secEPERM},
		{"fcntl-setown", unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN, 1}, secAllow},
		{"fcntl-setfl", unix.SYS_FCNTL, []uint64{3, unix.F_SETFL, unix.O_NONBLOCK}, secAllow},
		{"pidfd-send-info", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{3, uint64(unix.SIGSEGV), 0x7fff0000, 0}, secEPERM},
		{"pidfd-send-info-high", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{3, uint64(unix.SIGSEGV), 0x7fff00000000, 0}, secEPERM},
		{"pidfd-send-plain", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{3, uint64(unix.SIGTERM), 0, 0}, secAllow},
		{"kill-init", unix.SYS_KILL, []uint64{1, uint64(unix.SIGTERM)}, secAllow},
		{"getpid", unix.SYS_GETPID, nil, secAllow},
	}
	for _, tc := range tests {
		got, err := vm.Run(seccompData(auditArch, uint32(tc.nr), tc.args...))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if uint32(got) != tc.want {
			t.Errorf("%s: filter returns %#x, want %#x", tc.name, uint32(got), tc.want)
		}
	}
}

// TestStopFollowsContext: a stop whose context ends during the grace
// period given to processes that ignore SIGTERM kills the machine at once
// and returns the context's error, instead of waiting the grace out.
func TestStopFollowsContext(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "sh -c 'trap \"\" TERM; touch /tmp/trapped; while :; do sleep 1; done' >/dev/null 2>&1 & while [ ! -e /tmp/trapped ]; do sleep 0.05; done")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.Stop(ctx, id)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a context that ends: %v", err)
	}
	if took >= stopGrace {
		t.Errorf("Stop took %v, the whole grace period (%v)", took, stopGrace)
	}
	if _, alive := liveMachine(filepath.Join(p.dir, id)); alive {
		t.Errorf("the machine still runs after the stop")
	}
	assertRuns(t, p, id, "after the stop")
}

// TestDyingInitIsACrash checks how a start judges a recorded init that is
// alive but does not answer: one whose socket refuses connections was
// killed and is still ending (it waits for the sandbox's processes), so
// the next start says that the sandbox had stopped without being asked
// to; one whose socket is gone was being stopped, which is no crash.
func TestDyingInitIsACrash(t *testing.T) {
	tests := []struct {
		name       string
		deadSocket bool
		wantNote   bool
	}{
		{"socket refuses", true, true},
		{"socket gone", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t)
			id := newSandbox(t, p, providers.Spec{})
			dir := filepath.Join(p.dir, id)
			mustRun(t, p, id, "true")
			stopSandbox(t, p, id)
			_ = p.TakeNote(id)
			// A live process recorded as the init, which answers
			// nothing.
			stand := exec.Command("sleep", "60")
			if err := stand.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = stand.Process.Kill(); _ = stand.Wait() })
			start, err := procStartTime(stand.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, machinePidFile), []byte(fmt.Sprintf("%d %d", stand.Process.Pid, start)), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.deadSocket {
				err := withDir(dir, func(short string) error {
					ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: short + "/" + machineSockName(), Net: "unix"})
					if err != nil {
						return err
					}
					ln.SetUnlinkOnClose(false)
					return ln.Close()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := mustRun(t, p, id, "echo up"); got != "up\n" {
				t.Fatalf("exec after the recorded init: %q", got)
			}
			note := p.TakeNote(id)
			if got := strings.Contains(note, "without being asked to"); got != tc.wantNote {
				t.Errorf("note %q: crash said %v, want %v", note, got, tc.wantNote)
			}
		})
	}
}

// TestProcessLimitFull: with the sandbox's process limit full, an
// operation that needs a new process fails at once with an error that says
// so and what to do, the machine lives on (ps, stop), and once stopped the
// sandbox runs commands again.
func TestProcessLimitFull(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{Resources: providers.Resources{Pids: 64}})
	ctx := context.Background()
	// Sleepers until the limit stops them (400 tries), then the loop's
	// shell becomes a sleeper too.
	startBackground(t, p, id, "for i in $(seq 400); do sleep 300 & done 2>/dev/null; exec sleep 300")
	deadline := time.Now().Add(30 * time.Second)
	for filling := true; filling; {
		procs, err := p.Processes(ctx, id)
		if err != nil {
			t.Fatalf("ps with the limit full: %v", err)
		}
		filling = slices.ContainsFunc(procs, func(pr providers.Process) bool { return strings.Contains(strings.Join(pr.Argv, " "), "seq 400") })
		if time.Now().After(deadline) {
			t.Fatalf("the sleepers never filled the limit: %d processes", len(procs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Runners prepared before the limit filled go on serving (they are
	// reused); an operation that needs a runner of a kind the machine
	// has none of (another user, the host's network) needs a new
	// process. (Without the pids cgroup, RLIMIT_NPROC counts per user:
	// the sandbox's commands fill their user's count, not the
	// machine's own.)
	ops := map[string]func() error{
		"exec as another user": func() error {
			return run(t, p, id, "echo hi", func(r *providers.ExecRequest) { r.User = "nobody" }).err
		},
		"exec on the host's network": func() error {
			return run(t, p, id, "echo hi", func(r *providers.ExecRequest) { r.Network = providers.NetworkOn }).err
		},
		"exec": func() error { return run(t, p, id, "echo hi").err },
	}
	if !p.cg.controllers["pids"] {
		t.Logf("no pids cgroup here (%s): the machine's own processes are not in the commands' count", p.cg.describe())
		ops = nil
	}
	for name, op := range ops {
		err := op()
		if name == "exec" && err == nil {
			continue // a reused runner served it
		}
		if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "process limit") || !strings.Contains(err.Error(), "sandbox stop") {
			t.Errorf("%s with the process limit full: %v; want ErrUnavailable saying that the limit is full and what to do", name, err)
		}
	}
	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("stop with the limit full: %v", err)
	}
	assertRuns(t, p, id, "after the stop")
}

// TestCommandSignalsItsRunner: a command runs as the sandbox's user, like
// the runner that started it, so it can signal that runner. Stopped, the
// runner is let go on and the command's result still arrives; killed, the
// call fails saying what happened, and the sandbox runs on.
func TestCommandSignalsItsRunner(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	r := run(t, p, id, "kill -STOP $PPID; echo after", func(r *providers.ExecRequest) { r.Timeout = 30 * time.Second })
	if r.err != nil || r.code != 0 || r.stdout != "after\n" {
		t.Errorf("a command that stopped its runner: stdout %q, exit %d, err %v; want its output and status", r.stdout, r.code, r.err)
	}
	r = run(t, p, id, "kill -KILL $PPID; sleep 1")
	if !errors.Is(r.err, providers.ErrUnavailable) || !strings.Contains(r.err.Error(), "killed") || !strings.Contains(r.err.Error(), "runs on") {
		t.Errorf("a command that killed its runner: %v; want ErrUnavailable saying that a process in the sandbox may have killed it", r.err)
	}
	assertRuns(t, p, id, "the next command")
}

// TestMemoryFullSaysSo: a command that fills the sandbox's memory limit
// with many processes smaller than the machine's own may have its runner,
// or the machine's init, ended by the kernel's OOM killer (the init is not
// spared: lowering its oom_score_adj needs CAP_SYS_RESOURCE, which root
// lacks on such hosts, and raising the runners' needs a /proc the sandbox
// has read-only); the call then says that the memory limit was reached,
// and the sandbox runs commands after.
func TestMemoryFullSaysSo(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	if !p.cg.controllers["memory"] {
		t.Logf("no memory cgroup here (%s): --memory is refused", p.cg.describe())
		return
	}
	ctx := context.Background()
	id := newSandbox(t, p, providers.Spec{Resources: providers.Resources{MemoryMB: 64}})
	mustRun(t, p, id, "echo kept > /tmp/mark")
	init := runningMachine(t, p, id).pid
	// 40 processes of ~2.5 MiB each, more than the limit together, each
	// smaller than the runner: the OOM killer ends one of them too. The
	// runner may survive a round; three rounds at most.
	var err error
	for round := 0; round < 3 && err == nil; round++ {
		r := run(t, p, id, `for i in $(seq 40); do (x=$(head -c 2500000 /dev/zero | tr "\0" a); sleep 20) & done; sleep 3; pkill sleep; echo done`,
			func(r *providers.ExecRequest) { r.Timeout = 60 * time.Second })
		err = r.err
	}
	if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "memory limit was reached") {
		t.Errorf("filling the memory limit: %v; want an error saying that the memory limit was reached", err)
	}
	// With the memory still full, an operation that fails says why.
	if r := run(t, p, id, "true"); r.err != nil && (!strings.Contains(r.err.Error(), "memory limit") || strings.Contains(r.err.Error(), "process limit")) {
		t.Errorf("an operation while the memory is full: %v; want an error that names the memory limit", r.err)
	} else {
		t.Logf("an operation while the memory is full: %v", r.err)
	}
	// The init is outside the limit (on cgroup v1, see cgroupWork):
	// with the memory still full, it lists and ends what filled it, and
	// the machine goes on with its files and processes.
	procs, err := p.Processes(ctx, id)
	if err != nil {
		t.Fatalf("list the processes of a sandbox whose memory is full: %v", err)
	}
	killed := map[int]bool{}
	for _, pr := range procs {
		if p.Signal(ctx, id, pr.PID, syscall.SIGKILL) == nil {
			killed[pr.PID] = true
		}
	}
	// Their memory is theirs until they have ended: on a loaded host
	// the next command could still find the limit full.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		left, err := p.Processes(ctx, id)
		if err != nil || !slices.ContainsFunc(left, func(pr providers.Process) bool { return killed[pr.PID] }) {
			break
		}
	}
	if got := mustRun(t, p, id, "cat /tmp/mark"); got != "kept\n" {
		t.Errorf("after the memory filled: /tmp/mark is %q", got)
	}
	if now := runningMachine(t, p, id).pid; now != init && p.cg.kind == cgroupV1 {
		t.Errorf("the machine's init was %d and is %d: filling the memory limit ended it", init, now)
	}
}
