//go:build linux

package local

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// TestCommandsKeepTimerSlack: the init and the runners run with the
// monitor's timer slack, but what they start for the user (a command, its
// children, a background command) has the slack of the process that
// started the machine: its timers fire when they would have outside.
func TestCommandsKeepTimerSlack(t *testing.T) {
	// The provider starts the machine from a thread with the slack the
	// test's threads have. (/proc/self/timerslack_ns is the main
	// thread's, which another thread may read only with CAP_SYS_NICE.)
	own := threadSlack()
	if own <= 0 {
		t.Fatal("no timer slack")
	}
	want := strconv.Itoa(own)
	if own == monitorSlack {
		t.Fatalf("the test runs with the monitor's slack (%s ns): nothing would tell the two apart", want)
	}
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	for _, tc := range []struct{ name, shell string }{
		{"command", "cat /proc/self/timerslack_ns"},
		{"its child", "sh -c 'cat /proc/self/timerslack_ns'"},
	} {
		if got := strings.TrimSpace(mustRun(t, p, id, tc.shell)); got != want {
			t.Errorf("%s: timer slack %q, want %q", tc.name, got, want)
		}
	}
	// On a terminal: the command is forked from another place.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := p.ExecTerminal(ctx, id, providers.ExecRequest{Argv: []string{"sh", "-c", "echo slack=$(cat /proc/self/timerslack_ns)."}}, providers.TerminalRequest{Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	term, _ := io.ReadAll(s)
	s.Close()
	if !strings.Contains(string(term), "slack="+want+".") {
		t.Errorf("command on a terminal printed %q, want slack=%s.", term, want)
	}
	pid := startBackground(t, p, id, "cat /proc/self/timerslack_ns")
	var out bytes.Buffer
	if _, err := p.Logs(context.Background(), id, pid, true, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("background command: timer slack %q, want %q", got, want)
	}
}

// TestWithSlack: a process started in withSlack starts with that slack,
// and the starting thread has its own back afterwards.
func TestWithSlack(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   int
		want func(own int) int
	}{
		{"monitor's", monitorSlack, func(int) int { return monitorSlack }},
		{"an odd one", 123_456, func(int) int { return 123_456 }},
		{"none given", 0, func(own int) int { return own }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			own := threadSlack()
			cmd := exec.Command("cat", "/proc/self/timerslack_ns")
			var out bytes.Buffer
			cmd.Stdout = &out
			var err error
			withSlack(tc.ns, func() { err = cmd.Start() })
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.TrimSpace(out.String()), strconv.Itoa(tc.want(own)); got != want {
				t.Errorf("the process started with slack %s ns, want %s", got, want)
			}
			if got := threadSlack(); got != own {
				t.Errorf("the thread's slack is %d ns afterwards, want its own %d back", got, own)
			}
		})
	}
}

// TestMachineRunsWithMonitorSlack: every thread of a machine's init and of
// its runner has the monitor's timer slack (their runtime's monitor among
// them, which wakes with it), however the provider's own threads are set.
func TestMachineRunsWithMonitorSlack(t *testing.T) {
	runner, rec, ok := rootServingRunner(t, "reading another process's timer slack (CAP_SYS_NICE)")
	if !ok {
		return
	}
	for _, proc := range []struct {
		name string
		pid  int
	}{{"init", rec.pid}, {"runner", runner}} {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(proc.pid) + "/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + task.Name() + "/timerslack_ns")
			if err != nil {
				continue // the thread ended
			}
			if got := strings.TrimSpace(string(b)); got != strconv.Itoa(monitorSlack) {
				t.Errorf("%s %d thread %s: timer slack %s ns, want %d", proc.name, proc.pid, task.Name(), got, monitorSlack)
			}
		}
	}
}
