//go:build linux

package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// peerProbe connects to a Unix socket and prints what the server says
// before it closes the connection ("closed: …"), or "open" when it keeps
// the connection waiting for a request for two seconds.
const peerProbe = `use IO::Socket::UNIX;
my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!\n";
my ($all, $r) = ("", "");
while (1) {
	vec($r = "", fileno($s), 1) = 1;
	if (select($r, undef, undef, 2) <= 0) { print "open\n"; exit }
	my $n = sysread($s, my $x, 4096);
	if (!$n) { print "closed: $all"; exit }
	$all .= $x;
}`

// TestMachineRefusesOtherUsers: the machine's control socket serves only
// the user who runs the sandbox. With the path opened to everyone (as a
// careless host might), another user's connection is closed at once,
// while the owner's is served.
func TestMachineRefusesOtherUsers(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "true")
	sock := filepath.Join(p.dir, id, machineSockName())
	// The path itself is the user's alone.
	for _, d := range []string{p.dir, filepath.Dir(sock)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, mode %v; want it closed to others", d, err, fi.Mode().Perm())
		}
	}
	if os.Getuid() != 0 {
		// Another user cannot be played without root: the owner is
		// served, and the peer check itself runs in the root run.
		probe := exec.Command("/usr/bin/perl", "-e", peerProbe, filepath.Base(sock))
		probe.Dir = filepath.Dir(sock) // a socket's address holds 108 bytes
		if out, err := probe.CombinedOutput(); err != nil || string(out) != "open\n" {
			t.Errorf("owner: %q (%v), want open", out, err)
		}
		return
	}
	// Every directory down to the socket becomes searchable by others.
	for d := filepath.Dir(sock); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		as   []string
		want string
	}{
		{"owner", nil, "open\n"},
		{"nobody", []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}, "closed: "},
		{"other uid, root's group", []string{"setpriv", "--reuid=4321", "--regid=0", "--clear-groups"}, "closed: "},
	}
	for _, tt := range tests {
		argv := append(append([]string{}, tt.as...), "/usr/bin/perl", "-e", peerProbe, filepath.Base(sock))
		probe := exec.Command(argv[0], argv[1:]...)
		probe.Dir = filepath.Dir(sock) // a socket's address holds 108 bytes
		out, err := probe.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), tt.want) || (tt.as != nil && !strings.Contains(string(out), "refusing a client of uid")) {
			t.Errorf("%s: %q (%v), want %q", tt.name, strings.TrimSpace(string(out)), err, tt.want)
		}
	}
	if got := mustRun(t, p, id, "echo still"); got != "still\n" {
		t.Errorf("the machine after the refused clients: %q", got)
	}
}
