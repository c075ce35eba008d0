//go:build linux

package e2b_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b"
	e2bemu "github.com/agentbox/sandbox/providers/e2b/emulator"
	"github.com/agentbox/sandbox/providers/emulator/httpguard"
	"github.com/agentbox/sandbox/providers/fake"
)

// pausingReader returns its chunks one by one, waiting pause before each
// after the first.
type pausingReader struct {
	chunks []string
	pause  time.Duration
	n      int
}

func (r *pausingReader) Read(p []byte) (int, error) {
	if r.n >= len(r.chunks) {
		return 0, io.EOF
	}
	if r.n > 0 {
		time.Sleep(r.pause)
	}
	n := copy(p, r.chunks[r.n])
	r.n++
	return n, nil
}

// TestGuardedServeKeepsStreams: behind the limits of `sandbox serve`, with
// stall timeouts far shorter than the pauses, a command's stdin stream and
// its output stream both pause for longer than the timeouts and still
// carry everything: pauses are not stalls.
func TestGuardedServeKeepsStreams(t *testing.T) {
	t.Parallel()
	srv := e2bemu.New(fake.New(), e2bemu.Options{APIKey: testKey})
	t.Cleanup(func() { _ = srv.Close() })
	limits := httpguard.Limits{
		MaxConns:          8,
		ReadHeaderTimeout: 300 * time.Millisecond,
		IdleTimeout:       300 * time.Millisecond,
		BodyStallTimeout:  300 * time.Millisecond,
		WriteStallTimeout: 300 * time.Millisecond,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpguard.NewServer(srv, limits)
	go func() { _ = hs.Serve(httpguard.LimitListener(ln, limits)) }()
	t.Cleanup(func() { _ = hs.Close() })
	url := "http://" + ln.Addr().String()

	p, err := e2b.NewWithOptions(e2b.Options{APIKey: testKey, APIURL: url, SandboxURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := p.Create(ctx, providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), info.ID) })
	var out strings.Builder
	res, err := p.Exec(ctx, info.ID, providers.ExecRequest{
		Argv:   []string{"cat"},
		Stdin:  &pausingReader{chunks: []string{"one\n", "two\n", "three\n"}, pause: time.Second},
		Stdout: &out,
	})
	if err != nil || res.ExitCode != 0 || out.String() != "one\ntwo\nthree\n" {
		t.Errorf("cat with a pausing stdin: exit %d, %q, %v", res.ExitCode, out.String(), err)
	}
}
