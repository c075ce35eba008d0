package clipboard

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeXclip puts first on PATH an xclip that keeps the clipboard in a file
// of dir, as the real one keeps it in the X server.
func fakeXclip(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
board="$(dirname "$0")/board"
case "$1" in
-out) cat "$board" ;;
-in) cat > "$board" ;;
*) exit 2 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "xclip"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("WAYLAND_DISPLAY", "")
	return dir
}

// TestFoundWhenUsed puts the tool on PATH after the package started: the
// original looked for it in its init function only, and would not find it.
func TestFoundWhenUsed(t *testing.T) {
	dir := fakeXclip(t)
	if err := WriteAll("hello\tworld"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "board")); err != nil || string(b) != "hello\tworld" {
		t.Fatalf("the clipboard holds %q (%v)", b, err)
	}
	got, err := ReadAll()
	if err != nil || got != "hello\tworld" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
}

func TestNoTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("WAYLAND_DISPLAY", "")
	if _, err := ReadAll(); err != errNoTool {
		t.Fatalf("ReadAll without a tool: %v", err)
	}
	if err := WriteAll("x"); err != errNoTool {
		t.Fatalf("WriteAll without a tool: %v", err)
	}
}
