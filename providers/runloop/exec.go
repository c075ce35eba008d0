package runloop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/httpapi"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// lastN asks execution replies for all of their output (it counts lines).
const lastN = "1000000000"

// Exec runs a command, streaming its output over SSE as it is produced
// while the execution long poll waits for its exit status (a command that
// has ended by the time execute answers costs that one request). At
// req.Timeout (or when ctx ends) the execution is killed with its process
// group. A suspended devbox is resumed first; a background command is
// started as machine.go says.
func (p *Provider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	return p.exec(ctx, id, req, req.Stdout == nil && req.Stderr == nil)
}

// exec runs a command. A batch command, whose output nobody watches as it
// comes, is given the optimistic wait: one that ends within it costs one
// request.
func (p *Provider) exec(ctx context.Context, id string, req providers.ExecRequest, batch bool) (providers.ExecResult, error) {
	switch {
	case req.Network == providers.NetworkOff:
		return providers.ExecResult{}, errorf(providers.ErrUnsupported, "exec", "Runloop devboxes have no switch for the network")
	case req.Background:
		return p.background(ctx, id, req)
	}
	command, err := commandLine(req)
	if err != nil {
		return providers.ExecResult{}, err
	}
	if req.Stdin != nil {
		return p.execWithStdin(ctx, id, req, command)
	}
	start := time.Now()
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	stdout, stderr := orDiscard(req.Stdout), orDiscard(req.Stderr)

	wait := 0
	if batch {
		wait = p.opts.OptimisticSeconds
	}
	if req.Timeout > 0 {
		wait = min(wait, max(int(req.Timeout/time.Second), 0))
	}
	var ex wire.Execution
	for attempt := 0; ; attempt++ {
		err = p.call(runCtx, "exec", http.MethodPost, p.url(id, "execute")+"?last_n="+lastN,
			wire.Execute{Command: command, CommandID: newUUIDv7(), OptimisticTimeout: &wait}, &ex, true)
		if err == nil || attempt > 0 || !p.resumeIfSuspended(runCtx, id, err) {
			break
		}
	}
	if err != nil {
		return providers.ExecResult{}, p.execEnded(ctx, runCtx, id, "", err)
	}
	if ex.Status == wire.ExecCompleted && !ex.StdoutTruncated && !ex.StderrTruncated {
		if _, err := io.WriteString(stdout, ex.Stdout); err != nil {
			return providers.ExecResult{}, fmt.Errorf("exec: writing stdout: %w", err)
		}
		if _, err := io.WriteString(stderr, ex.Stderr); err != nil {
			return providers.ExecResult{}, fmt.Errorf("exec: writing stderr: %w", err)
		}
		return result(ex, start)
	}

	// Stream both outputs while the long poll waits for the end.
	streamCtx, stopStreams := context.WithCancel(runCtx)
	defer stopStreams()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	eid := ex.ExecutionID
	for i, s := range []struct {
		name string
		w    io.Writer
	}{{"stdout", stdout}, {"stderr", stderr}} {
		wg.Go(func() { errs[i] = p.follow(streamCtx, id, eid, s.name, s.w) })
	}
	if ex.Status != wire.ExecCompleted {
		ex, err = p.awaitExecution(runCtx, id, eid)
	}
	if err != nil {
		stopStreams()
		wg.Wait()
		return providers.ExecResult{}, p.execEnded(ctx, runCtx, id, eid, err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return providers.ExecResult{}, p.execEnded(ctx, runCtx, id, ex.ExecutionID, err)
	}
	return result(ex, start)
}

// execEnded turns the failure of a command's call into the error Exec
// returns: a passed timeout (or an ended ctx) kills the execution.
func (p *Provider) execEnded(ctx, runCtx context.Context, id, eid string, err error) error {
	if runCtx.Err() == nil {
		return err
	}
	if eid != "" {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = p.call(kctx, "exec: kill", http.MethodPost, p.url(id, "executions", eid, "kill"), wire.Kill{KillProcessGroup: true}, nil, true)
		cancel()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errorf(providers.ErrTimeout, "exec", "the command did not end within its timeout")
}

// result builds the ExecResult of a completed execution.
func result(ex wire.Execution, start time.Time) (providers.ExecResult, error) {
	if ex.ExitStatus == nil {
		return providers.ExecResult{}, errorf(providers.ErrUnavailable, "exec", "execution %s completed without an exit status", ex.ExecutionID)
	}
	return providers.ExecResult{ExitCode: *ex.ExitStatus, Duration: time.Since(start)}, nil
}

// awaitExecution long-polls an execution until it is completed, asking
// again on every 408.
func (p *Provider) awaitExecution(ctx context.Context, id, eid string) (wire.Execution, error) {
	for {
		var ex wire.Execution
		err := p.call(ctx, "exec: wait", http.MethodPost, p.url(id, "executions", eid, "wait_for_status")+"?last_n=1",
			wire.WaitForStatus{Statuses: []string{wire.ExecCompleted}}, &ex, true)
		if errors.Is(err, providers.ErrTimeout) && ctx.Err() == nil {
			continue
		}
		if err != nil || ex.Status == wire.ExecCompleted {
			return ex, err
		}
	}
}

// follow copies one output stream of an execution to w. A stream that is
// cut is opened again from the byte offset reached, so nothing is lost or
// doubled; consecutive failures without progress are bounded by the retry
// policy.
func (p *Provider) follow(ctx context.Context, id, eid, name string, w io.Writer) error {
	var offset int64
	failures := 0
	for {
		got, err := p.followOnce(ctx, id, eid, name, offset, w)
		offset += got
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var werr *writeError
		if errors.As(err, &werr) {
			return werr.err
		}
		if got > 0 {
			failures = 0
		}
		failures++
		if failures >= p.opts.Retry.Attempts {
			return httpapi.AddNote(err, failures)
		}
		if err := httpapi.Sleep(ctx, httpapi.Backoff(p.opts.Retry, failures)); err != nil {
			return err
		}
	}
}

// writeError is a failure of the caller's writer, which ends a stream for
// good.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// followOnce reads one SSE connection from offset and returns how many
// bytes of output it delivered. A stream that ends normally returns nil.
func (p *Provider) followOnce(ctx context.Context, id, eid, name string, offset int64, w io.Writer) (int64, error) {
	op := "exec: stream " + name
	u := p.url(id, "executions", eid, "stream_"+name+"_updates") + "?offset=" + strconv.FormatInt(offset, 10)
	h := p.headers(http.MethodGet)
	h.Set("Accept", "text/event-stream")
	resp, err := p.transport().Do(ctx, &httpapi.Request{Op: op, Method: http.MethodGet, URL: u, Header: h, Idempotent: true})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var got int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	event, data := "", []byte(nil)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				if event == "error" {
					return got, errorf(providers.ErrUnavailable, op, "the stream reported an error: %s", data)
				}
				var c wire.Chunk
				if err := json.Unmarshal(data, &c); err != nil {
					return got, errorf(providers.ErrUnavailable, op, "bad event %q: %v", data, err)
				}
				if _, err := io.WriteString(w, c.Output); err != nil {
					return got, &writeError{fmt.Errorf("%s: writing output: %w", op, err)}
				}
				got += int64(len(c.Output))
			}
			event, data = "", data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		}
	}
	if err := sc.Err(); err != nil {
		return got, errorf(providers.ErrUnavailable, op, "stream cut after %d bytes: %v", got, err)
	}
	return got, nil
}

// execWithStdin runs a command that has stdin. Runloop's commands have no
// stdin stream that ends, so stdin is read to its end into a file the
// command reads; and as what feeds a command is often binary, which the
// API's JSON strings cannot carry, its stdout and stderr go to files that
// are downloaded, byte for byte, once it ended.
func (p *Provider) execWithStdin(ctx context.Context, id string, req providers.ExecRequest, command string) (providers.ExecResult, error) {
	prefix, err := p.stageStdin(ctx, id, req.Stdin)
	if err != nil {
		return providers.ExecResult{}, err
	}
	base := "/tmp/.sandbox-out-" + newUUIDv7()
	files := [2]string{base + ".stdout", base + ".stderr"}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = p.Exec(cctx, id, providers.ExecRequest{Shell: "rm -f " + files[0] + " " + files[1], Cwd: "/"})
	}()
	// What the wrapper itself says before its output goes to the files
	// (it could not make them, or the command was refused before it
	// ran) is the command's stderr when the files are not there.
	var early strings.Builder
	inner := req
	inner.Stdin, inner.Stdout, inner.Stderr = nil, nil, &early
	inner.Shell, inner.Argv = "exec >"+files[0]+" 2>"+files[1]+"; "+prefix+command, nil
	inner.Cwd, inner.Env = "/", nil
	res, err := p.exec(ctx, id, inner, true)
	if err != nil {
		return res, err
	}
	for i, w := range []io.Writer{orDiscard(req.Stdout), orDiscard(req.Stderr)} {
		err := p.get(ctx, id, files[i], w)
		if errors.Is(err, providers.ErrNotFound) && i == 0 && res.ExitCode != 0 {
			if _, werr := io.WriteString(orDiscard(req.Stderr), early.String()); werr != nil {
				return providers.ExecResult{}, fmt.Errorf("runloop: exec: writing stderr: %w", werr)
			}
			return res, nil
		}
		if err != nil {
			return providers.ExecResult{}, fmt.Errorf("runloop: exec: reading the command's output: %w", err)
		}
	}
	return res, nil
}

// stageStdin uploads what r holds to a file of the devbox and returns the
// shell prefix that makes it the command's stdin; an empty r is /dev/null.
func (p *Provider) stageStdin(ctx context.Context, id string, r io.Reader) (string, error) {
	br := bufio.NewReader(r)
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		return "exec </dev/null; ", nil
	} else if err != nil {
		return "", fmt.Errorf("runloop: exec: reading stdin: %w", err)
	}
	file := "/tmp/.sandbox-stdin-" + newUUIDv7()
	if err := p.put(ctx, id, file, br); err != nil {
		return "", fmt.Errorf("runloop: exec: uploading stdin: %w", err)
	}
	return "exec <" + file + " || exit 1; rm -f " + file + "; ", nil
}

// commandLine builds the shell command Runloop runs: the working
// directory, the environment and the command, every value quoted.
func commandLine(req providers.ExecRequest) (string, error) {
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return "", errorf(providers.ErrInvalid, "exec", "exactly one of argv and a shell string must be given")
	}
	if req.User != "" && req.User != "root" {
		return "", errorf(providers.ErrUnsupported, "exec", "running as another user (%s) is not supported by this client", req.User)
	}
	var b strings.Builder
	if req.Cwd != "" {
		b.WriteString("cd " + providers.QuoteShell([]string{req.Cwd}) + " || exit 1; ")
	} else {
		// Create made the default directory; a devbox whose user
		// could not stays in its home.
		b.WriteString("cd " + providers.DefaultWorkdir + " 2>/dev/null; ")
	}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		if !shellName(k) {
			return "", errorf(providers.ErrInvalid, "exec", "environment name %q is not a shell variable name", k)
		}
		b.WriteString("export " + k + "=" + providers.QuoteShell([]string{req.Env[k]}) + "; ")
	}
	if len(req.Argv) > 0 {
		b.WriteString("exec " + providers.QuoteShell(req.Argv))
	} else {
		b.WriteString(req.Shell)
	}
	return b.String(), nil
}

// shellName reports whether s is a POSIX shell variable name.
func shellName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// orDiscard returns w, or io.Discard when it is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// execScript runs a script for package execfs.
func (p *Provider) execScript(ctx context.Context, id, script string, stdout, stderr io.Writer) (int, error) {
	res, err := p.exec(ctx, id, providers.ExecRequest{Shell: script, Stdout: stdout, Stderr: stderr}, true)
	return res.ExitCode, err
}
