//go:build unix

package approval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FuzzSplitShellAgainstSh compares SplitShell with what /bin/sh actually
// runs. For a fuzzed line that SplitShell reads as simple commands only
// (no segment complex), the line runs under /bin/sh with a PATH holding
// nothing but a recorder, a tiny sh script linked under the name of every
// word, which writes its argv to a log. Every command sh ran must
// then be one of the segments, with exactly its words; and when no
// command word is a builtin, every segment must have run in one of two
// runs (the recorder exits 0 in one and 1 in the other, so that both
// sides of && and || run).
//
// Safety: a line only runs when it cannot reach outside the test's temp
// directory however sh reads it. It holds no /, ., ~, backquote or NUL;
// every $ starts $'…' or $"…" (which sh reads as a plain dollar sign), or
// there is none when /bin/sh decodes $'…' itself; and, quotes removed, it
// names none of the builtins that run text as commands, signal other
// processes, search a default PATH or change PATH (kill, command, eval,
// trap, alias, …). Commands that are not found do nothing. Each run has a
// timeout and its whole process group is killed after it.
func FuzzSplitShellAgainstSh(f *testing.F) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		f.Skip("no /bin/sh")
	}
	for _, s := range []string{
		"git status", "go test x && git diff || make", "a | b & c", "a;b\nc", "'a b' \"c d\" e\\ f", "a\\\nb c",
		"a # c", "! a b", "a$'b'", "a$\"b\"", "git status$'\\0\\';touch PWN;#'", "a \\$'b'", "[[ a ]]", "a {b,c}",
		"a [b] c* d?", "time a", "a &> b", "a |& b", "a\n\nb", "if a; then b; fi", "\ta\tb", "a '' b", "a \"\" b",
		"a\\ ", "'#' a", "a#b", "a 'b\nc'", "\"a\\\"b\"", "a \"$'b'\"", "a $\"b\" c", "exec a b", "a=b c", "a \"b\"'c'd",
		"a \\\"b", "a \"\\\\\" b", "a 'b\\' c", "a b\\\n\\\nc", "a !b", "a -- -b", "{ a; }", "a && \\\nb", "a\r b",
		"a;;b", "a & & b", "a\\;b", "a \\# b", "a'#'b", "a\\\\ b", "{a,b}c", "a }", "} a", "a {", "a !", "a|!b", "!a",
		"! ! a", "a&&!b", "a||\n b", "a |\n b", "a $\"b c\" d", "a$'b c'd", "a\tb\vc\fd", "a\u00a0b",
	} {
		f.Add(s)
	}
	ansiC := shDecodesANSIC(f)
	f.Fuzz(func(t *testing.T, line string) {
		if !safeToRun(line, ansiC) {
			return
		}
		segs := SplitShell(line)
		for _, s := range segs {
			if s.Complex || len(s.Words) == 0 {
				return
			}
		}
		r := newShRecorder(t)
		runs := [2][][]string{r.run(t, line, 0), r.run(t, line, 1)}
		for run, got := range runs {
			explainExecuted(t, line, segs, got, run)
		}
		if covered := allRecordable(segs); covered {
			all := append(slices.Clone(runs[0]), runs[1]...)
			for _, s := range segs {
				if !slices.ContainsFunc(all, func(a []string) bool { return slices.Equal(a, s.Words) }) {
					t.Fatalf("SplitShell(%q) reports the command %q, which /bin/sh never ran; it ran %q", line, s.Words, all)
				}
			}
		}
	})
}

// explainExecuted fails unless every command sh ran is a segment (as many
// times as it appears), or the command of a segment `exec CMD…`.
func explainExecuted(t *testing.T, line string, segs []Segment, got [][]string, run int) {
	t.Helper()
	used := make([]bool, len(segs))
	for _, argv := range got {
		i := -1
		for j, s := range segs {
			if !used[j] && (slices.Equal(s.Words, argv) || s.Words[0] == "exec" && slices.Equal(s.Words[1:], argv)) {
				i = j
				break
			}
		}
		if i < 0 {
			var words [][]string
			for _, s := range segs {
				words = append(words, s.Words)
			}
			t.Fatalf("/bin/sh ran %q for %q (run %d), which SplitShell did not report as a simple command; it reported %q", argv, line, run, words)
		}
		used[i] = true
	}
}

// allRecordable reports whether every segment's command word is a name
// the recorder is linked under and not a builtin or keyword of any shell,
// so that every segment that runs is recorded.
func allRecordable(segs []Segment) bool {
	for _, s := range segs {
		if !linkable(s.Words[0]) || shellBuiltin(s.Words[0]) {
			return false
		}
	}
	return true
}

func linkable(name string) bool {
	return name != "" && len(name) <= 200 && !strings.ContainsAny(name, "/\x00") && name != "." && name != ".."
}

// shellBuiltin reports whether sh or bash runs name itself.
func shellBuiltin(name string) bool {
	switch name {
	case ".", ":", "[", "alias", "bg", "break", "cd", "chdir", "command", "continue", "echo", "eval", "exec", "exit",
		"export", "false", "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read", "readonly",
		"return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "wait",
		"bind", "builtin", "caller", "compgen", "complete", "compopt", "declare", "dirs", "disown", "enable", "help",
		"history", "let", "logout", "mapfile", "popd", "pushd", "readarray", "shopt", "source", "suspend", "typeset",
		"time", "coproc", "function", "select", "[[", "]]", "!", "{", "}", "if", "then", "else", "elif", "fi", "case",
		"esac", "for", "while", "until", "do", "done", "in":
		return true
	}
	return false
}

// safeToRun reports whether line may run under /bin/sh whatever sh makes
// of it (see FuzzSplitShellAgainstSh). ansiC is set when /bin/sh decodes
// $'…', which could then spell any byte.
func safeToRun(line string, ansiC bool) bool {
	if line == "" || len(line) > 400 || strings.ContainsAny(line, "\x00/.~`") {
		return false
	}
	digits := 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '$' && (ansiC || i+1 >= len(line) || line[i+1] != '\'' && line[i+1] != '"') {
			return false
		}
		// No huge numbers: printf widths, ulimit values.
		if c >= '0' && c <= '9' {
			digits++
			if digits > 4 {
				return false
			}
		} else {
			digits = 0
		}
	}
	bare := strings.Map(func(r rune) rune {
		switch r {
		case '\'', '"', '\\', '\n', '$', ' ', '\t':
			return -1
		}
		return r
	}, line)
	for _, bad := range []string{"kill", "command", "eval", "trap", "alias", "PATH", "PS4", "ENV", "enable", "compgen",
		"complete", "source", "fc", "hash", "suspend", "mapfile", "readarray", "shopt", "bind"} {
		if strings.Contains(bare, bad) {
			return false
		}
	}
	return true
}

// shDecodesANSIC reports whether /bin/sh decodes $'…' (bash, busybox ash,
// zsh and ksh do; dash does not).
func shDecodesANSIC(f *testing.F) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", `printf '%s' $'\x41'`).Output()
	if err != nil {
		return true // be strict
	}
	return string(out) != `$\x41`
}

// shRecorder is a temp directory with two PATH directories whose entries
// all run a recorder script (exiting 0 in one, 1 in the other), a log
// directory, and an empty working directory.
type shRecorder struct {
	root, log, work string
	bins            [2]string
}

func newShRecorder(t *testing.T) *shRecorder {
	t.Helper()
	root := t.TempDir()
	r := &shRecorder{root: root, log: filepath.Join(root, "log"), work: filepath.Join(root, "work")}
	for _, d := range []string{r.log, r.work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for status := range r.bins {
		r.bins[status] = filepath.Join(root, "bin"+strconv.Itoa(status))
		if err := os.Mkdir(r.bins[status], 0o700); err != nil {
			t.Fatal(err)
		}
		// The script finds its name in $0 (the link's path) and writes
		// the argument count, the name and the arguments, each ended by
		// a NUL byte, to a log file of its own.
		script := "#!/bin/sh\nprintf '%s\\0' \"$#\" \"${0##*/}\" \"$@\" >>'" + r.log + "/rec.'$$\nexit " + strconv.Itoa(status) + "\n"
		if err := os.WriteFile(filepath.Join(root, "rec"+strconv.Itoa(status)), []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// run runs line under /bin/sh with the recorder exiting status and
// returns the commands it recorded.
func (r *shRecorder) run(t *testing.T, line string, status int) [][]string {
	t.Helper()
	bin := r.bins[status]
	entries, err := os.ReadDir(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		// Every word may name a command: `exec a`, or a word that sh
		// reads where SplitShell saw an argument.
		for _, s := range SplitShell(line) {
			for _, name := range s.Words {
				if !linkable(name) {
					continue
				}
				err := os.Symlink(filepath.Join(r.root, "rec"+strconv.Itoa(status)), filepath.Join(bin, name))
				if err != nil && !errors.Is(err, os.ErrExist) {
					t.Fatal(err)
				}
			}
		}
	}
	logs, err := os.ReadDir(r.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range logs {
		if err := os.Remove(filepath.Join(r.log, e.Name())); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Args[0] = "sh"
	cmd.Dir = r.work
	cmd.Env = []string{"PATH=" + bin}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	// Wait returns once every process holding stderr is gone, background
	// commands included (the recorder runs in no time); anything left is
	// killed.
	err = cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if ctx.Err() != nil || errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("/bin/sh -c %q did not finish in time; stderr: %s", line, stderr.String())
	}
	got, err := r.records()
	if err != nil {
		t.Fatalf("%q: %v; stderr: %s", line, err, stderr.String())
	}
	return got
}

// records reads the recorder's log files.
func (r *shRecorder) records() ([][]string, error) {
	logs, err := os.ReadDir(r.log)
	if err != nil {
		return nil, fmt.Errorf("read log dir: %w", err)
	}
	var out [][]string
	for _, e := range logs {
		data, err := os.ReadFile(filepath.Join(r.log, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read log: %w", err)
		}
		fields := strings.Split(string(data), "\x00")
		fields = fields[:len(fields)-1] // the text after the last NUL
		for len(fields) > 0 {
			n, err := strconv.Atoi(fields[0])
			if err != nil || len(fields) < n+2 {
				return nil, fmt.Errorf("malformed record %q", data)
			}
			out = append(out, slices.Clone(fields[1:n+2]))
			fields = fields[n+2:]
		}
	}
	return out, nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return l.b.String() }
