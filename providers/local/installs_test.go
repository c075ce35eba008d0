//go:build linux

package local

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

// buildWheel writes a minimal pure-Python wheel of package name (module
// name, version 1.0) whose module holds value. PyPI is out of reach, so the
// test builds what pip installs.
func buildWheel(t *testing.T, dir, name, value string) string {
	t.Helper()
	path := filepath.Join(dir, name+"-1.0-py3-none-any.whl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	info := name + "-1.0.dist-info/"
	files := []struct{ name, body string }{
		{name + "/__init__.py", "VALUE = " + `"` + value + `"` + "\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: sandbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, fl := range files {
		w, err := zw.Create(fl.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(fl.body)); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(fl.body))
		record.WriteString(fl.name + ",sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]) + "," + strconv.Itoa(len(fl.body)) + "\n")
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildDeb builds a Debian package that installs /usr/bin/<name>.
func buildDeb(t *testing.T, dir, name, value string) string {
	t.Helper()
	root := filepath.Join(dir, "debroot")
	plantFile(t, filepath.Join(root, "DEBIAN", "control"), "Package: "+name+"\nVersion: 1.0\nArchitecture: all\nMaintainer: sandbox tests <tests@example.invalid>\nDescription: test package of the sandbox suite\n", 0o644)
	plantFile(t, filepath.Join(root, "usr", "bin", name), "#!/bin/sh\necho "+value+"\n", 0o755)
	out := filepath.Join(dir, name+"_1.0_all.deb")
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	return out
}

// TestInstallsPersist runs a setup script that installs a Python package
// with pip --user, creates a virtualenv with another one in it, and (as
// root) installs a Debian package with dpkg into the sandbox's own layer;
// a later exec from a fresh provider on the same state (as a new CLI run
// reusing the sandbox) finds all of them, and the host has none.
func TestInstallsPersist(t *testing.T) {
	tok := token(t)
	pkg, venvPkg, deb := "sbxuser"+tok, "sbxvenv"+tok, "sbx-deb-"+tok
	dir := t.TempDir()
	wheel := buildWheel(t, dir, pkg, "user-"+tok)
	venvWheel := buildWheel(t, dir, venvPkg, "venv-"+tok)
	root := os.Getuid() == 0
	debFile := ""
	if root {
		debFile = buildDeb(t, dir, deb, "deb-"+tok)
	}

	stateDir := t.TempDir()
	p := providerAt(t, stateDir)
	id := newSandbox(t, p, providers.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, f := range []string{wheel, venvWheel, debFile} {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WriteFile(ctx, id, "/workspace/pkgs/"+filepath.Base(f), strings.NewReader(string(b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Debian marks its Python as externally managed (PEP 668): pip
	// --user needs --break-system-packages there, as it would on the
	// host.
	script := `set -e
cd /workspace/pkgs
python3 -m pip install --user --no-index --break-system-packages --disable-pip-version-check -q ./` + filepath.Base(wheel) + `
python3 -m venv /workspace/venv
/workspace/venv/bin/python -m pip install --no-index --disable-pip-version-check -q ./` + filepath.Base(venvWheel) + `
`
	user := "sbx" + tok[len(tok)-8:]
	if root {
		// As package scripts do: a system user (useradd rewrites the
		// sandbox's own sanitized /etc/shadow), then the package.
		script += "useradd --system " + user + "\ndpkg -i ./" + filepath.Base(debFile) + " >/dev/null\n"
	}
	var out, errb providertest.Buffer
	res, err := p.Exec(ctx, id, providers.ExecRequest{Argv: []string{"/bin/sh", "-s"}, Stdin: strings.NewReader(script), Stdout: &out, Stderr: &errb, Network: providers.NetworkOn})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setup script: exit %d, err %v\nstdout %s\nstderr %s", res.ExitCode, err, out.String(), errb.String())
	}

	// A new provider on the same state: the next CLI run reusing it.
	p2, err := New(providers.Config{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p2.Close() })
	check := `python3 -c 'import ` + pkg + `; print(` + pkg + `.VALUE)'; /workspace/venv/bin/python -c 'import ` + venvPkg + `; print(` + venvPkg + `.VALUE)'`
	want := "user-" + tok + "\nvenv-" + tok + "\n"
	if root {
		check += "; " + deb + "; dpkg -s " + deb + " | grep -c '^Status: install ok installed'; id -un " + user + "; grep -c '^" + user + ":' /etc/shadow"
		want += "deb-" + tok + "\n1\n" + user + "\n1\n"
	}
	if got := mustRun(t, p2, id, check); got != want {
		t.Errorf("the next exec finds %q, want %q", got, want)
	}
	// The host has none of them.
	if out, err := exec.Command("python3", "-c", "import "+pkg).CombinedOutput(); err == nil {
		t.Errorf("the host imports %s: %s", pkg, out)
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import "+pkg).CombinedOutput(); err == nil {
		t.Errorf("the host's /usr/bin/python3 imports %s: %s", pkg, out)
	}
	if root {
		if _, err := os.Stat("/usr/bin/" + deb); err == nil {
			t.Errorf("the host got /usr/bin/%s", deb)
		}
		if err := exec.Command("dpkg", "-s", deb).Run(); err == nil {
			t.Errorf("the host's dpkg knows %s", deb)
		}
		if err := exec.Command("id", user).Run(); err == nil {
			t.Errorf("the host has the user %s", user)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		if matches, _ := filepath.Glob(filepath.Join(home, ".local", "lib", "python3*", "site-packages", pkg)); len(matches) > 0 {
			t.Errorf("the host's home got %v", matches)
		}
	}
	// Another sandbox does not see them either.
	other := newSandbox(t, p2, providers.Spec{})
	if r := run(t, p2, other, `python3 -c 'import `+pkg+`' 2>/dev/null && echo leaked; test -e /workspace/venv && echo venv; command -v `+deb+` && echo deb; true`); r.stdout != "" {
		t.Errorf("a fresh sandbox sees the first one's installs: %q", r.stdout)
	}
}
