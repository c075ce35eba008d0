package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// command is one parsed command of an Exec request.
type command struct {
	words []string
	// redirect is the file that receives stdout, when set.
	redirect string
	appendTo bool
	// syntaxErr reports shell syntax the fake does not support.
	syntaxErr string
}

// run is the state of one Exec.
type run struct {
	p       *Provider
	id      string
	ctx     context.Context // carries the Timeout
	parent  context.Context
	timeout time.Duration
	cwd     string
	env     map[string]string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	shell   bool
}

// Exec runs one of the fake's built-in commands; see the package doc.
func (p *Provider) Exec(ctx context.Context, id string, req providers.ExecRequest) (providers.ExecResult, error) {
	if err := p.enter("Exec"); err != nil {
		return providers.ExecResult{}, err
	}
	if req.Background {
		return p.background(ctx, id, req)
	}
	return p.exec(ctx, id, req, nil)
}

// exec runs a command in the foreground, or for the background command bg:
// that one does not start a stopped sandbox, and does not run at all when
// it was killed before it began.
func (p *Provider) exec(ctx context.Context, id string, req providers.ExecRequest, bg *proc) (providers.ExecResult, error) {
	start := time.Now()
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return providers.ExecResult{}, invalid("exec", "exactly one of Argv and Shell must be set")
	}
	r := &run{p: p, id: id, parent: ctx, ctx: ctx, timeout: req.Timeout, shell: req.Shell != ""}

	p.mu.Lock()
	b, err := p.box(id, "exec")
	switch {
	case err != nil:
	case bg == nil:
		p.wake(b)
	case bg.signal != 0:
		err = fmt.Errorf("fake: exec: killed before it began: %w", context.Canceled)
	}
	if err == nil {
		r.env = maps.Clone(b.env)
		cwd := req.Cwd
		if cwd == "" {
			cwd = providers.DefaultWorkdir
		}
		if r.cwd, err = cleanPath(cwd); err == nil {
			if e, ok := b.files[r.cwd]; !ok || !e.mode.IsDir() {
				err = providers.Errorf(providers.ErrNotFound, Name, "exec", "working directory %s does not exist", r.cwd)
			}
		}
	}
	p.mu.Unlock()
	if err != nil {
		return providers.ExecResult{}, err
	}
	if err := p.restoreSession(id, req.Session, req.Cwd != "", r); err != nil {
		return providers.ExecResult{}, err
	}
	if r.env == nil {
		r.env = map[string]string{}
	}
	maps.Copy(r.env, req.Env)

	if req.Timeout > 0 {
		var cancel context.CancelFunc
		r.ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	r.stdin, r.stdout, r.stderr = req.Stdin, req.Stdout, req.Stderr
	if r.stdin == nil {
		r.stdin = strings.NewReader("")
	}
	if r.stdout == nil {
		r.stdout = io.Discard
	}
	if r.stderr == nil {
		r.stderr = io.Discard
	}

	var cmds []command
	if r.shell {
		cmds = parseShell(req.Shell)
	} else {
		cmds = []command{{words: req.Argv}}
	}
	code := 0
	for _, c := range cmds {
		if err := r.interrupted(); err != nil {
			return providers.ExecResult{ExitCode: 137, Duration: time.Since(start)}, err
		}
		var exit bool
		code, exit, err = r.runOne(c)
		if err != nil {
			return providers.ExecResult{ExitCode: code, Duration: time.Since(start)}, err
		}
		if exit {
			break
		}
	}
	p.saveSession(id, req.Session, r)
	return providers.ExecResult{ExitCode: code, Duration: time.Since(start)}, nil
}

// interrupted returns the error for a cancelled ctx or an elapsed Timeout.
func (r *run) interrupted() error {
	if err := r.parent.Err(); err != nil {
		return fmt.Errorf("fake: exec: %w", err)
	}
	if r.ctx.Err() != nil {
		return providers.Errorf(providers.ErrTimeout, Name, "exec", "command timed out after %v", r.timeout)
	}
	return nil
}

// runOne runs one command, handling its redirection. exit reports that the
// command was `exit`, which ends a shell string.
func (r *run) runOne(c command) (code int, exit bool, err error) {
	if c.syntaxErr != "" {
		fmt.Fprintf(r.stderr, "fake: %s\n", c.syntaxErr)
		return 2, false, nil
	}
	if len(c.words) == 0 {
		return 0, false, nil
	}
	if c.redirect == "" {
		return r.builtin(c.words, r.stdout)
	}
	var buf bytes.Buffer
	code, exit, err = r.builtin(c.words, &buf)
	if err != nil {
		return code, exit, err
	}
	target := c.redirect
	if !strings.HasPrefix(target, "/") {
		target = path.Join(r.cwd, target)
	}
	if werr := r.redirectTo(target, buf.Bytes(), c.appendTo); werr != nil {
		if ierr := r.interrupted(); ierr != nil {
			return 137, exit, ierr
		}
		fmt.Fprintf(r.stderr, "fake: cannot create %s: %v\n", c.redirect, werr)
		return 2, exit, nil
	}
	return code, exit, nil
}

// redirectTo writes (or appends) data to a file; its directory must exist.
func (r *run) redirectTo(target string, data []byte, appendTo bool) error {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	// Under the lock: a background command is cancelled under it when
	// it is signalled or stopped, and then writes nothing (nor starts
	// the stopped sandbox again).
	if err := r.ctx.Err(); err != nil {
		return err
	}
	b, target, err := p.lookup(r.id, "exec", target)
	if err != nil {
		return err
	}
	if parent, ok := b.files[path.Dir(target)]; !ok || !parent.mode.IsDir() {
		return errors.New("directory nonexistent")
	}
	mode := b.files[target]
	if appendTo && mode != nil && mode.mode.IsRegular() {
		data = append(slices.Clip(mode.data), data...)
	}
	return p.put(b, "exec", target, &entry{mode: 0o644, data: data, mtime: p.now()})
}

// builtin runs one of the fake's commands.
func (r *run) builtin(words []string, stdout io.Writer) (code int, exit bool, err error) {
	name, args := words[0], words[1:]
	switch name {
	case "true":
		return 0, false, nil
	case "false":
		return 1, false, nil
	case "exit":
		if !r.shell {
			break
		}
		if len(args) == 0 {
			return 0, true, nil
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			fmt.Fprintf(r.stderr, "fake: exit: illegal number: %s\n", args[0])
			return 2, true, nil
		}
		return n & 0xff, true, nil
	case "echo":
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			args, nl = args[1:], ""
		}
		_, _ = io.WriteString(stdout, strings.Join(args, " ")+nl)
		return 0, false, nil
	case "cat":
		return r.cat(args, stdout)
	case "sleep":
		return r.sleep(args)
	case "cd":
		return r.cd(args)
	case "export":
		return r.export(args)
	case "unset":
		return r.unset(args)
	case "pwd":
		_, _ = io.WriteString(stdout, r.cwd+"\n")
		return 0, false, nil
	case "env":
		for _, k := range slices.Sorted(maps.Keys(r.env)) {
			_, _ = fmt.Fprintf(stdout, "%s=%s\n", k, r.env[k])
		}
		return 0, false, nil
	case "fail-start":
		return 0, false, providers.Errorf(providers.ErrUnavailable, Name, "exec", "the sandbox could not start the command")
	}
	fmt.Fprintf(r.stderr, "fake: %s: command not found\n", name)
	return 127, false, nil
}

// cat copies stdin or the named files to stdout.
func (r *run) cat(files []string, stdout io.Writer) (int, bool, error) {
	if len(files) == 0 {
		if _, err := io.Copy(stdout, ctxReader{r.ctx, r.stdin}); err != nil {
			if ierr := r.interrupted(); ierr != nil {
				return 137, false, ierr
			}
			fmt.Fprintf(r.stderr, "cat: %v\n", err)
			return 1, false, nil
		}
		return 0, false, nil
	}
	code := 0
	for _, f := range files {
		if !strings.HasPrefix(f, "/") {
			f = path.Join(r.cwd, f)
		}
		rc, err := r.p.readFile(r.ctx, r.id, f)
		if err != nil {
			fmt.Fprintf(r.stderr, "cat: %s: %v\n", f, err)
			code = 1
			continue
		}
		_, _ = io.Copy(stdout, rc)
		rc.Close()
	}
	return code, false, nil
}

// sleep waits, honouring ctx and the Timeout.
func (r *run) sleep(args []string) (int, bool, error) {
	if len(args) != 1 {
		fmt.Fprintln(r.stderr, "sleep: usage: sleep DURATION")
		return 2, false, nil
	}
	d, err := parseDuration(args[0])
	if err != nil {
		fmt.Fprintf(r.stderr, "sleep: invalid time interval %q\n", args[0])
		return 1, false, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return 0, false, nil
	case <-r.ctx.Done():
		return 137, false, r.interrupted()
	}
}

// parseDuration accepts seconds ("2", "0.5") or a Go duration ("1500ms").
func parseDuration(s string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs < 0 {
			return 0, errors.New("negative duration")
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		return 0, errors.New("negative duration")
	}
	return d, err
}

// parseShell splits a shell string into commands on ";" and newlines,
// honouring '…' and "…" quotes, and recognises a trailing "> FILE" or
// ">> FILE".
func parseShell(s string) []command {
	var (
		cmds   []command
		cur    command
		word   strings.Builder
		inWord bool
		quote  rune
	)
	endWord := func() {
		if inWord {
			cur.words = append(cur.words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		cmds = append(cmds, finish(cur))
		cur = command{}
	}
	for _, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				word.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ';' || c == '\n':
			endCmd()
		case c == ' ' || c == '\t':
			endWord()
		case c == '>':
			// ">" and ">>" become words of their own.
			if inWord && word.String() != ">" {
				endWord()
			}
			word.WriteRune(c)
			inWord = true
		default:
			if inWord && (word.String() == ">" || word.String() == ">>") {
				endWord()
			}
			word.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		cur.syntaxErr = "unterminated quote"
	}
	endCmd()
	return cmds
}

// finish resolves the redirection of a command and flags unsupported
// syntax.
func finish(c command) command {
	if c.syntaxErr != "" {
		return c
	}
	for i, w := range c.words {
		switch w {
		case "|", "||", "&&", "&", "<":
			c.syntaxErr = fmt.Sprintf("shell syntax %q is not supported by the fake provider", w)
			return c
		case ">", ">>":
			if i != len(c.words)-2 {
				c.syntaxErr = fmt.Sprintf("%q must be followed by exactly one file name at the end of the command", w)
				return c
			}
			c.redirect, c.appendTo = c.words[i+1], w == ">>"
			c.words = c.words[:i]
			return c
		}
	}
	return c
}
