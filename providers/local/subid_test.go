//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/providers"
)

func TestSubordinateRange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		body         string
		start, count int
		ok           bool
	}{
		{"alice:100000:65536\n", 100000, 65536, true},
		{"1000:200000:65536\n", 200000, 65536, true},
		{"bob:100000:65536\nalice:300000:1000\nalice:400000:70000\n1000:500000:70000\n", 400000, 70000, true},
		{"root:100000:65536\nbob:1:2\n", 0, 0, false},
		{"alice:0:65536\nalice:x:1\nalice:5:0\n# alice:7:7\n", 0, 0, false},
		{"", 0, 0, false},
	}
	for i, tt := range tests {
		f := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(f, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		start, count, ok := subordinateRange(f, "alice", 1000)
		if start != tt.start || count != tt.count || ok != tt.ok {
			t.Errorf("subordinateRange(%q) = %d, %d, %v; want %d, %d, %v", tt.body, start, count, ok, tt.start, tt.count, tt.ok)
		}
	}
	if _, _, ok := subordinateRange(filepath.Join(dir, "missing"), "alice", 1000); ok {
		t.Error("a missing file gives a range")
	}
	// Without a name (a uid with no passwd entry) only the uid matches.
	f := filepath.Join(dir, "0")
	if _, _, ok := subordinateRange(f, "", 1000); ok {
		t.Error("an entry of alice matched a user without a name")
	}
}

func TestSubordinateMaps(t *testing.T) {
	t.Parallel()
	m := func(in, host, size int) syscall.SysProcIDMap {
		return syscall.SysProcIDMap{ContainerID: in, HostID: host, Size: size}
	}
	tests := []struct {
		self, start, count int
		want               []syscall.SysProcIDMap
	}{
		// The whole of 0..65535 but the user itself, in one range
		// less one id.
		{1000, 100000, 65536, []syscall.SysProcIDMap{m(0, 100000, 1000), m(1001, 101000, 64535)}},
		{65534, 100000, 65536, []syscall.SysProcIDMap{m(0, 100000, 65534), m(65535, 165534, 1)}},
		{0, 100000, 65536, []syscall.SysProcIDMap{m(1, 100000, 65535)}},
		// A user above the range's ids: all 65536 of them.
		{70000, 100000, 65536, []syscall.SysProcIDMap{m(0, 100000, 65536)}},
		// As many as a small range holds.
		{1000, 100000, 10, []syscall.SysProcIDMap{m(0, 100000, 10)}},
		{1000, 100000, 1500, []syscall.SysProcIDMap{m(0, 100000, 1000), m(1001, 101000, 500)}},
		{0, 100000, 1, []syscall.SysProcIDMap{m(1, 100000, 1)}},
	}
	for _, tt := range tests {
		if got := subordinateMaps(tt.self, tt.start, tt.count); !slices.Equal(got, tt.want) {
			t.Errorf("subordinateMaps(%d, %d, %d) = %+v, want %+v", tt.self, tt.start, tt.count, got, tt.want)
		}
	}
}

func TestSubordinateMappings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "subuid")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(sub, []byte("alice:100000:65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tools := func(name string) string { return "/usr/bin/" + name }
	u, g, ok := subordinateMappings(1000, 1001, "alice", sub, sub, tools)
	if !ok || !u.ranged() || !g.ranged() || u.tool != "/usr/bin/newuidmap" || g.tool != "/usr/bin/newgidmap" {
		t.Fatalf("with tools and ranges: %+v, %+v, %v", u, g, ok)
	}
	want := []syscall.SysProcIDMap{{ContainerID: 1000, HostID: 1000, Size: 1},
		{ContainerID: 0, HostID: 100000, Size: 1000}, {ContainerID: 1001, HostID: 101000, Size: 64535}}
	if got := u.maps(); !slices.Equal(got, want) {
		t.Errorf("uid maps %+v, want %+v", got, want)
	}
	if got := g.maps(); got[0] != (syscall.SysProcIDMap{ContainerID: 1001, HostID: 1001, Size: 1}) || len(got) != 3 {
		t.Errorf("gid maps %+v: want the group itself and the range around it", got)
	}
	if a := nsAttr(u, g, true); a.UidMappings != nil || a.GidMappings != nil || !slices.Contains(a.AmbientCaps, uintptr(unix.CAP_SETUID)) {
		t.Errorf("nsAttr with tools: %+v; want no mappings for Go to write, and CAP_SETUID kept", a)
	}
	for name, c := range map[string]struct {
		uidFile, gidFile string
		find             func(string) string
	}{
		"no newgidmap":  {sub, sub, func(n string) string { return map[string]string{"newuidmap": "/usr/bin/newuidmap"}[n] }},
		"no tools":      {sub, sub, func(string) string { return "" }},
		"no subgid":     {sub, empty, tools},
		"no subuid":     {filepath.Join(dir, "missing"), sub, tools},
		"another's ids": {empty, empty, tools},
	} {
		if u, g, ok := subordinateMappings(1000, 1000, "alice", c.uidFile, c.gidFile, c.find); ok {
			t.Errorf("%s: mapped %+v, %+v", name, u, g)
		}
	}
	// The single mapping is Go's to write, without setgroups.
	one := idMapping{id: 1000}
	if a := nsAttr(one, one, true); len(a.UidMappings) != 1 || len(a.GidMappings) != 1 || a.GidMappingsEnableSetgroups {
		t.Errorf("nsAttr of one id: %+v", a)
	}
}

// TestWriteIDMaps runs scripts it writes: not in parallel, so that no
// other test's fork holds them open for writing (ETXTBSY).
func TestWriteIDMaps(t *testing.T) {
	if err := writeIDMaps(1, idMapping{id: 1000}, idMapping{id: 1000}); err != nil {
		t.Errorf("mappings without tools: %v", err)
	}
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	ok := filepath.Join(dir, "ok")
	bad := filepath.Join(dir, "bad")
	scripts := map[string]string{ok: "#!/bin/sh\necho \"$@\" >> " + args + "\n", bad: "#!/bin/sh\necho 'range not allowed' >&2\nexit 1\n"}
	for f, body := range scripts {
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u := idMapping{id: 1000, sub: subordinateMaps(1000, 100000, 65536), tool: ok}
	g := idMapping{id: 1001, sub: subordinateMaps(1001, 200000, 10), tool: ok}
	if err := writeIDMaps(42, u, g); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(args); string(b) != "42 1000 1000 1 0 100000 1000 1001 101000 64535\n42 1001 1001 1 0 200000 10\n" {
		t.Errorf("the tools' arguments: %q", b)
	}
	g.tool = bad
	err := writeIDMaps(42, u, g)
	if err == nil || !strings.Contains(err.Error(), "range not allowed") || !strings.Contains(err.Error(), bad+" 42 1001 1001 1") || !strings.Contains(err.Error(), "/etc/subgid") {
		t.Errorf("a failing tool: %v; want its command line, its output and the files", err)
	}
}

func TestMappedRanges(t *testing.T) {
	t.Parallel()
	tests := map[string][]string{
		"      1000       1000          1\n":                                                                     {"1000"},
		"         0          0          1\n         1 1073741825      65535\n":                                   {"0-65535"},
		"     65534      65534          1\n         0 2000000000      65534\n     65535 2000065534          1\n": {"0-65535"},
		"      1000       1000          1\n         0     100000         10\n":                                   {"0-9", "1000"},
		"": nil,
	}
	for in, want := range tests {
		if got := mappedRanges(in); !slices.Equal(got, want) {
			t.Errorf("mappedRanges(%q) = %q, want %q", in, got, want)
		}
	}
}

// subIDEnvVar tells TestSubordinateIDsUnprivileged, which
// TestSubordinateIDs runs as unprivUID, what /etc/subuid and /etc/subgid
// give that user: "none", or the first id of its ranges.
const subIDEnvVar = "SANDBOX_TEST_SUBID"

// subIDStart and subIDCount are the ranges TestSubordinateIDs gives
// unprivUID: far from any user's ids and from root's sandboxes' ranges.
const (
	subIDStart = 2_000_000_000
	subIDCount = 65536
)

// TestSubordinateIDs runs TestSubordinateIDsUnprivileged as uid 65534, as
// TestEscapeUnprivileged does: once without subordinate ids, once with
// ranges it adds to /etc/subuid and /etc/subgid for the test (creating
// the files when missing); the files are left as they were.
func TestSubordinateIDs(t *testing.T) {
	if uid := os.Getuid(); uid != 0 {
		// Run by another user, the test checks what that user's
		// sandboxes do with the ranges the host gives it, or without.
		name := ""
		if pw, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			name = pw.Username
		}
		mode := "none"
		if u, g := hostIDMappings(uid, os.Getgid()); u.ranged() || g.ranged() {
			start, _, ok := subordinateRange("/etc/subuid", name, uid)
			if !ok {
				t.Fatalf("the sandboxes map %+v, %+v, but /etc/subuid gives uid %d no range", u, g, uid)
			}
			mode = strconv.Itoa(start)
		}
		t.Logf("as uid %d, subordinate ids: %s", uid, mode)
		checkSubordinateIDs(t, mode)
		return
	}
	for _, tool := range []string{"newuidmap", "newgidmap"} {
		if idTool(tool) == "" {
			t.Fatalf("%s (the uidmap package) is needed: scripts/test installs it", tool)
		}
	}
	files := []string{"/etc/subuid", "/etc/subgid"}
	name := "nobody"
	for _, f := range files {
		if _, _, ok := subordinateRange(f, name, unprivUID); ok {
			t.Fatalf("%s already gives uid %d ids: this test needs to add and remove its own", f, unprivUID)
		}
	}
	runUnprivileged(t, []string{subIDEnvVar + "=none"}, "TestSubordinateIDsUnprivileged")
	line := strconv.Itoa(unprivUID) + ":" + strconv.Itoa(subIDStart) + ":" + strconv.Itoa(subIDCount)
	for _, f := range files {
		addLineFor(t, f, line)
	}
	runUnprivileged(t, []string{subIDEnvVar + "=" + strconv.Itoa(subIDStart)}, "TestSubordinateIDsUnprivileged")
}

// addLineFor appends line to file for the rest of the test: the cleanup
// removes exactly what it added, or the file when the test created it.
func addLineFor(t *testing.T, file, line string) {
	t.Helper()
	before, err := os.ReadFile(file)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := appendLine(file, line); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !existed {
			if err := os.Remove(file); err != nil {
				t.Errorf("remove %s: %v", file, err)
			}
			return
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("restore %s: %v", file, err)
			return
		}
		after := string(before)
		if !strings.HasPrefix(string(b), after) {
			// Changed meanwhile by someone else: only the line goes.
			after = strings.Replace(string(b), line+"\n", "", 1)
		}
		if err := os.WriteFile(file, []byte(after), 0o644); err != nil {
			t.Errorf("restore %s: %v", file, err)
		}
	})
}

// TestSubordinateIDsUnprivileged is TestSubordinateIDs's run as an
// unprivileged user: with subordinate ranges, its sandbox's commands run
// as the user by default, and as root or another user on request, whose
// files belong on the host to ids of the range; without them, another
// user is refused with the way to get the ranges.
func TestSubordinateIDsUnprivileged(t *testing.T) {
	mode := os.Getenv(subIDEnvVar)
	if mode == "" {
		t.Log("run by TestSubordinateIDs as an unprivileged user, with or without subordinate ids")
		return
	}
	checkSubordinateIDs(t, mode)
}

// checkSubordinateIDs is TestSubordinateIDsUnprivileged for mode, "none"
// or the first id of the ranges /etc/subuid and /etc/subgid give the
// user running it.
func checkSubordinateIDs(t *testing.T, mode string) {
	uid := os.Getuid()
	// other is a user of the sandbox below the invoking user's id.
	other := 1000
	if uid <= other {
		other = uid / 2
	}
	o := strconv.Itoa(other)
	if uid == 0 {
		t.Fatal("runs as an unprivileged user")
	}
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	ctx := context.Background()
	if got := mustRun(t, p, id, "id -u; id -g"); got != strconv.Itoa(uid)+"\n"+strconv.Itoa(os.Getgid())+"\n" {
		t.Errorf("the default user: %q, want uid and gid %d, %d", got, uid, os.Getgid())
	}
	if mode == "none" {
		if p.host().uids.ranged() || p.host().gids.ranged() {
			t.Fatalf("without subordinate ids the sandbox maps %+v, %+v", p.host().uids, p.host().gids)
		}
		for _, user := range []string{"0", o} {
			_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "true", User: user})
			if !errors.Is(err, providers.ErrInvalid) || err == nil ||
				!strings.Contains(err.Error(), "/etc/subuid") || !strings.Contains(err.Error(), "uidmap") || !strings.Contains(err.Error(), "maps only its own user's id") {
				t.Errorf("user %s without subordinate ids: %v; want ErrInvalid saying how to get them (uidmap, /etc/subuid)", user, err)
			}
		}
		// A sandbox of a user of its own needs other ids too; the
		// invoking user, by uid, is fine.
		if _, err := p.Create(ctx, providers.Spec{User: "tester"}); !errors.Is(err, providers.ErrInvalid) || !strings.Contains(err.Error(), "/etc/subuid") {
			t.Errorf("create --user tester without subordinate ids: %v; want ErrInvalid saying how to get them", err)
		}
		if got := mustRun(t, p, newSandbox(t, p, providers.Spec{User: strconv.Itoa(uid)}), "id -u"); got != strconv.Itoa(uid)+"\n" {
			t.Errorf("a sandbox of the invoking user's uid runs as %q", got)
		}
		return
	}
	start, err := strconv.Atoi(mode)
	if err != nil {
		t.Fatal(err)
	}
	if !p.host().uids.ranged() || !p.host().gids.ranged() {
		t.Errorf("with subordinate ids the sandbox maps %+v, %+v", p.host().uids, p.host().gids)
	}
	// The init started before its mapping existed, and kept the
	// capabilities it needs (ambient, since its exec was that of an
	// unmapped user) and those its runners pass through to become users.
	rec, err := readMachineRecord(filepath.Join(p.dir, id))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(rec.pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapAmb:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			for _, c := range initAmbientCaps() {
				if err != nil || caps&(1<<c) == 0 {
					t.Errorf("the init's ambient capabilities %s lack %d", strings.TrimSpace(v), c)
				}
			}
		}
	}
	// The ids above the user's own fill the rest of the range, up to
	// idRangeSize ids inside in all.
	name := ""
	if pw, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = pw.Username
	}
	_, count, _ := subordinateRange("/etc/subuid", name, uid)
	wantMap := fmt.Sprintf("%d %d 1\n0 %d %d\n%d %d %d\n", uid, uid, start, uid, uid+1, start+uid, min(count-uid, idRangeSize-uid-1))
	if got := mustRun(t, p, id, "awk '{print $1, $2, $3}' /proc/self/uid_map"); got != wantMap {
		t.Errorf("uid_map inside: %q, want %q", got, wantMap)
	}
	tests := []struct {
		user, shell, want string
	}{
		{"", "mkdir /workspace/shared && chmod 777 /workspace/shared && echo ok", "ok\n"},
		{"0", "id -u; id -g; id -G", "0\n0\n0\n"},
		{"0", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u", "0000000000000000\n"},
		{o, "id -u; id -G; touch /workspace/shared/f && stat -c '%u %g' /workspace/shared/f", o + "\n" + o + "\n" + o + " " + o + "\n"},
		{o, "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u", "0000000000000000\n"},
		// overlayfs changes the file with its mounter's credentials.
		{o, "chmod 640 /workspace/shared/f && touch -d @86400 /workspace/shared/f && stat -c '%a %Y' /workspace/shared/f", "640 86400\n"},
		{"65535", "id -u", "65535\n"},
		// The sandbox's copies of the account files are its root's.
		{"", "stat -c '%u %g' /etc/passwd /etc/group; (echo x >> /etc/passwd) 2>/dev/null && echo allowed || echo denied", "0 0\n0 0\ndenied\n"},
		{"", "stat -c '%u %g' /workspace/shared/f", o + " " + o + "\n"},
	}
	for _, tt := range tests {
		var out, errb strings.Builder
		res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: tt.shell, User: tt.user, Stdout: &out, Stderr: &errb})
		if err != nil || res.ExitCode != 0 || out.String() != tt.want {
			t.Errorf("as %q, %s: %q (exit %d, err %v, stderr %q), want %q", tt.user, tt.shell, out.String(), res.ExitCode, err, errb.String(), tt.want)
		}
	}
	// On the host, user other's file belongs to the id of the range
	// that inside other maps to: start+other, below the user's own id.
	fi, err := os.Stat(filepath.Join(workspacePath(filepath.Join(p.dir, id)), "shared", "f"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != start+other || int(st.Gid) != start+other {
		t.Errorf("user %d's file is owned on the host by %d:%d, want %d:%d", other, st.Uid, st.Gid, start+other, start+other)
	}
	// An id beyond the range is refused, naming the ids there are.
	_, err = p.Exec(ctx, id, providers.ExecRequest{Shell: "true", User: "70000"})
	if !errors.Is(err, providers.ErrInvalid) || !strings.Contains(err.Error(), "maps only the ids 0-65535") {
		t.Errorf("user 70000: %v; want ErrInvalid naming the mapped ids", err)
	}
	// A sandbox made for a user of its own (create --user): the init
	// adds it to /etc/passwd and /etc/group, which belong to the host's
	// root, unmapped here, so the sandbox starts with copies of its own.
	info, err := p.Create(ctx, providers.Spec{User: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	named := info.ID
	if got := mustRun(t, p, named, "id -un; echo $HOME; touch ~/f /workspace/g && echo ok"); got != "tester\n/home/tester\nok\n" {
		t.Errorf("a sandbox of user tester: %q", got)
	}
	if got := mustRun(t, p, named, "grep -c '^tester:' /etc/passwd /etc/group", func(r *providers.ExecRequest) { r.User = "0" }); got != "/etc/passwd:1\n/etc/group:1\n" {
		t.Errorf("user tester in the sandbox's files: %q", got)
	}
	// File operations run as that user too, through the same overlay.
	if err := p.WriteFile(ctx, named, "/workspace/w.txt", strings.NewReader("written\n"), 0o600); err != nil {
		t.Errorf("write as user tester: %v", err)
	}
	if got := mustRun(t, p, named, "cat /workspace/w.txt; stat -c '%a %U' /workspace/w.txt"); got != "written\n600 tester\n" {
		t.Errorf("the file written as user tester: %q", got)
	}
	// Its files belong to subordinate ids, which the user may not
	// remove: the reaper removes them in a user namespace that maps them.
	if err := p.Delete(ctx, named); err != nil {
		t.Fatal(err)
	}
	waitTrashEmpty(t, p)
}
