package fake

import (
	"fmt"
	"maps"
	"path"
	"strings"

	"github.com/agentbox/sandbox/providers"
)

// session is the state a named session keeps between commands.
type session struct {
	cwd string
	env map[string]string
}

// KeepsSessions reports that the fake keeps ExecRequest.Session itself:
// it has no real shell to run providers.SessionCommand's script.
func (p *Provider) KeepsSessions() bool { return true }

var _ providers.SessionKeeper = (*Provider)(nil)

// restoreSession starts r from the state of a session: its environment
// replaces the sandbox's, and its directory is used unless explicitCwd or
// it no longer exists. A session seen for the first time keeps r as it is.
func (p *Provider) restoreSession(id, name string, explicitCwd bool, r *run) error {
	if name == "" {
		return nil
	}
	if err := providers.ValidSessionName(name); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "exec")
	if err != nil {
		return err
	}
	s := b.sessions[name]
	if s == nil {
		return nil
	}
	r.env = maps.Clone(s.env)
	if e, ok := b.files[s.cwd]; ok && e.mode.IsDir() && !explicitCwd {
		r.cwd = s.cwd
	}
	return nil
}

// saveSession records the directory and environment r ended with.
func (p *Provider) saveSession(id, name string, r *run) {
	if name == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "exec")
	if err != nil {
		return
	}
	if b.sessions == nil {
		b.sessions = map[string]*session{}
	}
	b.sessions[name] = &session{cwd: r.cwd, env: maps.Clone(r.env)}
}

// cd changes the working directory of the rest of the command.
func (r *run) cd(args []string) (int, bool, error) {
	if len(args) != 1 {
		fmt.Fprintln(r.stderr, "cd: usage: cd DIR")
		return 2, false, nil
	}
	dir := args[0]
	if !strings.HasPrefix(dir, "/") {
		dir = path.Join(r.cwd, dir)
	}
	dir, err := cleanPath(dir)
	if err == nil {
		r.p.mu.Lock()
		var b *box
		if b, err = r.p.box(r.id, "exec"); err == nil {
			if e, ok := b.files[dir]; !ok || !e.mode.IsDir() {
				err = fmt.Errorf("can't cd to %s", args[0])
			}
		}
		r.p.mu.Unlock()
	}
	if err != nil {
		fmt.Fprintf(r.stderr, "fake: cd: %v\n", err)
		return 2, false, nil
	}
	r.cwd = dir
	return 0, false, nil
}

// export sets variables (NAME=VALUE) for the rest of the command; a bare
// NAME is already exported or not set.
func (r *run) export(args []string) (int, bool, error) {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if k == "" || strings.ContainsAny(k, " \t") {
			fmt.Fprintf(r.stderr, "fake: export: %s: bad variable name\n", a)
			return 2, false, nil
		}
		if ok {
			r.env[k] = v
		}
	}
	return 0, false, nil
}

// unset removes variables for the rest of the command.
func (r *run) unset(args []string) (int, bool, error) {
	for _, k := range args {
		delete(r.env, k)
	}
	return 0, false, nil
}
