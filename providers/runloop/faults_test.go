//go:build linux

package runloop_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/emulator"
	"github.com/agentbox/sandbox/providers/runloop"
	rlemu "github.com/agentbox/sandbox/providers/runloop/emulator"
)

// create makes a devbox for a test and shuts it down afterwards.
func create(t *testing.T, p *runloop.Provider, labels map[string]string) string {
	t.Helper()
	info, err := p.Create(t.Context(), providers.Spec{Labels: labels})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), info.ID) })
	return info.ID
}

// run runs a shell command and returns its stdout, failing on a non-zero
// exit.
func run(t *testing.T, p *runloop.Provider, id, shell string) string {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := p.Exec(t.Context(), id, providers.ExecRequest{Shell: shell, Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q): exit %d, err %v, stderr %q", shell, res.ExitCode, err, errb.String())
	}
	return out.String()
}

func TestFaults(t *testing.T) {
	h := newHarness(t, rlemu.Options{ExecutionHold: 300 * time.Millisecond})
	p := h.client(t, nil)
	id := create(t, p, nil)
	base := "/v1/devboxes/" + id

	t.Run("a lost execute reply runs the command once", func(t *testing.T) {
		h.Faults.ResetCounts()
		h.Faults.Add(emulator.Fault{Method: http.MethodPost, Path: base + "/execute", Times: 1, DropResponse: true})
		run(t, p, id, "echo once >> /tmp/lost-reply")
		if got := run(t, p, id, "cat /tmp/lost-reply"); got != "once\n" {
			t.Errorf("the command ran %d times, want once (file %q)", strings.Count(got, "once"), got)
		}
		if n := h.Faults.Count(http.MethodPost, base+"/execute"); n < 3 {
			t.Errorf("execute was sent %d times, want the first call repeated once", n)
		}
	})

	t.Run("a cut output stream resumes from its offset", func(t *testing.T) {
		var want strings.Builder
		for i := 1; i <= 20000; i++ {
			want.WriteString(strconv.Itoa(i) + "\n")
		}
		for _, cut := range []int64{-1, 7, 5000, 60000} {
			h.Faults.Add(emulator.Fault{Path: base + "/executions/", Times: 1, CutAfter: cut,
				Match: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/stream_stdout_updates") }})
			got := run(t, p, id, "sleep 1.5; seq 1 20000; sleep 0.2")
			if got != want.String() {
				t.Errorf("cut after %d bytes: got %d bytes of output, want %d, identical", cut, len(got), want.Len())
			}
		}
	})

	t.Run("the execution long poll is asked again on 408", func(t *testing.T) {
		h.Faults.ResetCounts()
		if got := run(t, p, id, "sleep 1.5; echo done"); got != "done\n" {
			t.Errorf("stdout %q, want done", got)
		}
		// Every wait answered 408 after 300ms, so the command's 1.5s
		// took several polls.
		polls := countSuffix(h, base, "/wait_for_status")
		if polls < 2 {
			t.Errorf("the execution was polled %d times, want several 408s answered by new polls", polls)
		}
	})

	t.Run("5xx and 429 are retried", func(t *testing.T) {
		h.Faults.Add(emulator.Fault{Method: http.MethodGet, Path: "/v1/devboxes", Times: 2, Status: http.StatusServiceUnavailable})
		h.Faults.Add(emulator.Fault{Method: http.MethodPost, Path: base + "/execute", Times: 1, Status: http.StatusTooManyRequests, RetryAfter: "0"})
		if _, err := p.List(t.Context(), providers.Filter{}); err != nil {
			t.Errorf("List after two 503s: %v", err)
		}
		run(t, p, id, "true")
	})

	t.Run("a failed writer leaves no file", func(t *testing.T) {
		r := io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), errReader{})
		if err := p.WriteFile(t.Context(), id, "/tmp/refused.bin", r, 0o644); err == nil {
			t.Fatal("WriteFile with a failing reader succeeded")
		}
		if _, err := p.Stat(t.Context(), id, "/tmp/refused.bin"); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat after a refused upload: %v, want ErrNotFound", err)
		}
	})

	t.Run("an archive leaving its destination is refused whole", func(t *testing.T) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, name := range []string{"ok.txt", "../escape.txt"} {
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
			_, _ = tw.Write([]byte("x\n"))
		}
		_ = tw.Close()
		err := p.Upload(t.Context(), id, "/tmp/refused-dir", &buf)
		if !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("Upload of ../escape.txt: %v, want ErrInvalid", err)
		}
		if _, err := p.Stat(t.Context(), id, "/tmp/refused-dir/ok.txt"); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Stat of an entry of a refused archive: %v, want ErrNotFound", err)
		}
	})
}

// countSuffix counts the POSTs to an execution path ending in suffix.
func countSuffix(h harness, base, suffix string) int {
	return h.Faults.CountMatching(func(method, path string) bool {
		return method == http.MethodPost && strings.HasPrefix(path, base+"/executions/") && strings.HasSuffix(path, suffix)
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the source broke") }
