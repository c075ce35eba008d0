// Package execbg implements what makes a sandbox a machine —
// background commands, their logs, the process list and signals — with
// shell commands run in the sandbox, for providers whose API can run
// commands and read files but has no endpoint for these (Runloop's, for
// one; Daytona's lists processes and sends signals through it too).
//
// Every background command leaves a record in a directory of the
// sandbox's /tmp (Dir), so that the records go when a stop empties /tmp,
// as the commands do:
//
//	<pid>.bg    marks pid as a background command; it holds a token
//	            (Background's own, or the provider's: Daytona names the
//	            session that runs the command)
//	<pid>.log   the command's stdout and stderr, in the order written
//	            (Background's commands only)
//	<pid>.exit  its exit status once it ended (Background's commands only)
//
// Background starts a command under a small shell that stays as its
// parent: it records the command's pid, waits for it and writes its exit
// status, so no provider-side session has to outlive the call.
package execbg

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentbox/sandbox/providers"
)

// DefaultDir is where background commands keep their records.
const DefaultDir = "/tmp/.sandbox-bg"

// Runner runs what the package needs in a sandbox: the provider's own
// Exec (never with Background set) and ReadFile.
type Runner interface {
	Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error)
	ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error)
}

// Machine runs background commands, lists processes, sends signals and
// reads logs through a Runner. It holds no state of its own: everything
// is in the sandbox.
type Machine struct {
	// Provider names the provider in errors.
	Provider string
	Runner   Runner
	// Dir holds the records; empty means DefaultDir.
	Dir string
	// ExitCode, when set, tells the exit status of a background command
	// that ended without an exit file (one the provider started itself),
	// from the token of its record; nil means it is not known.
	ExitCode func(ctx context.Context, id string, pid int, token string) (*int, error)
}

// dir returns the records' directory.
func (m *Machine) dir() string {
	if m.Dir == "" {
		return DefaultDir
	}
	return m.Dir
}

// quote quotes s for a POSIX shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// errorf builds an error of m's provider.
func (m *Machine) errorf(kind error, op, format string, args ...any) error {
	return &providers.Error{Kind: kind, Provider: m.Provider, Op: op, Msg: fmt.Sprintf(format, args...)}
}

// token returns a fresh random name for a log staged before its pid is
// known.
func token() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startScript starts a background command. A command substitution runs
// the keeper, a subshell sent to the background that starts the command
// (at @START@, see startCommand) with its output going to a staged log,
// renames the log after the command's pid, writes the record, prints the
// pid (which ends the substitution: the keeper lets go of its stdout) and
// then waits for the command and writes its exit status. The command's
// output goes to a descriptor opened before it starts, so the rename
// cannot lose any of it. Nothing holds the call's stdout or stderr once
// the pid is printed, so the call returns at once.
const startScript = `mkdir -p "$d" || exit 1
c=$(
  exec 3>"$d/$t.tmp" </dev/null 2>/dev/null
  {
@START@
    c=$!
    rm -f "$d/$c.exit" "$d/$c.bg"
    mv -f "$d/$t.tmp" "$d/$c.log" && echo "$t" >"$d/$c.bg"
    echo "$c"
    exec >/dev/null 3>&-
    wait "$c"; s=$?
    echo "$s" >"$d/$c.exit.tmp" && mv -f "$d/$c.exit.tmp" "$d/$c.exit"
  } &
)
case $c in ''|*[!0-9]*) echo "the background command did not start" >&2; exit 1;; esac
echo "$c"`

// startCommand is the part of startScript that sends command to the
// background: with bash when bash runs the script, else /bin/sh; with
// SIGINT and SIGQUIT given back to it where env can (the shell ignores
// them in what it sends to the background). The command is written out
// in each branch rather than kept in a variable, so that an approval gate
// in front of the sandbox (an emulator's) reads what runs.
func startCommand(command string) string {
	q := quote(command)
	const out = " >&3 2>&3 3>&- &"
	return `    if env --default-signal=INT,QUIT true 2>/dev/null; then
      if [ -n "$BASH" ]; then env --default-signal=INT,QUIT bash -c ` + q + out + `
      else env --default-signal=INT,QUIT sh -c ` + q + out + `
      fi
    elif [ -n "$BASH" ]; then bash -c ` + q + out + `
    else sh -c ` + q + out + `
    fi`
}

// Background starts command, a shell command line, detached and returns
// its pid in ExecResult.PID at once. The command runs with the shell that
// runs the provider's commands when that is bash, else /bin/sh, with
// stdin from /dev/null; its output is kept for Logs.
func (m *Machine) Background(ctx context.Context, id, command string) (providers.ExecResult, error) {
	script := "d=" + quote(m.dir()) + "; t=" + token() + "\n" + strings.Replace(startScript, "@START@", startCommand(command), 1)
	var stdout, stderr bytes.Buffer
	res, err := m.Runner.Exec(ctx, id, providers.ExecRequest{Shell: script, Cwd: "/", Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return providers.ExecResult{}, err
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(stdout.String()))
	if res.ExitCode != 0 || perr != nil || pid <= 0 {
		return providers.ExecResult{}, m.errorf(providers.ErrUnavailable, "exec", "starting the background command exited %d: %s %s",
			res.ExitCode, strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	}
	return providers.ExecResult{PID: pid, Duration: res.Duration}, nil
}

// processScript lists the sandbox's processes from /proc, one line each:
// P, pid, ppid, uid, state, name and command line (its arguments ended by
// the byte 037) separated by tabs; then the background commands' records:
// B, pid, token and exit status (empty while it runs). The script and the
// shell that runs it are left out.
const processScript = `for p in /proc/[0-9]*; do
  case ${p#/proc/} in $$|$PPID) continue;; esac
  s=$(cat "$p/stat" 2>/dev/null) || continue
  n=${s#*\(}; n=${n%\)*}
  set -- ${s##*\) }
  u=$(while read -r k v _; do [ "$k" = Uid: ] && echo "$v" && break; done < "$p/status" 2>/dev/null)
  c=$(tr '\0' '\037' < "$p/cmdline" 2>/dev/null)
  printf 'P\t%s\t%s\t%s\t%s\t%s\t%s\n' "${p#/proc/}" "$2" "$u" "$1" "$n" "$c"
done
for f in "$d"/*.bg; do
  [ -e "$f" ] || continue
  b=${f##*/}; b=${b%.bg}
  e=$(cat "$d/$b.exit" 2>/dev/null)
  printf 'B\t%s\t%s\t%s\n' "$b" "$(cat "$f")" "$e"
done`

// Processes lists what runs in the sandbox: its processes, read from
// /proc, with the background commands marked, and the background commands
// that ended with their exit status. The caller checks first that the
// sandbox runs (a stopped one runs nothing).
func (m *Machine) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	var out, stderr bytes.Buffer
	script := "d=" + quote(m.dir()) + "\n" + processScript
	res, err := m.Runner.Exec(ctx, id, providers.ExecRequest{Shell: script, Stdout: &out, Stderr: &stderr, Cwd: "/"})
	if err == nil && res.ExitCode != 0 {
		err = m.errorf(providers.ErrUnavailable, "processes", "listing the processes exited %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return nil, err
	}
	procs, records := parseProcesses(out.Bytes())
	index := make(map[int]int, len(procs))
	for i, p := range procs {
		index[p.PID] = i
	}
	for _, r := range records {
		if i, ok := index[r.pid]; ok && r.exit == nil {
			procs[i].Background = true
			continue
		}
		code := r.exit
		if code == nil && m.ExitCode != nil {
			if code, err = m.ExitCode(ctx, id, r.pid, r.token); err != nil {
				continue
			}
		}
		if code == nil {
			// Ended without a status (a stop, or it is being written).
			continue
		}
		if i, ok := index[r.pid]; ok && procs[i].State != "Z" {
			// The pid belongs to another process by now.
			continue
		}
		procs = append(procs, providers.Process{PID: r.pid, Background: true, State: "exited", ExitCode: code})
	}
	return procs, nil
}

// record is one background command's record.
type record struct {
	pid   int
	token string
	exit  *int
}

// parseProcesses reads processScript's output.
func parseProcesses(b []byte) ([]providers.Process, []record) {
	procs := []providers.Process{}
	var records []record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch {
		case len(f) == 7 && f[0] == "P":
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				continue
			}
			ppid, _ := strconv.Atoi(f[2])
			uid, _ := strconv.Atoi(f[3])
			var argv []string
			if f[6] != "" {
				argv = strings.Split(strings.TrimSuffix(f[6], "\x1f"), "\x1f")
			}
			procs = append(procs, providers.Process{PID: pid, PPID: ppid, UID: uid, State: f[4], Name: f[5], Argv: argv})
		case len(f) == 4 && f[0] == "B":
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				continue
			}
			r := record{pid: pid, token: f[2]}
			if code, err := strconv.Atoi(f[3]); err == nil {
				r.exit = &code
			}
			records = append(records, r)
		}
	}
	return procs, records
}

// Signal sends sig to process pid with kill; a process that does not run
// matches ErrNotFound. The caller checks first that the sandbox runs.
func (m *Machine) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return m.errorf(providers.ErrInvalid, fmt.Sprintf("signal %d", pid), "%d is not a process id", pid)
	}
	var stderr bytes.Buffer
	res, err := m.Runner.Exec(ctx, id, providers.ExecRequest{Argv: []string{"kill", "-" + strconv.Itoa(int(sig)), strconv.Itoa(pid)}, Stderr: &stderr, Cwd: "/"})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return m.errorf(providers.ErrNotFound, fmt.Sprintf("signal %d", pid), "no such process: %s", strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Token returns the token of background command pid's record; a pid
// without one matches ErrNotFound.
func (m *Machine) Token(ctx context.Context, id string, pid int) (string, error) {
	b, err := m.readSmall(ctx, id, fmt.Sprintf("%s/%d.bg", m.dir(), pid))
	if errors.Is(err, providers.ErrNotFound) {
		return "", m.errorf(providers.ErrNotFound, fmt.Sprintf("logs %d", pid), "no background command %d", pid)
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readSmall reads a small file of the sandbox.
func (m *Machine) readSmall(ctx context.Context, id, file string) ([]byte, error) {
	rc, err := m.Runner.ReadFile(ctx, id, file)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 4096))
}

// exitStatus reads the exit file of pid: nil while the command runs.
func (m *Machine) exitStatus(ctx context.Context, id string, pid int) (*int, error) {
	b, err := m.readSmall(ctx, id, fmt.Sprintf("%s/%d.exit", m.dir(), pid))
	if errors.Is(err, providers.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, m.errorf(providers.ErrUnavailable, fmt.Sprintf("logs %d", pid), "the exit file holds %q", b)
	}
	return &code, nil
}

// followScript prints the log of background command $p from its start
// and follows it until the command ended and its status was written, then
// prints the status on stderr. tail follows while the process lives;
// without GNU tail's --pid the log is printed once the command ended.
const followScript = `l="$d/$p.log"; e="$d/$p.exit"
[ -e "$l" ] || exit 73
if [ ! -e "$e" ] && tail --pid=1 -s 0.1 -n 0 /dev/null >/dev/null 2>&1; then
  tail -c +1 -s 0.1 --pid="$p" -f "$l" || exit 1
  while [ ! -e "$e" ]; do [ -e "$l" ] || exit 73; sleep 0.1; done
else
  while [ ! -e "$e" ]; do [ -e "$l" ] || exit 73; sleep 0.1; done
  cat "$l" || exit 1
fi
cat "$e" >&2`

// Logs copies the output of background command pid into w (stdout and
// stderr in the order they came) and returns its exit status once it has
// ended (nil while it runs). With follow it streams the output until the
// command ends; the stream is a command's output, which some providers'
// APIs carry as text only. Without it the log is read as a file, byte for
// byte. An unknown pid matches ErrNotFound.
func (m *Machine) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	op := fmt.Sprintf("logs %d", pid)
	if pid <= 0 {
		return nil, m.errorf(providers.ErrNotFound, op, "no background command %d", pid)
	}
	if follow {
		return m.follow(ctx, id, pid, w)
	}
	// The status is read first: once it is there, the log is complete.
	code, err := m.exitStatus(ctx, id, pid)
	if err != nil {
		return nil, err
	}
	rc, err := m.Runner.ReadFile(ctx, id, fmt.Sprintf("%s/%d.log", m.dir(), pid))
	if errors.Is(err, providers.ErrNotFound) {
		return nil, m.errorf(providers.ErrNotFound, op, "no background command %d", pid)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", m.Provider, op, err)
	}
	return code, nil
}

// follow streams the log of pid until the command ends.
func (m *Machine) follow(ctx context.Context, id string, pid int, w io.Writer) (*int, error) {
	op := fmt.Sprintf("logs %d", pid)
	var stderr bytes.Buffer
	script := "d=" + quote(m.dir()) + "; p=" + strconv.Itoa(pid) + "\n" + followScript
	res, err := m.Runner.Exec(ctx, id, providers.ExecRequest{Shell: script, Stdout: w, Stderr: &stderr, Cwd: "/"})
	if err != nil {
		return nil, err
	}
	switch res.ExitCode {
	case 0:
	case 73:
		return nil, m.errorf(providers.ErrNotFound, op, "no background command %d", pid)
	default:
		return nil, m.errorf(providers.ErrUnavailable, op, "following the log exited %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	code, err := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
	if err != nil {
		return nil, m.errorf(providers.ErrUnavailable, op, "no exit status after the log: %q", stderr.String())
	}
	return &code, nil
}
