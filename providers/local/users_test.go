//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

func TestLookupUser(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0:root:/root:/bin/bash\n# comment\nbroken line\ndev:x:1000:1000::/home/dev:/bin/sh\nnohome:x:1001:1001:::/bin/sh\n"
	group := "root:x:0:\ndev:x:1000:\ndocker:x:999:dev,other\nwheel:x:10:other\n"
	for name, body := range map[string]string{"passwd": passwd, "group": group} {
		if err := os.WriteFile(filepath.Join(root, "etc", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		spec    string
		want    sandboxUser
		wantErr bool
	}{
		{"root", sandboxUser{name: "root", uid: 0, gid: 0, home: "/root", groups: []int{0}}, false},
		{"dev", sandboxUser{name: "dev", uid: 1000, gid: 1000, home: "/home/dev", groups: []int{1000, 999}}, false},
		{"1000", sandboxUser{name: "dev", uid: 1000, gid: 1000, home: "/home/dev", groups: []int{1000, 999}}, false},
		{"nohome", sandboxUser{name: "nohome", uid: 1001, gid: 1001, home: "/", groups: []int{1001}}, false},
		{"4242", sandboxUser{uid: 4242, gid: 4242, home: "/", groups: []int{4242}}, false},
		{"ghost", sandboxUser{}, true},
		{"-1", sandboxUser{}, true},
		{"", sandboxUser{}, true},
	}
	for _, tt := range tests {
		got, err := lookupUser(root, tt.spec)
		if (err != nil) != tt.wantErr {
			t.Errorf("lookupUser(%q): err %v, want error %v", tt.spec, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		if got.name != tt.want.name || got.uid != tt.want.uid || got.gid != tt.want.gid || got.home != tt.want.home || !slices.Equal(got.groups, tt.want.groups) {
			t.Errorf("lookupUser(%q) = %+v, want %+v", tt.spec, got, tt.want)
		}
	}
	if _, err := lookupUser(root, "ghost"); !errors.Is(err, errNoUser) {
		t.Errorf("an unknown user: %v, want errNoUser", err)
	}
}

func TestUserEnv(t *testing.T) {
	t.Parallel()
	u := sandboxUser{name: "dev", uid: 1000, home: "/home/dev"}
	env := []string{"HOME=/root", "PATH=/bin", "USER=root"}
	if got := userEnv(env, u, false); !slices.Equal(got, []string{"PATH=/bin", "HOME=/home/dev", "LOGNAME=dev", "USER=dev"}) {
		t.Errorf("userEnv = %q", got)
	}
	if got := userEnv(env, u, true); !slices.Equal(got, []string{"HOME=/root", "PATH=/bin", "LOGNAME=dev", "USER=dev"}) {
		t.Errorf("userEnv keeping HOME = %q", got)
	}
	if env[0] != "HOME=/root" || len(env) != 3 {
		t.Errorf("userEnv changed its input: %q", env)
	}
}

func TestSubordinateBase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		body string
		want int
	}{
		{"alice:100000:65536\nroot:200000:65536\n", 199999},
		{"0:300000:70000\n", 299999},
		{"root:200000:1000\n", 7},
		{"alice:100000:65536\n", 7},
		{"", 7},
	}
	for i, tt := range tests {
		f := filepath.Join(dir, strings.Repeat("x", i+1))
		if err := os.WriteFile(f, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := subordinateBase(f, 7); got != tt.want {
			t.Errorf("subordinateBase(%q) = %d, want %d", tt.body, got, tt.want)
		}
	}
	if got := subordinateBase(filepath.Join(dir, "missing"), 7); got != 7 {
		t.Errorf("a missing file gives %d", got)
	}
}

// TestUsers: as root, or as a user with subordinate ids, a sandbox's
// commands and file operations run as its default user, made at create
// with a home it owns; --user picks another user of its /etc/passwd or a
// uid; an unknown one is refused clearly; no user keeps a capability.
// Without subordinate ids, testUsersUnprivileged.
func TestUsers(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	if !p.host().uids.ranged() {
		testUsersUnprivileged(t)
		return
	}
	id := newSandbox(t, p, providers.Spec{User: "dev"})
	ctx := context.Background()
	tests := []struct {
		user, shell, want string
	}{
		{"", "id -un; [ $(id -u) -ge 1000 ] && echo high; echo $HOME $USER; pwd", "dev\nhigh\n/home/dev dev\n/workspace\n"},
		{"", "stat -c '%U %a' /home/dev /workspace", "dev 755\ndev 755\n"},
		{"", "touch /workspace/mine && stat -c %U /workspace/mine", "dev\n"},
		{"", "(echo x >> /etc/passwd) 2>/dev/null && echo wrote || echo denied", "denied\n"},
		{"root", "id -un; echo $HOME", "root\n/root\n"},
		{"root", "cd && pwd && stat -c '%U %a' .", "/root\nroot 700\n"},
		{"0", "id -u", "0\n"},
		{"nobody", "id -un", "nobody\n"},
		{"4242", "id -u; id -g; echo $HOME", "4242\n4242\n/\n"},
		{"dev", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u", "0000000000000000\n"},
		{"root", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u", "0000000000000000\n"},
	}
	for _, tt := range tests {
		var out, errb strings.Builder
		res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: tt.shell, User: tt.user, Stdout: &out, Stderr: &errb})
		if err != nil || res.ExitCode != 0 || out.String() != tt.want {
			t.Errorf("as %q, %s: %q (exit %d, err %v, stderr %q), want %q", tt.user, tt.shell, out.String(), res.ExitCode, err, errb.String(), tt.want)
		}
	}
	// HOME set by the caller stays.
	var out strings.Builder
	if _, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "echo $HOME", Env: map[string]string{"HOME": "/tmp"}, Stdout: &out}); err != nil || out.String() != "/tmp\n" {
		t.Errorf("HOME from the request: %q, %v", out.String(), err)
	}
	// File operations act as the default user.
	if err := p.WriteFile(ctx, id, "/home/dev/notes.txt", strings.NewReader("hi"), 0o644); err != nil {
		t.Fatalf("write as the default user: %v", err)
	}
	if got := mustRun(t, p, id, "stat -c %U /home/dev/notes.txt && echo more >> /home/dev/notes.txt && cat /home/dev/notes.txt"); got != "dev\nhimore\n" {
		t.Errorf("a file written through the API: %q", got)
	}
	if err := p.WriteFile(ctx, id, "/etc/forbidden", strings.NewReader("x"), 0o644); err == nil {
		t.Error("the default user wrote /etc/forbidden")
	}
	// Unknown users, in several spellings.
	for _, u := range []string{"ghost", "no-such-user", "-rf", "a:b", "x\ny"} {
		_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "true", User: u})
		if !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("user %q: %v, want ErrInvalid", u, err)
		}
	}
	if _, err := p.Create(ctx, providers.Spec{User: "bad:name"}); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("create with user bad:name: %v", err)
	}
	// The user survives a stop.
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, p, id, "id -un; grep -c '^dev:' /etc/passwd"); got != "dev\n1\n" {
		t.Errorf("after a stop: %q", got)
	}
}

// testUsersUnprivileged is TestUsers as a user without subordinate ids
// (TestEscapeUnprivileged runs it so): the sandbox maps that user alone,
// who runs commands by default and by name or uid; anyone else is
// refused with how to get more ids.
func testUsersUnprivileged(t *testing.T) {
	p := newTestProvider(t)
	if p.host().uids.ranged() {
		t.Fatalf("this run expects no subordinate ids (see TestSubordinateIDs), got %+v", p.host().uids)
	}
	me := strconv.Itoa(os.Getuid())
	id := newSandbox(t, p, providers.Spec{})
	ctx := context.Background()
	for _, u := range []string{"", me} {
		var out strings.Builder
		if _, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "id -u", User: u, Stdout: &out}); err != nil || out.String() != me+"\n" {
			t.Errorf("as %q: %q, %v; want uid %s", u, out.String(), err, me)
		}
	}
	for _, u := range []string{"root", "0", "1000", "ghost"} {
		_, err := p.Exec(ctx, id, providers.ExecRequest{Shell: "true", User: u})
		if !errors.Is(err, providers.ErrInvalid) {
			t.Errorf("user %q: %v, want ErrInvalid", u, err)
		} else if u != "ghost" && !strings.Contains(err.Error(), "/etc/subuid") {
			t.Errorf("user %q: %v, want how to add subordinate ids", u, err)
		}
	}
}
