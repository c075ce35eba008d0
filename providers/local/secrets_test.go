//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// plantFile writes a secret file, creating its directory, readable by all
// (so that only the sandbox, not file permissions, keeps it hidden).
func plantFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// plantSocket listens on a Unix socket at path until t ends.
func plantSocket(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen %s: %v", path, err)
	}
	t.Cleanup(func() { ln.Close(); os.Remove(path) })
}

// TestHostSecretsInvisible plants real secrets on the host, where a
// careless sandbox would show them, and checks that no command, read or
// download in the sandbox reaches them. It runs as root and (through
// TestEscapeUnprivileged) as an unprivileged user.
func TestHostSecretsInvisible(t *testing.T) {
	tok := token(t)
	secret := "leaked-" + tok // file contents; paths carry tok alone
	// The invoking user's HOME, placed under a system directory the
	// sandbox overlays (as for a service account such as
	// /var/lib/jenkins), holding every kind of credential. An
	// unprivileged user may only write to /var/tmp, which no sandbox sees
	// (each has its own); root puts it in /var/lib, which the masks hide.
	homeParent := "/var/tmp"
	if os.Getuid() == 0 {
		homeParent = "/var/lib"
	}
	home, err := os.MkdirTemp(homeParent, "sandbox-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{
		".ssh/id_ed25519", ".aws/credentials", ".config/gcloud/application_default_credentials.json",
		".kube/config", ".docker/config.json", ".netrc", "project/.env", ".bash_history",
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(home, f)
		plantFile(t, p, secret+"\n", 0o644)
		paths = append(paths, p)
	}
	socks := []string{filepath.Join(home, ".ssh/agent.sock"), filepath.Join(home, ".gnupg/S.gpg-agent")}
	for _, s := range socks {
		plantSocket(t, s)
	}
	// A .env outside the workspace in the host's /tmp, as the CLI's own
	// directory might be.
	tmpEnv := filepath.Join(t.TempDir(), ".env")
	plantFile(t, tmpEnv, "API_TOKEN="+secret+"\n", 0o644)
	paths = append(paths, tmpEnv)
	sshDir := t.TempDir()
	socks = append(socks, filepath.Join(sshDir, "agent.1234"))
	plantSocket(t, socks[len(socks)-1])

	if os.Getuid() == 0 {
		// Root's own files, and what the host hides from other users
		// under /etc, restored afterwards.
		rootSecret := "/root/.sandbox-secret-" + tok
		plantFile(t, rootSecret, secret+"\n", 0o644)
		t.Cleanup(func() { os.Remove(rootSecret) })
		etcSecret := "/etc/sandbox-secret-" + tok
		plantFile(t, etcSecret, secret+"\n", 0o600)
		t.Cleanup(func() { os.Remove(etcSecret) })
		paths = append(paths, rootSecret, etcSecret)
		if _, err := os.Stat("/etc/ssh"); err != nil {
			if err := os.Mkdir("/etc/ssh", 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove("/etc/ssh") })
		}
		hostKey := "/etc/ssh/ssh_host_sandbox_" + tok + "_key"
		plantFile(t, hostKey, secret+"\n", 0o600)
		t.Cleanup(func() { os.Remove(hostKey) })
		paths = append(paths, hostKey)
		runUser := "/run/user/0/gnupg-" + tok + "/S.gpg-agent"
		plantSocket(t, runUser)
		t.Cleanup(func() { os.Remove(filepath.Dir(runUser)) })
		socks = append(socks, runUser)
		if _, err := os.Lstat("/run/docker.sock"); err != nil {
			plantSocket(t, "/run/docker.sock")
		}
		socks = append(socks, "/run/docker.sock", "/var/run/docker.sock")
	}
	// Host variables that must not reach the sandbox.
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", socks[0])
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("GITHUB_TOKEN", secret)
	t.Setenv("DOCKER_HOST", "unix:///run/docker.sock")

	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{Env: map[string]string{"NAMED": "given"}})

	var script strings.Builder
	script.WriteString("env | grep -c " + tok + "; echo $NAMED; ")
	for _, f := range paths {
		script.WriteString("cat '" + f + "' 2>/dev/null | grep -q " + secret + " && echo 'read " + f + "'; ")
	}
	for _, s := range socks {
		script.WriteString("test -S '" + s + "' && /workspace/probe connect-unix '" + s + "' | grep -q ok && echo 'connected " + s + "'; ")
	}
	script.WriteString(`ls -A "$HOME" | grep -E '^\.(ssh|aws|kube|docker|gnupg|config|netrc)$'; `)
	script.WriteString(`grep -c '` + tok + `' /proc/net/unix; test -e /sys/class/net && echo sys; echo end`)
	probe, err := os.ReadFile(buildProbe(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(workspaceFile(p, id, "probe"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
	got := mustRun(t, p, id, script.String())
	if got != "0\ngiven\n0\nend\n" {
		t.Errorf("inside the sandbox:\n%s\nwant only the named variable and no secret", got)
	}

	// Links planted in the workspace, by the host and by the sandbox,
	// to every secret: read, download and exec through them find
	// nothing.
	var links strings.Builder
	for i, f := range paths {
		if err := os.Symlink(f, workspaceFile(p, id, "hostlink"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		links.WriteString("ln -s '" + f + "' /workspace/link" + strconv.Itoa(i) + "; ")
	}
	mustRun(t, p, id, links.String()+"true")
	for i := range paths {
		for _, name := range []string{"hostlink", "link"} {
			path := "/workspace/" + name + strconv.Itoa(i)
			b, _ := readAll(t, p, id, path)
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("read %s (-> %s) returned the secret", path, paths[i])
			}
		}
	}
	var buf bytes.Buffer
	if err := p.Download(context.Background(), id, "/workspace", &buf); err != nil {
		t.Fatalf("download: %v", err)
	}
	if bytes.Contains(buf.Bytes(), []byte(secret)) {
		t.Errorf("the workspace download carried a secret")
	}
	if out := mustRun(t, p, id, "cat /workspace/*link* 2>/dev/null; echo end"); strings.Contains(out, secret) {
		t.Errorf("exec read a secret through a link: %q", out)
	}
}

func TestHostMasks(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("needs root to own files as other users; covered by the root run in CI")
		return
	}
	base := t.TempDir()
	layers := []layer{{Name: "var", Lower: "/var"}, {Name: "usr", Lower: "/usr"}}
	mk := func(p string, uid int, mode os.FileMode, content string) string {
		t.Helper()
		full := filepath.Join(base, p)
		if content == "" && !strings.Contains(filepath.Base(p), ".") {
			if err := os.MkdirAll(full, mode); err != nil {
				t.Fatal(err)
			}
		} else {
			plantFile(t, full, content, mode)
		}
		if err := os.Chown(full, uid, uid); err != nil {
			t.Fatal(err)
		}
		return full
	}
	// Homes live under /var/tmp here; the layer check sees them as /var/…
	own := mk("owned", 4242, 0o755, "")
	shared := mk("shared", 0, 0o755, "")
	passwd := mk("passwd.txt", 0, 0o644, "svc:x:4242:4242::"+own+":/bin/sh\ndaemon:x:1:1::"+shared+":/bin/sh\nbad line\nu:x:7:7::/home/u:/bin/sh\n")
	got := hostMasks(layers, 1000, "", passwd)
	if !strings.HasPrefix(base, "/var/") && !strings.HasPrefix(base, "/usr/") {
		// TMPDIR is not under a layer: nothing of it may be masked.
		if slices.Contains(got, own) {
			t.Errorf("masked %s outside every layer", own)
		}
		layers = append(layers, layer{Name: strings.Split(strings.TrimPrefix(base, "/"), "/")[0]})
		got = hostMasks(layers, 1000, "", passwd)
	}
	if !slices.Contains(got, own) {
		t.Errorf("hostMasks = %v, want the home %s its user owns", got, own)
	}
	if slices.Contains(got, shared) {
		t.Errorf("hostMasks = %v masks %s, a home the user does not own", got, shared)
	}
	// The invoking user's HOME under a layer is masked too.
	mine := mk("mine", 1000, 0o755, "")
	if got := hostMasks(layers, 1000, mine, passwd); !slices.Contains(got, mine) {
		t.Errorf("hostMasks = %v, want the invoking user's HOME %s", got, mine)
	}
}

// TestSecretScan checks the rule of the root scan on a planted tree: at
// any depth, what belongs to root and is kept from other users is hidden;
// what other users may read, what belongs to another user, what lies in a
// directory the sandbox's root may not enter, empty files, links and
// other file systems are not.
func TestSecretScan(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("needs root to own files as other users; covered by the root run in CI")
		return
	}
	scan := t.TempDir()
	type entry struct {
		path      string
		mode      os.FileMode
		uid, gid  int
		content   string // "/" makes a directory
		wantMask  bool
		wantWatch bool
	}
	entries := []entry{
		{"key.pem", 0o600, 0, 0, "k", true, false},
		{"lock.pwd", 0o600, 0, 0, "", false, true},
		{"pub.txt", 0o644, 0, 0, "p", false, false},
		{"private", 0o700, 0, 0, "/", true, false},
		{"private/inner", 0o600, 0, 0, "x", false, false}, // below a mask
		{"deep", 0o755, 0, 0, "/", false, true},
		{"deep/a", 0o755, 0, 0, "/", false, true},
		{"deep/a/b", 0o755, 0, 0, "/", false, true},
		{"deep/a/b/credentials", 0o600, 0, 0, "secret", true, false},
		{"deep/a/b/group-root.conf", 0o640, 4242, 0, "secret", true, false},
		{"deep/a/b/shared.conf", 0o640, 0, 4242, "secret", true, false},
		{"deep/a/b/world.conf", 0o644, 0, 0, "public", false, false},
		{"deep/a/b/theirs.conf", 0o600, 4242, 4242, "theirs", false, false},
		{"deep/listonly", 0o711, 0, 0, "/", true, false},
		{"deep/noenter", 0o744, 0, 0, "/", true, false},
		{"deep/pg", 0o700, 4242, 4242, "/", false, true},
		{"deep/pg/root-file", 0o600, 0, 0, "unreachable", false, false},
		{"deep/svc", 0o755, 4242, 4242, "/", false, true},
		{"deep/svc/root-secret", 0o600, 0, 0, "secret", true, false},
		{"deep/partial", 0o700, 4242, 0, "/", false, true}, // apt's: _apt:root 0700
		{"deep/grouplist", 0o750, 4242, 0, "/", true, false},
		{"deep/groupx", 0o710, 4242, 0, "/", false, true},
		{"deep/groupx/root-secret", 0o600, 0, 0, "secret", true, false},
		{"deep/a/b/group-none.conf", 0o600, 4242, 0, "theirs", false, false},
	}
	var wantMasks, wantWatch []string
	for _, e := range entries {
		full := filepath.Join(scan, e.path)
		if e.content == "/" {
			if err := os.Mkdir(full, e.mode); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(full, []byte(e.content), e.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, e.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(full, e.uid, e.gid); err != nil {
			t.Fatal(err)
		}
		if e.wantMask {
			wantMasks = append(wantMasks, full)
		}
		if e.wantWatch {
			wantWatch = append(wantWatch, full)
		}
	}
	if err := os.Symlink(filepath.Join(scan, "key.pem"), filepath.Join(scan, "deep", "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(scan, "deep", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another file system mounted below: not part of the overlay's layer.
	mnt := filepath.Join(scan, "deep", "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	plantFile(t, filepath.Join(mnt, "other-fs-secret"), "x", 0o600)

	s := &secretScanner{groups: []uint32{0}, stamps: newStamps()}
	top := strings.Split(strings.TrimPrefix(scan, "/"), "/")[0]
	s.scanTree([]layer{{Name: top, Lower: "/" + top}}, scan)
	slices.Sort(s.masks)
	slices.Sort(wantMasks)
	if !slices.Equal(s.masks, wantMasks) {
		t.Errorf("masks:\n got %v\nwant %v", s.masks, wantMasks)
	}
	for _, w := range append(wantWatch, scan) {
		kind := string(rune(stampFull))
		if strings.HasSuffix(w, "/pg") || strings.HasSuffix(w, "/partial") {
			kind = string(rune(stampPerms)) // not entered: its mode and owner only
		}
		if !slices.Contains(s.stamps.watch, kind+w) {
			t.Errorf("%s is not watched as %s (watched: %v)", w, kind, s.stamps.watch)
		}
	}
	for _, p := range s.stamps.watch {
		if strings.HasPrefix(p[1:], mnt) {
			t.Errorf("the scan entered another file system: %s", p)
		}
	}
	// Outside every layer nothing is scanned.
	s = &secretScanner{groups: []uint32{0}, stamps: newStamps()}
	s.scanTree([]layer{{Name: "nonexistent-layer"}}, scan)
	if len(s.masks) != 0 {
		t.Errorf("masked %v outside every layer", s.masks)
	}
	// The host's own trees: /var/tmp, every sandbox's own, is left out.
	varTmpSecret := filepath.Join("/var/tmp", token(t)+"-secret")
	plantFile(t, varTmpSecret, "secret", 0o600)
	t.Cleanup(func() { os.Remove(varTmpSecret) })
	layers, _ := hostLayout("/")
	for _, m := range hostMasks(layers, 0, "", "/etc/passwd") {
		if strings.HasPrefix(m, "/var/tmp/") {
			t.Errorf("mask %s in /var/tmp, which no sandbox sees", m)
		}
	}
}

func TestCachedMasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scan := filepath.Join(dir, "scan")
	deep := filepath.Join(scan, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(deep, "empty.lock")
	plantFile(t, empty, "", 0o600)
	// A directory the scan does not enter: only its mode and owner count.
	closed := filepath.Join(scan, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, maskCacheFile)
	calls := 0
	compute := func(st *stamps) []string {
		calls++
		for _, p := range []string{scan, filepath.Join(scan, "a"), deep, empty} {
			st.add(stampFull, p)
		}
		st.add(stampPerms, closed)
		return []string{"/m" + strconv.Itoa(calls)}
	}
	get := func(key string) []string { return cachedMasks(cache, key, compute) }
	first := get("uid=0")
	if again := get("uid=0"); calls != 1 || !slices.Equal(again, first) {
		t.Fatalf("second call computed again (%d) or differs: %v vs %v", calls, again, first)
	}
	step := func(what string, change func()) {
		t.Helper()
		before := calls
		change()
		get("uid=0")
		if calls != before+1 {
			t.Errorf("%s did not recompute", what)
		}
		get("uid=0")
		if calls != before+1 {
			t.Errorf("after %s, the cache was not used again", what)
		}
	}
	// A new entry at any depth is noticed, and so are a write to a
	// watched file and a chmod of a watched directory.
	step("a new entry two levels down", func() { plantFile(t, filepath.Join(deep, "new-secret"), "x", 0o600) })
	step("a new top-level entry", func() { plantFile(t, filepath.Join(scan, "top-secret"), "x", 0o600) })
	step("a write to a watched empty file", func() { plantFile(t, empty, "now a secret", 0o600) })
	step("a chmod of a watched directory", func() {
		if err := os.Chmod(filepath.Join(scan, "a"), 0o700); err != nil {
			t.Fatal(err)
		}
	})
	step("a chmod of a directory not entered", func() {
		if err := os.Chmod(closed, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	before := calls
	plantFile(t, filepath.Join(closed, "queue-file"), "x", 0o600)
	if get("uid=0"); calls != before {
		t.Errorf("a new entry in a directory not entered recomputed")
	}
	step("a removed directory", func() {
		if err := os.RemoveAll(deep); err != nil {
			t.Fatal(err)
		}
	})
	// So is a different key (another user, HOME or rule).
	before = calls
	get("uid=1000")
	if calls != before+1 {
		t.Errorf("another key did not recompute: calls %d", calls)
	}
	// A damaged cache is recomputed.
	if err := os.WriteFile(cache, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	get("uid=1000")
	if calls != before+2 {
		t.Errorf("a damaged cache was used: calls %d", calls)
	}
}

// TestEtcBaseSanitizes: root's base layer for /etc holds the shadow files
// with every password field "*", made once per content. Another user's
// provider asks for no shadow files (it masks them): a base with them
// needs the copies given group root, which that user cannot, so none is
// made (nothing half-made is left), and its base holds the hostname alone.
func TestEtcBaseSanitizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "shadow")
	plantFile(t, src, "root:$6$salt$hash:20228:0:99999:7:::\nalice:$y$j9T$abc$def:20228:0:99999:7:::\nbob:!:1::::::\n", 0o640)
	if os.Geteuid() != 0 {
		if base, shadow := makeEtcBase(dir, []string{src}); base != "" || shadow {
			t.Errorf("as uid %d, makeEtcBase with shadow files = %q, %v; want none (its copies cannot get group root)", os.Geteuid(), base, shadow)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*"+etcBasePrefix+"*")); len(left) != 0 {
			t.Errorf("a failed base left %v", left)
		}
		base, shadow := makeEtcBase(dir, nil)
		if base == "" || shadow {
			t.Fatalf("makeEtcBase without shadow files = %q, %v", base, shadow)
		}
		if b, err := os.ReadFile(filepath.Join(base, "hostname")); err != nil || string(b) != hostname+"\n" {
			t.Errorf("the base's hostname: %q, %v", b, err)
		}
		if _, err := os.Lstat(filepath.Join(base, "shadow")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the base of another user holds a shadow file: %v", err)
		}
		return
	}
	base, shadow := makeEtcBase(dir, []string{src, filepath.Join(dir, "missing")})
	if base == "" || !shadow {
		t.Fatalf("makeEtcBase = %q, %v", base, shadow)
	}
	dst := filepath.Join(base, "shadow")
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	want := "root:*:20228:0:99999:7:::\nalice:*:20228:0:99999:7:::\nbob:*:1::::::\n"
	if string(b) != want {
		t.Errorf("sanitized = %q, want %q", b, want)
	}
	if got, _ := os.Lstat(dst); got == nil || got.Mode().Perm() != 0o640 {
		t.Errorf("mode of the copy: %v", got)
	}
	if again, _ := makeEtcBase(dir, []string{src}); again != base {
		t.Errorf("the same content made another base: %q, want %q", again, base)
	}
	plantFile(t, src, "root:$6$other:1::::::\n", 0o640)
	if changed, _ := makeEtcBase(dir, []string{src}); changed == base || changed == "" {
		t.Errorf("a changed file kept the base %q (got %q)", base, changed)
	}
}

// TestLateMasks: a machine starts with the masks its provider read from
// the cache, while the check of that cache runs beside the start (root's
// only: another user's masks are computed before it). A secret the host
// made after the cache was written is masked before any command runs.
func TestLateMasks(t *testing.T) {
	if os.Getuid() != 0 {
		t.Logf("only root's cached masks are checked beside the start")
		return
	}
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{}) // its start writes the cache
	stopSandbox(t, p, id)
	secret := filepath.Join("/etc", "sandbox-late-"+token(t))
	plantFile(t, secret, "late secret\n", 0o600)
	t.Cleanup(func() { os.Remove(secret) })
	// A new provider (a new CLI) reads the cache, which lacks it.
	q, err := New(providers.Config{StateDir: filepath.Dir(p.dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Masked: an empty file the sandbox may not read.
	if r := run(t, q, id, "cat "+secret); strings.Contains(r.stdout+r.stderr, "late secret") || r.code == 0 && r.stdout != "" {
		t.Errorf("a secret made after the mask cache: exit %d, %q %q, want it masked", r.code, r.stdout, r.stderr)
	}
}

// TestMaskCacheHead: a start's decoding of the cache's head gives what the
// whole decoding gives but the watched paths, and refuses what it refuses.
func TestMaskCacheHead(t *testing.T) {
	t.Parallel()
	for _, c := range []maskCache{
		{key: "k", sum: "s", ownerless: "o"},
		{key: "k", sum: "s", ownerless: "o", masks: []string{"/etc/shadow", "/root"}},
		{key: "k", sum: "s", ownerless: "o", masks: []string{"/a"}, watch: []string{"f/etc", "p/etc/ssl", ""}},
	} {
		b := c.encode()
		full, ok := decodeMaskCache(b)
		if !ok {
			t.Fatalf("%+v: the whole decoding refuses it", c)
		}
		head, ok := decodeMaskCacheHead(b)
		if !ok || head.key != full.key || head.sum != full.sum || head.ownerless != full.ownerless || !slices.Equal(head.masks, full.masks) || head.watch != nil {
			t.Errorf("%+v: head %+v, whole %+v", c, head, full)
		}
	}
	good := maskCache{key: "k", masks: []string{"/a", "/b"}, watch: []string{"f/x"}}.encode()
	for name, b := range map[string][]byte{
		"empty":              nil,
		"no final NUL":       good[:len(good)-1],
		"other magic":        append([]byte("x"), good...),
		"too many masks":     bytes.Replace(good, []byte("\x002\x00"), []byte("\x009\x00"), 1),
		"count not a number": bytes.Replace(good, []byte("\x002\x00"), []byte("\x00two\x00"), 1),
		"short head":         []byte(maskCacheMagic + "\x00k\x00"),
	} {
		_, whole := decodeMaskCache(b)
		if _, ok := decodeMaskCacheHead(b); ok || whole {
			t.Errorf("%s: head decoding took it %v, the whole %v", name, ok, whole)
		}
	}
}
