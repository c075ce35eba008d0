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
// could not.
func (a *App) handOverTUI() error {
	program := providers.CloudProgram
	msg := "the interactive mode (bare sandbox on a terminal) is built into the program " + program + ", not this one"
	if a.deps.Handoff == nil {
		return &tuiUnavailableError{Msg: msg + ": run the same command with " + program}
	}
	err := a.deps.Handoff(program, a.args)
	if err == nil {
		err = errors.New("it did not start")
	}
	return &tuiUnavailableError{Msg: fmt.Sprintf("%s, which could not be started (%v): install %s beside this program or on PATH (go install github.com/agentbox/sandbox/cmd/%s); every verb (exec, read, write, ...) works without it", msg, err, program, program)}
}

// tuiUnavailableError says that this program has no interactive mode and
// could not hand the run to the one that has: the run exits 125
// (ExitSandbox), as one whose provider lives in that program does.
type tuiUnavailableError struct{ Msg string }

func (e *tuiUnavailableError) Error() string { return e.Msg }
