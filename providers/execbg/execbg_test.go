//go:build linux

package execbg

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// hostRunner runs the package's commands on this host, as a sandbox
// would: /bin/sh -c for a shell string, and files read from disk.
type hostRunner struct{}

func (hostRunner) Exec(ctx context.Context, _ string, req providers.ExecRequest) (providers.ExecResult, error) {
	argv := req.Argv
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = req.Cwd, req.Stdout, req.Stderr
	start := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return providers.ExecResult{ExitCode: ee.ExitCode(), Duration: time.Since(start)}, nil
	}
	return providers.ExecResult{Duration: time.Since(start)}, err
}

func (hostRunner) ReadFile(_ context.Context, _, path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, providers.ErrNotFound
	}
	return f, err
}

// newMachine returns a Machine on this host with records in a fresh
// directory.
func newMachine(t *testing.T) *Machine {
	t.Helper()
	return &Machine{Provider: "test", Runner: hostRunner{}, Dir: filepath.Join(t.TempDir(), "bg")}
}

// start starts command in the background or fails t.
func start(t *testing.T, m *Machine, command string) int {
	t.Helper()
	begin := time.Now()
	res, err := m.Background(t.Context(), "", command)
	if err != nil || res.PID <= 0 {
		t.Fatalf("Background(%q) = %+v, %v; want a pid", command, res, err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Background(%q) returned after %v, want at once", command, d)
	}
	t.Cleanup(func() { _ = syscall.Kill(res.PID, syscall.SIGKILL) })
	return res.PID
}

// follow follows pid's log to its end or fails t.
func follow(t *testing.T, m *Machine, pid int) (string, *int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var b bytes.Buffer
	code, err := m.Logs(ctx, "", pid, true, &b)
	if err != nil {
		t.Fatalf("Logs(%d, follow): %v (so far %q)", pid, err, b.String())
	}
	return b.String(), code
}

func TestBackgroundEnds(t *testing.T) {
	tests := []struct {
		name    string
		command string
		logs    string
		code    int
	}{
		{"exit status", "echo bye; exit 7", "bye\n", 7},
		{"exec", "exec echo hi", "hi\n", 0},
		{"stderr in order", "echo a; echo b >&2; echo c", "a\nb\nc\n", 0},
		{"quotes", `printf '%s\n' "it's" '$HOME'`, "it's\n$HOME\n", 0},
		{"no output", "true", "", 0},
		{"stdin is empty", "cat; echo done", "done\n", 0},
	}
	m := newMachine(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pid := start(t, m, tc.command)
			logs, code := follow(t, m, pid)
			if logs != tc.logs || code == nil || *code != tc.code {
				t.Errorf("Logs(%d, follow) of %q = %q, exit %v; want %q, %d", pid, tc.command, logs, deref(code), tc.logs, tc.code)
			}
			// Once it ended, the log read as a file says the same.
			var b bytes.Buffer
			code, err := m.Logs(t.Context(), "", pid, false, &b)
			if err != nil || b.String() != tc.logs || code == nil || *code != tc.code {
				t.Errorf("Logs(%d) after the end = %q, exit %v, %v; want %q, %d", pid, b.String(), deref(code), err, tc.logs, tc.code)
			}
		})
	}
}

func TestRunningCommand(t *testing.T) {
	m := newMachine(t)
	pid := start(t, m, "echo started; sleep 30")

	// The log is there while it runs, without a status.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var b bytes.Buffer
		code, err := m.Logs(t.Context(), "", pid, false, &b)
		if err != nil || code != nil {
			t.Fatalf("Logs(%d) of a running command = %q, exit %v, %v; want no status", pid, b.String(), deref(code), err)
		}
		if b.String() == "started\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Logs(%d) = %q, want %q", pid, b.String(), "started\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
	procs, err := m.Processes(t.Context(), "")
	if err != nil {
		t.Fatalf("Processes: %v", err)
	}
	if !slices.ContainsFunc(procs, func(p providers.Process) bool { return p.PID == pid && p.Background && p.ExitCode == nil }) {
		t.Errorf("Processes() lists no running background command %d", pid)
	}

	if err := m.Signal(t.Context(), "", pid, syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(%d, SIGTERM): %v", pid, err)
	}
	logs, code := follow(t, m, pid)
	if logs != "started\n" || code == nil || *code != 128+int(syscall.SIGTERM) {
		t.Errorf("Logs(%d, follow) after SIGTERM = %q, exit %v; want %q, %d", pid, logs, deref(code), "started\n", 128+int(syscall.SIGTERM))
	}
	procs, err = m.Processes(t.Context(), "")
	if err != nil {
		t.Fatalf("Processes: %v", err)
	}
	i := slices.IndexFunc(procs, func(p providers.Process) bool { return p.PID == pid })
	if i < 0 || procs[i].State != "exited" || !procs[i].Background || deref(procs[i].ExitCode) != "143" {
		t.Errorf("Processes() after the end: %v; want %d listed as an exited background command with status 143", procs, pid)
	}
	if err := m.Signal(t.Context(), "", pid, syscall.SIGTERM); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Signal(%d) of an ended command: %v, want ErrNotFound", pid, err)
	}
}

func TestSigintReachesTheCommand(t *testing.T) {
	if exec.Command("env", "--default-signal=INT", "true").Run() != nil {
		t.Fatal("env --default-signal (GNU coreutils 8.31 or later) is needed: the start script gives SIGINT back to commands with it")
	}
	m := newMachine(t)
	pid := start(t, m, "exec sleep 30")
	// Let the shell become sleep.
	time.Sleep(200 * time.Millisecond)
	if err := m.Signal(t.Context(), "", pid, syscall.SIGINT); err != nil {
		t.Fatalf("Signal(%d, SIGINT): %v", pid, err)
	}
	if _, code := follow(t, m, pid); code == nil || *code != 128+int(syscall.SIGINT) {
		t.Errorf("exit status after SIGINT = %v, want %d", deref(code), 128+int(syscall.SIGINT))
	}
}

func TestUnknownPid(t *testing.T) {
	m := newMachine(t)
	const pid = 1 << 30
	tests := []struct {
		name string
		call func() error
	}{
		{"Logs", func() error { _, err := m.Logs(t.Context(), "", pid, false, io.Discard); return err }},
		{"Logs follow", func() error { _, err := m.Logs(t.Context(), "", pid, true, io.Discard); return err }},
		{"Logs of pid 0", func() error { _, err := m.Logs(t.Context(), "", 0, false, io.Discard); return err }},
		{"Signal", func() error { return m.Signal(t.Context(), "", pid, syscall.SIGTERM) }},
		{"Token", func() error { _, err := m.Token(t.Context(), "", pid); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, providers.ErrNotFound) {
				t.Errorf("%s of unknown pid: %v, want ErrNotFound", tc.name, err)
			}
		})
	}
}

func TestExitCodeHook(t *testing.T) {
	m := newMachine(t)
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Records of commands a provider started itself: no exit files.
	const ended, stopped = 1<<30 + 1, 1<<30 + 2
	for pid, tok := range map[int]string{ended: "session-a", stopped: "session-b"} {
		if err := os.WriteFile(filepath.Join(m.Dir, strconv.Itoa(pid)+".bg"), []byte(tok+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var asked []string
	m.ExitCode = func(_ context.Context, _ string, pid int, tok string) (*int, error) {
		asked = append(asked, tok)
		if tok == "session-a" {
			code := 3
			return &code, nil
		}
		return nil, nil
	}
	procs, err := m.Processes(t.Context(), "")
	if err != nil {
		t.Fatalf("Processes: %v", err)
	}
	slices.Sort(asked)
	if !reflect.DeepEqual(asked, []string{"session-a", "session-b"}) {
		t.Errorf("ExitCode asked about %q, want both sessions", asked)
	}
	for _, p := range procs {
		if p.PID == stopped {
			t.Errorf("Processes() lists %+v, which ended without a status", p)
		}
	}
	if !slices.ContainsFunc(procs, func(p providers.Process) bool {
		return p.PID == ended && p.State == "exited" && deref(p.ExitCode) == "3"
	}) {
		t.Errorf("Processes() does not list %d as exited with 3", ended)
	}
	if tok, err := m.Token(t.Context(), "", ended); err != nil || tok != "session-a" {
		t.Errorf("Token(%d) = %q, %v; want session-a", ended, tok, err)
	}
}

func TestParseProcesses(t *testing.T) {
	seven := 7
	tests := []struct {
		name    string
		in      string
		procs   []providers.Process
		records []record
	}{
		{"empty", "", []providers.Process{}, nil},
		{
			"process with arguments",
			"P\t12\t1\t1000\tS\tsleep\tsleep\x1f30\x1f\n",
			[]providers.Process{{PID: 12, PPID: 1, UID: 1000, State: "S", Name: "sleep", Argv: []string{"sleep", "30"}}},
			nil,
		},
		{
			"kernel thread without a command line",
			"P\t2\t0\t0\tS\tkthreadd\t\n",
			[]providers.Process{{PID: 2, State: "S", Name: "kthreadd"}},
			nil,
		},
		{
			"records",
			"B\t40\ttok\t\nB\t41\ttok2\t7\n",
			[]providers.Process{},
			[]record{{pid: 40, token: "tok"}, {pid: 41, token: "tok2", exit: &seven}},
		},
		{
			"garbage is skipped",
			"hello\nP\tx\t1\t0\tS\tn\t\nB\ty\tt\t\n",
			[]providers.Process{},
			nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			procs, records := parseProcesses([]byte(tc.in))
			if !reflect.DeepEqual(procs, tc.procs) || !reflect.DeepEqual(records, tc.records) {
				t.Errorf("parseProcesses(%q) = %+v, %+v; want %+v, %+v", tc.in, procs, records, tc.procs, tc.records)
			}
		})
	}
}

func deref(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}
