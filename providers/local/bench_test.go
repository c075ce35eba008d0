//go:build linux

package local

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// BenchmarkExecTrue measures one `true` in a running sandbox: handing the
// operation to a prepared runner of its machine, the command's fork, exec
// and reaping (the next runner is prepared after each operation starts,
// on the clock too when operations follow each other this closely).
func BenchmarkExecTrue(b *testing.B) {
	p := newTestProvider(b)
	id := newSandbox(b, p, providers.Spec{})
	ctx := context.Background()
	req := providers.ExecRequest{Argv: []string{"true"}}
	b.ResetTimer()
	for b.Loop() {
		res, err := p.Exec(ctx, id, req)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v, %d", err, res.ExitCode)
		}
	}
}

// BenchmarkStartExec measures the first command of a stopped sandbox: the
// machine's start (namespaces, mounts, pivot, Landlock, its first runner)
// and the command.
func BenchmarkStartExec(b *testing.B) {
	p := newTestProvider(b)
	id := newSandbox(b, p, providers.Spec{})
	ctx := context.Background()
	req := providers.ExecRequest{Argv: []string{"true"}}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := p.Stop(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := p.Exec(ctx, id, req)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v, %d", err, res.ExitCode)
		}
	}
}

// BenchmarkReadFile measures reading a small file through the file mode.
func BenchmarkReadFile(b *testing.B) {
	p := newTestProvider(b)
	id := newSandbox(b, p, providers.Spec{})
	ctx := context.Background()
	if err := p.WriteFile(ctx, id, "/workspace/f.txt", strings.NewReader(strings.Repeat("x", 4096)), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		rc, err := p.ReadFile(ctx, id, "/workspace/f.txt")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != 4096 {
			b.Fatalf("read %d bytes: %v", n, err)
		}
	}
}

// BenchmarkExecStream measures stdout throughput (64 MiB per iteration).
func BenchmarkExecStream(b *testing.B) {
	p := newTestProvider(b)
	id := newSandbox(b, p, providers.Spec{})
	ctx := context.Background()
	b.SetBytes(64 << 20)
	for b.Loop() {
		res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "head -c 67108864 /dev/zero", Stdout: io.Discard})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v, %d", err, res.ExitCode)
		}
	}
}
