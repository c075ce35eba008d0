package daytona

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
)

// A Daytona sandbox is a machine: Stop and Start (control.go) stop and
// start it, and the toolbox's sessions run background commands. A
// background command runs in a session of its own, which is kept: a small
// wrapper records its pid in bgDir (<session>.pid, and <pid>.sid naming
// the session back) before it becomes the command, so that Logs finds the
// session of a pid and Processes tells background commands apart.

// bgDir holds the pid files of background commands; it is in /tmp, which
// a stop empties, as the commands end.
const bgDir = "/tmp/.sandbox-bg"

var _ providers.Machine = (*Provider)(nil)

// background starts req detached and returns its pid.
func (p *Provider) background(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	session := "sandbox-bg-" + randomHex(8)
	record := fmt.Sprintf(`d=%s; mkdir -p "$d" && echo %s > "$d/$$.sid" && echo $$ > "$d/%s.pid.tmp" && mv "$d/%s.pid.tmp" "$d/%s.pid"; `,
		bgDir, session, session, session, session)
	command, err := shellCommand(req, "/dev/null", record)
	if err != nil {
		return providers.ExecResult{}, err
	}
	sessURL := base + "/process/session/" + url.PathEscape(session)
	if err := p.call(ctx, "exec: create session", http.MethodPost, base+"/process/session", wire.CreateSession{SessionID: session}, nil, false); err != nil {
		return providers.ExecResult{}, err
	}
	var started wire.SessionExecuteResponse
	if err := p.call(ctx, "exec", http.MethodPost, sessURL+"/exec", wire.SessionExecuteRequest{Command: command, RunAsync: true}, &started, false); err != nil {
		return providers.ExecResult{}, err
	}
	// The wrapper writes the pid file as its first act.
	pidFile := bgDir + "/" + session + ".pid"
	delay := 10 * time.Millisecond
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, err := p.readSmall(ctx, id, pidFile)
		if err == nil {
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if perr != nil || pid <= 0 {
				return providers.ExecResult{}, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the background command's pid file holds %q", b)
			}
			return providers.ExecResult{PID: pid}, nil
		}
		if !errors.Is(err, providers.ErrNotFound) {
			return providers.ExecResult{}, err
		}
		if time.Now().After(deadline) {
			return providers.ExecResult{}, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the background command did not start within 30s")
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return providers.ExecResult{}, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// readSmall reads a small file of the sandbox.
func (p *Provider) readSmall(ctx context.Context, id, file string) ([]byte, error) {
	rc, err := p.ReadFile(ctx, id, file)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 4096))
}

// started reports whether the sandbox runs, without starting it.
func (p *Provider) started(ctx context.Context, id string) (bool, error) {
	sb, err := p.detail(ctx, id)
	if err != nil {
		return false, err
	}
	return sb.State == wire.StateStarted, nil
}

// processScript lists the sandbox's processes from /proc, one line each:
// P, pid, ppid, uid, state, name and command line (its arguments ended by
// the byte 037) separated by tabs; then the background commands' pid
// files: B, pid, session. The script and the shell that runs it are left
// out.
const processScript = `for d in /proc/[0-9]*; do
  case ${d#/proc/} in $$|$PPID) continue;; esac
  s=$(cat "$d/stat" 2>/dev/null) || continue
  n=${s#*\(}; n=${n%\)*}
  set -- ${s##*\) }
  u=$(while read -r k v _; do [ "$k" = Uid: ] && echo "$v" && break; done < "$d/status" 2>/dev/null)
  c=$(tr '\0' '\037' < "$d/cmdline" 2>/dev/null)
  printf 'P\t%s\t%s\t%s\t%s\t%s\t%s\n' "${d#/proc/}" "$2" "$u" "$1" "$n" "$c"
done
for f in ` + bgDir + `/*.sid; do
  [ -e "$f" ] || continue
  b=${f##*/}
  printf 'B\t%s\t%s\n' "${b%.sid}" "$(cat "$f")"
done`

// Processes lists what runs in the sandbox: its processes, read from
// /proc, with the background commands marked, and the background commands
// that ended with their exit status. A stopped sandbox runs nothing.
func (p *Provider) Processes(ctx context.Context, id string) ([]providers.Process, error) {
	if ok, err := p.started(ctx, id); err != nil || !ok {
		return []providers.Process{}, err
	}
	var out bytes.Buffer
	res, err := p.Exec(ctx, id, providers.ExecRequest{Shell: processScript, Stdout: &out, Cwd: "/"})
	if err == nil && res.ExitCode != 0 {
		err = providers.Errorf(providers.ErrUnavailable, Name, "processes", "listing the processes exited %d", res.ExitCode)
	}
	if err != nil {
		return nil, err
	}
	procs := []providers.Process{}
	index := map[int]int{}
	sessions := map[int]string{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch {
		case len(f) == 7 && f[0] == "P":
			pid, _ := strconv.Atoi(f[1])
			ppid, _ := strconv.Atoi(f[2])
			uid, _ := strconv.Atoi(f[3])
			index[pid] = len(procs)
			argv := strings.Split(strings.TrimSuffix(f[6], "\x1f"), "\x1f")
			if f[6] == "" {
				argv = nil
			}
			procs = append(procs, providers.Process{PID: pid, PPID: ppid, UID: uid, State: f[4], Name: f[5], Argv: argv})
		case len(f) == 3 && f[0] == "B":
			pid, _ := strconv.Atoi(f[1])
			sessions[pid] = f[2]
		}
	}
	for pid, session := range sessions {
		if i, ok := index[pid]; ok {
			procs[i].Background = true
			continue
		}
		cmd, err := p.bgCommand(ctx, id, session)
		if err != nil || cmd.ExitCode == nil {
			continue
		}
		procs = append(procs, providers.Process{PID: pid, Background: true, State: "exited", ExitCode: cmd.ExitCode})
	}
	return procs, nil
}

// bgCommand describes the command of a background session.
func (p *Provider) bgCommand(ctx context.Context, id, session string) (wire.Command, error) {
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return wire.Command{}, err
	}
	var s wire.Session
	if err := p.call(ctx, "logs: session", http.MethodGet, base+"/process/session/"+url.PathEscape(session), nil, &s, true); err != nil {
		return wire.Command{}, err
	}
	if len(s.Commands) == 0 {
		return wire.Command{}, providers.Errorf(providers.ErrNotFound, Name, "logs", "session %s has no command", session)
	}
	c := s.Commands[len(s.Commands)-1]
	return c, nil
}

// Signal sends sig to a process of the sandbox with kill; a process that
// does not run (or a stopped sandbox) matches ErrNotFound.
func (p *Provider) Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error {
	op := fmt.Sprintf("signal %d", pid)
	if ok, err := p.started(ctx, id); err != nil {
		return err
	} else if !ok {
		return providers.Errorf(providers.ErrNotFound, Name, op, "the sandbox is stopped: no process %d", pid)
	}
	var stderr bytes.Buffer
	res, err := p.Exec(ctx, id, providers.ExecRequest{Argv: []string{"kill", "-" + strconv.Itoa(int(sig)), strconv.Itoa(pid)}, Stderr: &stderr, Cwd: "/"})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return providers.Errorf(providers.ErrNotFound, Name, op, "no such process: %s", strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Logs copies the output of background command pid into w (stdout and
// stderr in the order they came), following it until it ends when follow
// is set, and returns its exit status once it has ended.
func (p *Provider) Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error) {
	b, err := p.readSmall(ctx, id, fmt.Sprintf("%s/%d.sid", bgDir, pid))
	if errors.Is(err, providers.ErrNotFound) {
		return nil, providers.Errorf(providers.ErrNotFound, Name, fmt.Sprintf("logs %d", pid), "no background command %d", pid)
	}
	if err != nil {
		return nil, err
	}
	session := strings.TrimSpace(string(b))
	cmd, err := p.bgCommand(ctx, id, session)
	if err != nil {
		return nil, err
	}
	base, err := p.toolboxBase(ctx, id)
	if err != nil {
		return nil, err
	}
	cmdURL := base + "/process/session/" + url.PathEscape(session) + "/command/" + url.PathEscape(cmd.ID)
	if follow {
		if err := p.followLogs(ctx, cmdURL, w, w); err != nil {
			return nil, err
		}
		code, err := p.exitCode(ctx, cmdURL)
		if err != nil {
			return nil, err
		}
		return &code, nil
	}
	var logs wire.SessionLogs
	if err := p.call(ctx, fmt.Sprintf("logs %d", pid), http.MethodGet, cmdURL+"/logs", nil, &logs, true); err != nil {
		return nil, err
	}
	d := &wire.Demuxer{Stdout: w, Stderr: w}
	if _, err := d.Write([]byte(logs.Output)); err != nil {
		return nil, err
	}
	if err := d.Flush(); err != nil {
		return nil, err
	}
	// The status read before the output may predate the command's end.
	return cmd.ExitCode, nil
}
