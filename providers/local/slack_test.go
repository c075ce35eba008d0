//go:build linux

package local

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

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
	pid := startBackground(t, p, id, "cat /proc/self/timerslack_ns")
	var out bytes.Buffer
	if _, err := p.Logs(context.Background(), id, pid, true, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("background command: timer slack %q, want %q", got, want)
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
