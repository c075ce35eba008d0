//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// TestWriteOnFullDisk: a write that fills the disk holding the sandbox's
// state fails with the reason and leaves nothing behind: no partial file,
// no temporary file, an existing file unchanged; the sandbox goes on
// working once the space is back. Only root can mount a small disk for
// the state directory: an unprivileged user checks the same of a write
// its sandbox's disk quota cuts off (testWriteOverQuota).
func TestWriteOnFullDisk(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		testWriteOverQuota(t)
		return
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=96m,mode=0700"); err != nil {
		t.Fatalf("mount a small state disk: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	p, err := New(providers.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	id := newSandbox(t, p, providers.Spec{})
	// One write larger than a file may be (RLIMIT_FSIZE, half the free
	// space), then, with the disk filled by a command, a write that finds
	// no room: both fail with the kernel's reason.
	for _, path := range []string{"/workspace/big", "/srv/data/big", "/workspace/kept"} {
		checkFailedWrite(t, p, id, "large", path, 200<<20)
	}
	// Fill the disk from inside (each file within the file size limit).
	mustRun(t, p, id, "mkdir -p /workspace/fill && i=0; while head -c 8388608 /dev/zero > /workspace/fill/$i 2>/dev/null; do i=$((i+1)); done; true")
	for _, path := range []string{"/workspace/big2", "/srv/data/big2", "/workspace/kept"} {
		checkFailedWrite(t, p, id, "full", path, 16<<20)
	}
	mustRun(t, p, id, "rm -rf /workspace/fill")
	// Space is back (nothing was left to take it): the sandbox works,
	// once its init has seen that (the disk quota's cut-off, which a
	// disk down to its reserve began, ends at its next look).
	checkWritableAgain(t, p, id)
}

// testWriteOverQuota is TestWriteOnFullDisk for a user who cannot mount a
// small disk: a sandbox with a small --disk, whose writes the quota's
// cut-off refuses ("File too large", see disk.go) as a full disk would.
// A write larger than the quota is cut off as it goes; once a command
// filled the quota, a write of a few MiB fails at once; then deletions
// bring the sandbox back under and it writes again.
func testWriteOverQuota(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{Resources: providers.Resources{DiskMB: 64}})
	// As long as it takes the init to notice (a tenth of a second), and
	// more than the quota and its grace together: never written whole.
	for _, path := range []string{"/workspace/big", "/srv/data/big", "/workspace/kept"} {
		checkFailedWrite(t, p, id, "past the quota", path, 1<<30)
		waitWritable(t, p, id)
	}
	mustRun(t, p, id, "mkdir -p /workspace/fill && i=0; while head -c 8388608 /dev/zero > /workspace/fill/$i 2>/dev/null; do i=$((i+1)); done; true")
	if note := p.TakeNote(id); !strings.Contains(note, "over its disk quota") {
		t.Fatalf("after filling the quota the note is %q, want that the sandbox is over its quota", note)
	}
	for _, path := range []string{"/workspace/big2", "/srv/data/big2", "/workspace/kept"} {
		checkFailedWrite(t, p, id, "quota full", path, 4<<20)
	}
	mustRun(t, p, id, "rm -rf /workspace/fill")
	checkWritableAgain(t, p, id)
}

// checkFailedWrite writes size bytes to path in sandbox id, which has no
// room for them (stage says why), and fails unless the write fails with
// the reason and leaves the directory as it was: no partial file, no
// temporary file. A path ending in "kept" is an existing file that keeps
// what it held (the first stage writes it).
func checkFailedWrite(t *testing.T, p *Provider, id, stage, path string, size int64) {
	t.Helper()
	ctx := context.Background()
	tooBig := func(err error) bool {
		return err != nil && (errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EFBIG) ||
			strings.Contains(err.Error(), "no space") || strings.Contains(err.Error(), "too large"))
	}
	dirOf := path[:strings.LastIndexByte(path, '/')]
	mustRun(t, p, id, "mkdir -p "+dirOf)
	existing := strings.HasSuffix(path, "kept")
	if existing && mustRun(t, p, id, "test -e "+path+" || echo none") != "" {
		if err := p.WriteFile(ctx, id, path, strings.NewReader("keep me\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := mustRun(t, p, id, "ls -A "+dirOf)
	err := p.WriteFile(ctx, id, path, io.LimitReader(zeros{}, size), 0o644)
	if !tooBig(err) {
		t.Errorf("%s: write %s: %v, want no space left or file too large", stage, path, err)
	}
	after := mustRun(t, p, id, "ls -A "+dirOf)
	if after != before {
		t.Errorf("%s: after a failed write of %s the directory holds %q, before %q (nothing partial, no temporary file)", stage, path, after, before)
	}
	if existing {
		if got := mustRun(t, p, id, "cat "+path); got != "keep me\n" {
			t.Errorf("%s: the existing %s became %q", stage, path, got)
		}
	}
}

// checkWritableAgain fails unless sandbox id, whose files were deleted to
// make room, writes again within a while (once its init has seen the
// room: the quota's cut-off ends at its next look).
func checkWritableAgain(t *testing.T, p *Provider, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.WriteFile(context.Background(), id, "/workspace/small", bytes.NewReader(make([]byte, 1<<20)), 0o644)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write once the disk has room again: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := mustRun(t, p, id, "stat -c %s /workspace/small"); got != "1048576\n" {
		t.Errorf("small file: %q", got)
	}
}
