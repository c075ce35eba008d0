//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// Security issue 13: what of the host a sandbox must never see. Item 6,
// the state directory (other sandboxes' files, metadata with --env
// values, the audit log, the registry) wherever it lies, and the host's
// /var/tmp; item 7, files only root may read, at any depth of the scanned
// trees, for a root sandbox; item 19, the state directory's path (and so
// the user's name and HOME) in the sandbox's mount table.

// readableSecrets runs a script in sandbox id that tries to read every one
// of paths and reports those whose contents held secret, and every path
// of dirs under which find(1) saw an entry named with secret.
func readableSecrets(t *testing.T, p *Provider, id, secret string, paths, dirs []string) []string {
	t.Helper()
	var script strings.Builder
	for _, f := range paths {
		script.WriteString("cat '" + f + "' 2>/dev/null | grep -q '" + secret + "' && echo 'read " + f + "'; ")
	}
	for _, d := range dirs {
		script.WriteString("find '" + d + "' 2>/dev/null | grep -q '" + secret + "' && echo 'listed " + d + "'; ")
		script.WriteString("grep -rqs '" + secret + "' '" + d + "' && echo 'grep " + d + "'; ")
	}
	script.WriteString("true")
	out := mustRun(t, p, id, script.String())
	var got []string
	for l := range strings.Lines(out) {
		got = append(got, strings.TrimSpace(l))
	}
	// The file API runs in the sandbox's view too.
	for _, f := range paths {
		if b, err := readAll(t, p, id, f); err == nil && strings.Contains(string(b), secret) {
			got = append(got, "api-read "+f)
		}
	}
	return got
}

// stateLocations are the places of a state directory exercised by
// TestStateDirHidden: XDG_STATE_HOME in each overlaid system directory,
// directly or through a symlink from outside them. Only /var/tmp is open
// to an unprivileged user. (Not /etc: the base layer of the sandboxes'
// /etc, in the state directory, would lie inside the host's /etc, and
// overlayfs refuses nested lower layers.)
func stateLocations(tok string) []struct{ name, xdg, link string } {
	locs := []struct{ name, xdg, link string }{{name: "var-tmp", xdg: "/var/tmp/" + tok}}
	if os.Getuid() == 0 {
		locs = append(locs,
			struct{ name, xdg, link string }{name: "var-lib", xdg: "/var/lib/" + tok},
			struct{ name, xdg, link string }{name: "opt", xdg: "/opt/" + tok + "/state"},
			struct{ name, xdg, link string }{name: "usr-local", xdg: "/usr/local/" + tok},
			struct{ name, xdg, link string }{name: "var-spool", xdg: "/var/spool/" + tok},
			// XDG_STATE_HOME is a link outside the layers to a
			// directory in one.
			struct{ name, xdg, link string }{name: "link-to-var-lib", xdg: "/var/lib/" + tok + "-real", link: "/srv-" + tok},
		)
	}
	return locs
}

// TestStateDirHidden (item 6) puts the tool's state directory where a
// sandbox would otherwise see it and checks that sandbox A reads nothing
// of sandbox B (its workspace, HOME, metadata with its --env secret), of
// the registry and audit log beside them, nor of the host's /var/tmp;
// that A's /var/tmp is its own and lasts; and that metadata is 0600.
func TestStateDirHidden(t *testing.T) {
	for _, loc := range stateLocations("sbxstate-" + token(t)) {
		t.Run(loc.name, func(t *testing.T) {
			tok := token(t)
			secret := "leaked-" + tok
			xdg := loc.xdg
			if err := os.MkdirAll(xdg, 0o755); err != nil {
				t.Fatal(err)
			}
			made := strings.TrimSuffix(loc.xdg, "/state")
			t.Cleanup(func() { _ = removeTree(made) })
			if loc.link != "" {
				if err := os.Symlink(xdg, loc.link); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Remove(loc.link) })
				xdg = loc.link
			}
			stateDir := filepath.Join(xdg, "sandbox")
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			// What the CLI keeps beside the provider's directory.
			audit := filepath.Join(stateDir, "audit.jsonl")
			registry := filepath.Join(stateDir, "sandboxes.json")
			plantFile(t, audit, `{"op":"exec","cmd":"echo `+secret+`"}`+"\n", 0o600)
			plantFile(t, registry, `{"id":"`+secret+`"}`+"\n", 0o600)
			// A host file in /var/tmp, readable by all.
			hostTmp := filepath.Join("/var/tmp", "host-"+tok)
			plantFile(t, hostTmp, secret+"\n", 0o644)
			t.Cleanup(func() { os.Remove(hostTmp) })

			p := providerAt(t, stateDir)
			a := newSandbox(t, p, providers.Spec{})
			b := newSandbox(t, p, providers.Spec{Env: map[string]string{"API_TOKEN": secret}})
			writeString(t, p, b, "/workspace/notes-"+tok, secret+"\n")
			mustRun(t, p, b, `echo `+secret+` > "$HOME/.history-`+tok+`"; echo `+secret+` > /var/tmp/b-`+tok)

			// The state directory through the path the host uses and
			// through the real one.
			realState, err := filepath.EvalSymlinks(stateDir)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, root := range []string{stateDir, realState} {
				bdir := filepath.Join(root, Name, b)
				paths = append(paths,
					filepath.Join(root, "audit.jsonl"), filepath.Join(root, "sandboxes.json"),
					filepath.Join(bdir, metaFile), filepath.Join(workspacePath(bdir), "notes-"+tok),
					filepath.Join(p.homePath(bdir), ".history-"+tok))
			}
			paths = append(paths, hostTmp, "/var/tmp/b-"+tok)
			dirs := []string{realState, filepath.Dir(realState), "/var/tmp"}
			if got := readableSecrets(t, p, a, secret, paths, dirs); len(got) > 0 {
				t.Errorf("sandbox A reaches the state directory or the host's /var/tmp:\n%s", strings.Join(got, "\n"))
			}
			// B's own /var/tmp holds what B wrote, and only that.
			if out := mustRun(t, p, b, "cat /var/tmp/b-"+tok+"; ls -A /var/tmp"); out != secret+"\nb-"+tok+"\n" {
				t.Errorf("B's /var/tmp: %q", out)
			}
			// The host's /var/tmp did not get B's file, and B's
			// /var/tmp lasts across a stop, like its other layers.
			if _, err := os.Lstat("/var/tmp/b-" + tok); err == nil {
				t.Errorf("B's /var/tmp reached the host's")
			}
			stopSandbox(t, p, b)
			if out := mustRun(t, p, b, "cat /var/tmp/b-"+tok+"; stat -c %a /var/tmp"); out != secret+"\n1777\n" {
				t.Errorf("B's /var/tmp after a restart: %q", out)
			}
			// Metadata holds the --env value: the owner's alone.
			for _, id := range []string{a, b} {
				fi, err := os.Stat(filepath.Join(p.dir, id, metaFile))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s's metadata has mode %v, want 0600", id, fi.Mode().Perm())
				}
				if di, err := os.Stat(filepath.Join(p.dir, id)); err != nil || di.Mode().Perm() != 0o700 {
					t.Errorf("%s's directory: %v, %v; want mode 0700", id, di, err)
				}
			}
		})
	}
}

// TestVarTmpPrivateInOldSandbox (item 6): a sandbox made before /var/tmp
// was private (its /var layer has a plain /var/tmp holding its files, or
// none) gets a private one at its next start, keeping its files; one that
// made /var/tmp a symlink keeps it.
func TestVarTmpPrivateInOldSandbox(t *testing.T) {
	tok := token(t)
	hostTmp := filepath.Join("/var/tmp", "host-"+tok)
	plantFile(t, hostTmp, "host\n", 0o644)
	t.Cleanup(func() { os.Remove(hostTmp) })
	p := newTestProvider(t)
	for _, c := range []struct {
		name, prepare, want string
	}{
		// What an older binary left: no tmp in the layer.
		{name: "none", prepare: "rm", want: "\n"},
		// A plain directory holding the sandbox's own file.
		{name: "plain", prepare: "plain", want: "own-" + tok + "\n"},
		// The sandbox's own symlink to /tmp.
		{name: "symlink", prepare: "symlink", want: "link\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := newSandbox(t, p, providers.Spec{})
			stopSandbox(t, p, id)
			upper := filepath.Join(p.dir, id, upperDir, "var", "tmp")
			if err := os.RemoveAll(upper); err != nil {
				t.Fatal(err)
			}
			switch c.prepare {
			case "plain":
				if err := os.Mkdir(upper, 0o1777); err != nil {
					t.Fatal(err)
				}
				plantFile(t, filepath.Join(upper, "own-"+tok), "own\n", 0o644)
			case "symlink":
				if err := os.Symlink("/tmp", upper); err != nil {
					t.Fatal(err)
				}
			}
			out := mustRun(t, p, id, "if [ -L /var/tmp ]; then echo link; else echo $(ls -A /var/tmp); fi")
			if strings.Contains(out, "host-"+tok) {
				t.Errorf("the host's /var/tmp shows: %q", out)
			}
			if out != c.want {
				t.Errorf("/var/tmp lists %q, want %q", out, c.want)
			}
		})
	}
}

// rootSecret is a root-only file planted on the host by
// TestRootOnlySecretsHidden.
type rootSecret struct {
	path string
	mode os.FileMode
	// dirMode is the mode of the directories made for it.
	dirMode os.FileMode
	uid     int
	gid     int
	// visible: the sandbox's root may read it (it is no secret, or no
	// secret of root's: unreadable inside anyway).
	visible bool
}

// plantRootSecret writes s with content, making its directory (with
// dirMode, when set) and its parents.
func plantRootSecret(t *testing.T, s rootSecret, content string) {
	t.Helper()
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if s.dirMode != 0 {
		if err := os.Chmod(dir, s.dirMode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.path, []byte(content), s.mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.path, s.mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(s.path, s.uid, s.gid); err != nil {
		t.Fatal(err)
	}
}

// TestRootOnlySecretsHidden (item 7): files only root may read on the host,
// two and three levels below the scanned directories (in /opt, /var/cache
// and /etc/default, some in a directory only root may enter), are
// unreadable in a root sandbox started after they appeared: in one of a
// provider that cached its masks before, in one of a new provider, and in
// a sandbox restarted. Files others may read at the same depth stay
// readable, and an empty root-only file (a lock) stays writable.
func TestRootOnlySecretsHidden(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("the sandbox's root is the host's only when the tests run as root; an unprivileged sandbox reads what its user may")
		return
	}
	tok := token(t)
	secret := "leaked-" + tok
	tops := []string{"/opt/" + tok, "/var/cache/" + tok, "/etc/default/" + tok, "/etc/default/" + tok + "-cacerts"}
	for _, top := range tops {
		t.Cleanup(func() { _ = os.RemoveAll(top) })
	}
	secrets := []rootSecret{
		{path: "/opt/" + tok + "/app/secrets/credentials", mode: 0o644, dirMode: 0o700},
		{path: "/opt/" + tok + "/app/conf/db.conf", mode: 0o600},
		{path: "/opt/" + tok + "/app/conf/group.conf", mode: 0o640, uid: 4242, gid: 0},
		{path: "/var/cache/" + tok + "/debconf/passwords.dat", mode: 0o600},
		{path: "/var/cache/" + tok + "/a/b/deep.key", mode: 0o640},
		{path: "/etc/default/" + tok + "-cacerts", mode: 0o600},
		{path: "/etc/default/" + tok + "/private/token", mode: 0o644, dirMode: 0o700},
		// Not secrets: readable by all, at the same depths.
		{path: "/opt/" + tok + "/app/conf/public.conf", mode: 0o644, visible: true},
		{path: "/var/cache/" + tok + "/a/b/public.txt", mode: 0o644, visible: true},
	}
	lock := "/var/cache/" + tok + "/debconf/config.lock"
	// Before: a provider whose machine start cached the masks.
	p := newTestProvider(t)
	before := newSandbox(t, p, providers.Spec{})
	for _, s := range secrets {
		plantRootSecret(t, s, secret+"\n")
	}
	plantRootSecret(t, rootSecret{path: lock, mode: 0o600}, "")
	// A file another user keeps to itself (its group is not root's):
	// the sandbox's root may not read it, masked or not.
	theirs := "/var/cache/" + tok + "/a/theirs.conf"
	plantRootSecret(t, rootSecret{path: theirs, mode: 0o600, uid: 4242, gid: 4242}, secret+"\n")

	check := func(t *testing.T, p *Provider, id string) {
		t.Helper()
		var hidden, visible []string
		for _, s := range secrets {
			if s.visible {
				visible = append(visible, s.path)
			} else {
				hidden = append(hidden, s.path)
			}
		}
		hidden = append(hidden, theirs)
		if got := readableSecrets(t, p, id, secret, hidden, nil); len(got) > 0 {
			t.Errorf("root-only host files readable in sandbox %s:\n%s", id, strings.Join(got, "\n"))
		}
		for _, v := range visible {
			if out := mustRun(t, p, id, "cat "+v); out != secret+"\n" {
				t.Errorf("%s, readable by all, reads %q inside", v, out)
			}
		}
		// The lock stays usable: the sandbox writes its own copy.
		if out := mustRun(t, p, id, "echo mine > "+lock+" && cat "+lock); out != "mine\n" {
			t.Errorf("writing the empty root-only %s: %q", lock, out)
		}
	}
	// A new provider reads the masks cached before the files appeared,
	// and checks them as its machine starts.
	t.Run("new-provider", func(t *testing.T) {
		p2, err := New(providers.Config{StateDir: filepath.Dir(p.dir)})
		if err != nil {
			t.Fatal(err)
		}
		check(t, p2, newSandbox(t, p2, providers.Spec{}))
	})
	// The provider that computed them checks again at each start.
	t.Run("same-provider", func(t *testing.T) {
		check(t, p, newSandbox(t, p, providers.Spec{}))
	})
	t.Run("restarted", func(t *testing.T) {
		stopSandbox(t, p, before)
		check(t, p, before)
	})
	// A write to the empty root-only file makes it a secret: the next
	// machine start hides it.
	t.Run("lock-written", func(t *testing.T) {
		if err := os.WriteFile(lock, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		id := newSandbox(t, p, providers.Spec{})
		if got := readableSecrets(t, p, id, secret, []string{lock}, nil); len(got) > 0 {
			t.Errorf("the lock, written to since the masks were cached, is readable: %v", got)
		}
	})
}

// TestMountinfoHidesStatePaths (item 19): the sandbox's mount table does
// not tell where the host keeps the state directory: neither its path nor
// the user's HOME (the state directory's usual parent) appear in the
// options of its mounts, nor in the root of any mount (a bind mount's
// root is its source's path on the host's file system, so /workspace and
// HOME are directories of the root layer, not binds).
func TestMountinfoHidesStatePaths(t *testing.T) {
	tok := token(t)
	home := filepath.Join(t.TempDir(), "home-"+tok)
	stateDir := filepath.Join(home, ".local", "state", "sandbox")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Cleanup(func() { _ = removeTree(home) }) // after the provider's own
	p := providerAt(t, stateDir)
	id := newSandbox(t, p, providers.Spec{})
	for _, f := range []string{"/proc/self/mountinfo", "/proc/self/mounts", "/proc/1/mountinfo"} {
		out := mustRun(t, p, id, "cat "+f+" 2>/dev/null; true")
		if f == "/proc/self/mountinfo" && !strings.Contains(out, " / / ") {
			t.Fatalf("no mount table: %q", out)
		}
		for line := range strings.Lines(out) {
			for _, leak := range []string{home, stateDir, p.dir, tok} {
				if strings.Contains(line, leak) {
					t.Errorf("%s shows %s: %s", f, leak, line)
				}
			}
			if fields := strings.Fields(line); strings.HasSuffix(f, "mountinfo") && len(fields) > 4 && (fields[4] == "/workspace" || fields[4] == p.home) {
				t.Errorf("%s has a mount at %s: %s", f, fields[4], line)
			}
		}
	}
	// The overlays name their layers relative to the state directory.
	out := mustRun(t, p, id, "grep -c 'upperdir=sb-' /proc/self/mountinfo")
	if out == "0\n" {
		t.Errorf("no overlay with a relative upper layer")
	}
}
