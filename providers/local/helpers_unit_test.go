//go:build linux

package local

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

func TestEntryName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		bad      error
	}{
		{in: "a.txt", want: "a.txt"},
		{in: "./a/b/", want: "a/b"},
		{in: "a//b/./c", want: "a/b/c"},
		{in: ".", want: "."},
		{in: "./", want: "."},
		{in: "a..b", want: "a..b"},
		{in: "..", bad: errBadEntry},
		{in: "../x", bad: errBadEntry},
		{in: "a/../../x", bad: errBadEntry},
		{in: "a/..", bad: errBadEntry},
		{in: "/etc/passwd", bad: errBadEntry},
		{in: "", bad: fs.ErrInvalid},
		{in: "a\x00b", bad: fs.ErrInvalid},
	}
	for _, tc := range tests {
		got, err := entryName(tc.in)
		if tc.bad != nil {
			if !errors.Is(err, tc.bad) {
				t.Errorf("entryName(%q) = %q, %v; want %v", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("entryName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{newID(bytes.NewReader(bytes.Repeat([]byte{0}, 10))), true},
		{newID(bytes.NewReader(bytes.Repeat([]byte{255}, 10))), true},
		{"sb-abcdefghij", true},
		{"sb-abcdefgh1j", false}, // 1 is not in the alphabet
		{"sb-abcdefghi", false},
		{"sb-abcdefghijk", false},
		{"xx-abcdefghij", false},
		{"sb-ABCDEFGHIJ", false},
		{"sb-abcd/../hi", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := validID(tc.id); got != tc.want {
			t.Errorf("validID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
	if got := newID(bytes.NewReader(bytes.Repeat([]byte{0}, 10))); got != "sb-aaaaaaaaaa" {
		t.Errorf("newID(zeros) = %q", got)
	}
	if got := newID(bytes.NewReader([]byte{31, 32, 33, 0, 0, 0, 0, 0, 0, 0})); got != "sb-7abaaaaaaa" {
		t.Errorf("newID = %q", got)
	}
}

func TestIDMap(t *testing.T) {
	t.Parallel()
	for _, id := range []int{1000, 65534} {
		m := idMapping{id: id}.maps()
		if len(m) != 1 || m[0].ContainerID != id || m[0].HostID != id || m[0].Size != 1 {
			t.Errorf("idMapping{%d}.maps() = %+v, want %d→%d, size 1", id, m, id, id)
		}
	}
	m := idMapping{id: 0, base: 1 << 20}.maps()
	if len(m) != 2 || m[0] != (syscall.SysProcIDMap{ContainerID: 0, HostID: 0, Size: 1}) ||
		m[1] != (syscall.SysProcIDMap{ContainerID: 1, HostID: 1<<20 + 1, Size: idRangeSize - 1}) {
		t.Errorf("root's mappings = %+v, want 0→0 and 1..65535 → base+1..", m)
	}
	if f := cloneFlags(true); f&syscall.CLONE_NEWNET != 0 || f&syscall.CLONE_NEWUSER == 0 {
		t.Errorf("cloneFlags(shared) = %#x", f)
	}
	if f := cloneFlags(false); f&syscall.CLONE_NEWNET == 0 || f&syscall.CLONE_NEWPID == 0 {
		t.Errorf("cloneFlags(private) = %#x", f)
	}
}

func TestOverlayEscape(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"/plain/path":  "/plain/path",
		"/a,b":         `/a\,b`,
		"/a:b":         `/a\:b`,
		`/a\b`:         `/a\\b`,
		"/x y/ünïcode": "/x y/ünïcode",
	}
	for in, want := range tests {
		if got := overlayEscape(in); got != want {
			t.Errorf("overlayEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, noexec := filepath.Join(dir, "bin"), filepath.Join(dir, "noexec")
	for _, d := range []string{bin, noexec, filepath.Join(bin, "adir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	_ = os.WriteFile(filepath.Join(noexec, "tool"), []byte("x"), 0o644)
	_ = os.WriteFile(filepath.Join(noexec, "data"), []byte("x"), 0o644)
	path := noexec + ":" + bin
	tests := []struct {
		file, want string
		code       int
	}{
		{"tool", filepath.Join(bin, "tool"), 0},
		{"data", "", 126},
		{"adir", "", 127},
		{"missing", "", 127},
		{"./rel", "./rel", 0},
		{"", "", 127},
	}
	for _, tc := range tests {
		got, code := lookPath(tc.file, path, "/")
		if got != tc.want || code != tc.code {
			t.Errorf("lookPath(%q) = %q, %d; want %q, %d", tc.file, got, code, tc.want, tc.code)
		}
	}
}

func TestCommandEnv(t *testing.T) {
	t.Parallel()
	got := commandEnv("/root", map[string]string{"A": "1", "PATH": "/bin"}, map[string]string{"A": "2", "B": "3"})
	want := "A=2 B=3 HOME=/root PATH=/bin"
	if strings.Join(got, " ") != want {
		t.Errorf("commandEnv = %v, want %s", got, want)
	}
	if v := envValue(got, "PATH"); v != "/bin" {
		t.Errorf("envValue(PATH) = %q", v)
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		kind error
	}{
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, providers.ErrNotFound},
		{syscall.EEXIST, providers.ErrExists},
		{syscall.EISDIR, providers.ErrInvalid},
		{syscall.ENOTEMPTY, providers.ErrInvalid},
		{syscall.ENOSPC, providers.ErrQuota},
		{syscall.EACCES, nil},
	}
	for _, tc := range tests {
		kind, errno := kindOfErrno(tc.err)
		err := errorOf("read /x", statusMsg{Err: "msg", Kind: kind, Errno: errno})
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Kind != tc.kind {
			t.Errorf("%v: error %#v, want kind %v", tc.err, err, tc.kind)
		}
		if !strings.Contains(err.Error(), "read /x") {
			t.Errorf("%v: message %q does not name the path", tc.err, err)
		}
	}
	err := errorOf("read /x", statusMsg{Err: "permission denied", Errno: int(syscall.EACCES)})
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("EACCES does not match fs.ErrPermission: %v", err)
	}
}

func TestHostLayout(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "etc", "home/u", "root"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	layers, links := hostLayout(root)
	var names []string
	for _, l := range layers {
		names = append(names, l.Name)
	}
	if strings.Join(names, " ") != "usr etc" {
		t.Errorf("layers = %v, want usr etc", names)
	}
	if len(links) != 1 || links[0] != (link{Name: "bin", Target: "usr/bin"}) {
		t.Errorf("links = %+v", links)
	}
}

func TestStartErrorHint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		hint bool
	}{
		{&os.SyscallError{Syscall: "fork/exec", Err: syscall.EPERM}, true},
		{&os.SyscallError{Syscall: "fork/exec", Err: syscall.ENOSPC}, true},
		{&os.SyscallError{Syscall: "fork/exec", Err: syscall.EACCES}, true},
		{&os.SyscallError{Syscall: "fork/exec", Err: syscall.ENOMEM}, false},
	}
	for _, tc := range tests {
		err := startError("sb-aaaaaaaaaa", tc.err)
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Errorf("startError(%v) = %v, want ErrUnavailable", tc.err, err)
		}
		if got := strings.Contains(err.Error(), "sysctl"); got != tc.hint {
			t.Errorf("startError(%v) = %q: hint present %v, want %v", tc.err, err, got, tc.hint)
		}
	}
	err := setupErr("sb-aaaaaaaaaa", statusMsg{Err: "mount: permission denied", Setup: true, Kind: kindUnavailable})
	if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "apparmor_restrict_unprivileged_userns") {
		t.Errorf("setupErr = %v, want ErrUnavailable with the AppArmor hint", err)
	}
}

func TestErrorOfNamesThePathOnce(t *testing.T) {
	t.Parallel()
	tests := []struct{ op, msg, want string }{
		{"read /workspace/nope", "/workspace/nope: no such file or directory", "local: read /workspace/nope: no such file or directory"},
		{"read /workspace/nope", "open /workspace/nope: permission denied", "local: read /workspace/nope: open /workspace/nope: permission denied"},
		{"list /w", "not a directory", "local: list /w: not a directory"},
	}
	for _, tc := range tests {
		if got := errorOf(tc.op, statusMsg{Err: tc.msg}).Error(); got != tc.want {
			t.Errorf("errorOf(%q, %q) = %q, want %q", tc.op, tc.msg, got, tc.want)
		}
	}
}

// TestRunnerGone: a runner counts as gone when stopped, traced, a zombie,
// or with a SIGKILL pending (in its thread's set or its process's), and
// when its status cannot be read; a sleeping or running one with other
// signals pending does not.
func TestRunnerGone(t *testing.T) {
	status := func(state, sigPnd, shdPnd string) string {
		return "Name:\tsandbox-local-i\nState:\t" + state + "\nTgid:\t7\nSigQ:\t0/95000\nSigPnd:\t" + sigPnd +
			"\nShdPnd:\t" + shdPnd + "\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000100\n"
	}
	const none, kill, term = "0000000000000000", "0000000000000100", "0000000000004000"
	tests := []struct {
		name, status string
		want         bool
	}{
		{"sleeping", status("S (sleeping)", none, none), false},
		{"running, SIGTERM pending", status("R (running)", term, none), false},
		{"SIGKILL pending in the thread", status("R (running)", kill, none), true},
		{"SIGKILL pending in the process", status("S (sleeping)", none, kill), true},
		{"stopped", status("T (stopped)", none, none), true},
		{"traced", status("t (tracing stop)", none, none), true},
		{"zombie", status("Z (zombie)", none, none), true},
		{"no state", "Name:\tx\n", false},
	}
	for _, tt := range tests {
		if got := statusGone(tt.status); got != tt.want {
			t.Errorf("%s: statusGone = %v, want %v", tt.name, got, tt.want)
		}
	}
	if runnerGone(os.Getpid()) {
		t.Error("this test process counts as gone")
	}
	if !runnerGone(1 << 30) {
		t.Error("a process that does not exist counts as usable")
	}
}

func TestParseRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    machineRecord
		wantErr bool
	}{
		{in: "123 456\n", want: machineRecord{pid: 123, start: 456}},
		{in: "  7 18446744073709551615 and more", want: machineRecord{pid: 7, start: 1<<64 - 1}},
		{in: "123", wantErr: true},
		{in: "", wantErr: true},
		{in: "x 1", wantErr: true},
		{in: "1 -2", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseRecord(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseRecord(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
