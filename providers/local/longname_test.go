//go:build linux

package local

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// longNameCases are lengths of file names at and near NAME_MAX (255 bytes).
func longNameCases() []struct {
	name string
	n    int
} {
	return []struct {
		name string
		n    int
	}{
		{"240 bytes", 240},
		{"250 bytes", 250},
		{"255 bytes", 255},
	}
}

// TestTempNameBounded: the temporary name of an atomic write never grows
// with the target's name, so any name the filesystem accepts can be
// written.
func TestTempNameBounded(t *testing.T) {
	t.Parallel()
	for _, tt := range longNameCases() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := strings.Repeat("n", tt.n)
			a, b := tempName(target), tempName(target)
			if len(a) > 64 || strings.Contains(a, target[:16]) {
				t.Errorf("tempName(%d bytes) = %q: want a short name not derived from the target", tt.n, a)
			}
			if a == b || !strings.HasPrefix(a, ".") {
				t.Errorf("tempName gave %q and %q: want hidden, different names", a, b)
			}
		})
	}
}

// TestLongNamesWriteAndUpload: WriteFile and Upload (one file, and a
// directory holding every length) accept names of up to 255 bytes.
func TestLongNamesWriteAndUpload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	var dir bytes.Buffer
	tw := tar.NewWriter(&dir)
	for _, tt := range longNameCases() {
		name := strings.Repeat("w", tt.n)
		if err := p.WriteFile(ctx, id, "/workspace/write/"+name, strings.NewReader(tt.name), 0o644); err != nil {
			t.Errorf("WriteFile of a %s name: %v", tt.name, err)
		}
		var one bytes.Buffer
		otw := tar.NewWriter(&one)
		writeLongNameEntry(t, otw, strings.Repeat("u", tt.n), tt.name)
		otw.Close()
		if err := p.Upload(ctx, id, "/workspace/single", &one); err != nil {
			t.Errorf("Upload of one file with a %s name: %v", tt.name, err)
		}
		writeLongNameEntry(t, tw, "tree/"+strings.Repeat("d", tt.n), tt.name)
	}
	tw.Close()
	if err := p.Upload(ctx, id, "/workspace/dir", &dir); err != nil {
		t.Fatalf("Upload of a directory with long names: %v", err)
	}
	for _, tt := range longNameCases() {
		for _, path := range []string{
			"/workspace/write/" + strings.Repeat("w", tt.n),
			"/workspace/single/" + strings.Repeat("u", tt.n),
			"/workspace/dir/tree/" + strings.Repeat("d", tt.n),
		} {
			got, err := readAll(t, p, id, path)
			if err != nil || string(got) != tt.name {
				t.Errorf("%s…: %q, %v; want %q", path[:30], got, err, tt.name)
			}
		}
	}
	if left := mustRun(t, p, id, "find /workspace -name '.sandbox-*' | wc -l"); left != "0\n" {
		t.Errorf("temporary files left behind: %s", left)
	}
}

// writeLongNameEntry adds a regular file holding body to tw.
func writeLongNameEntry(t *testing.T, tw *tar.Writer, name, body string) {
	t.Helper()
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
}
