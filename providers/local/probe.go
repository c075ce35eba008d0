package local

import (
	"os"
	"strings"
)

// apparmorUserns is Ubuntu's switch (23.10 and later) that lets
// unprivileged processes create user namespaces but without any capability
// in them, unless an AppArmor profile allows the binary: the namespaces come
// up and the first mount fails. It cannot be seen in advance, so Create
// tries one command when it is on.
const apparmorUserns = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"

// needsProbe tells whether Create must try a command before it reports the
// sandbox created.
func needsProbe(uid int, weak bool, sysctl string) bool {
	if uid == 0 || weak {
		return false
	}
	b, err := os.ReadFile(sysctl)
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// probe runs `true` in the new sandbox in dir, so that a host that refuses
// the sandbox fails Create (exit 125, with the fix) rather than every
// command afterwards.
func (p *Provider) probe(dir, id string) error {
	cfg := &initConfig{Mode: modeExec, Argv: []string{"true"}, Cwd: "/", Env: commandEnv(p.home)}
	pr, err := p.launch(dir, id, cfg, false, initStdio{})
	if err != nil {
		return err
	}
	pr.closeCtl(false)
	last, got := pr.finish()
	switch {
	case got && last.Exit != nil:
		return nil
	case got && last.Setup:
		return setupErr(id, last)
	}
	return pr.initDied()
}
