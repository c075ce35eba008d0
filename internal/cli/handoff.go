package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
)

// handedOverEnv is set in the environment of a program this one handed its
// run to, naming it: a program that finds its own name there does not
// hand over again (it would loop).
const handedOverEnv = "SANDBOX_HANDED_OVER"

// ExecProgram replaces this process with program, given args: the program
// of that name beside this one's executable, else on PATH. It is the
// program's Deps.Handoff; it returns only when it could not.
func ExecProgram(program string, args []string) error {
	if os.Getenv(handedOverEnv) == program {
		return fmt.Errorf("%s handed the run back", program)
	}
	path := Beside(program)
	if path == "" {
		p, err := exec.LookPath(program)
		if err != nil {
			return errors.New("not found beside this program nor on PATH")
		}
		path = p
	}
	env := append(os.Environ(), handedOverEnv+"="+program)
	if err := syscall.Exec(path, append([]string{program}, args...), env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// Beside is the path of the program of that name in the directory of this
// one's executable, where a release installs its programs side by side;
// "" when there is no such executable file.
func Beside(program string) string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), program)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return ""
	}
	return p
}

// handOver resolves the provider a run uses (named, else id's, else the
// default) and hands the run to the program that has it built in when
// this one has not (engine.HandOver), before the verb has read any input
// or taken the terminal: what it consumed would be gone for that program.
// It returns the provider's name.
func (a *App) handOver(eng *engine.Engine, name, id string) (string, error) {
	provider, err := eng.ResolveProvider(name, id)
	if err != nil {
		return "", err
	}
	return provider, eng.HandOver(provider)
}

// handOverTUI hands bare `sandbox` on a terminal to the program that has
// the interactive mode built in (see package interactive), before
// anything read input or took the terminal; it returns only when it
// could not, with an UnavailableError (exit 125, as for a provider that
// lives in that program).
func (a *App) handOverTUI() error {
	msg := engine.HandOverTo("the interactive mode (bare sandbox on a terminal)", providers.CloudProgram, a.handoff())
	return &engine.UnavailableError{Err: errors.New(msg)}
}

// handoff is Deps.Handoff given this run's arguments (engine.Options.Handoff);
// nil when the program cannot hand over.
func (a *App) handoff() func(program string) error {
	if a.deps.Handoff == nil {
		return nil
	}
	return func(program string) error { return a.deps.Handoff(program, a.args) }
}
