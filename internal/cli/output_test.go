package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/config"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// chunkReader returns its chunks one Read at a time, so a command that
// copies it (the fake's cat) writes them one by one.
type chunkReader struct{ chunks []string }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// runMainIn is runMain with stdin.
func runMainIn(t *testing.T, env map[string]string, in io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	base := map[string]string{"HOME": t.TempDir()}
	for k, v := range env {
		base[k] = v
	}
	code := Main(context.Background(), args, Deps{
		Streams:  Streams{In: in, Out: &out, Err: &errb},
		Registry: keyedRegistry(),
		Getenv:   func(k string) (string, bool) { v, ok := base[k]; return v, ok },
		Getwd:    func() (string, error) { return t.TempDir(), nil },
	})
	return code, out.String(), errb.String()
}

// secret holds the characters JSON encoding changes (<, & and ").
const secret = `k<&"s3cr3t-value`

// leaks reports whether s holds any part of secret that gives it away, in
// any encoding.
func leaks(s string) bool {
	return strings.Contains(s, "s3cr3t") || strings.Contains(s, "s3c")
}

// outputEvents decodes JSON Lines and joins the output events' text per
// stream; binary holds the decoded data_b64 of every event that has one.
func outputEvents(t *testing.T, lines string) (text, binary map[string]string) {
	t.Helper()
	text, binary = map[string]string{}, map[string]string{}
	for _, ev := range eventstest.New(t).Lines(t, []byte(lines)) {
		if ev.Type != events.CallOutput {
			continue
		}
		text[ev.Stream] += ev.Data
		if ev.DataB64 != "" {
			b, err := base64.StdEncoding.DecodeString(ev.DataB64)
			if err != nil {
				t.Fatalf("bad data_b64 in %+v", ev)
			}
			binary[ev.Stream] += string(b)
		}
	}
	return text, binary
}

func TestJSONOutputMaskedPerStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		writes []string
		want   string
	}{
		{"stdout whole", "stdout", []string{"a " + secret + " b\n"}, "a *** b\n"},
		{"stdout split", "stdout", []string{"a k<&\"s3c", "r3t-value b\n"}, "a *** b\n"},
		{"stderr split", "stderr", []string{"e k<", "&\"s3cr3t", "-value\n"}, "e ***\n"},
		{"stderr byte by byte", "stderr", strings.Split("x"+secret+"y", ""), "x***y"},
		{"prefix only, flushed at close", "stdout", []string{"tail k<&\"s3"}, "tail k<&\"s3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			m := config.NewMasker(secret)
			app := &App{masker: m, stream: newEventStream(output.NewLines(&buf, m.JSON), "r1")}
			current := &events.CurrentCall{}
			current.Set("c1")
			otherStream := map[string]string{"stdout": "stderr", "stderr": "stdout"}[tt.stream]
			w := app.output(tt.stream, current)
			other := app.output(otherStream, current)
			for _, s := range tt.writes {
				w.Write([]byte(s))
				other.Write([]byte("-")) // the other stream in between
			}
			w.Close()
			other.Close()
			text, _ := outputEvents(t, buf.String())
			if text[tt.stream] != tt.want {
				t.Fatalf("%s says %q, want %q", tt.stream, text[tt.stream], tt.want)
			}
			if tt.name != "prefix only, flushed at close" && leaks(buf.String()) {
				t.Fatalf("secret in output:\n%s", buf.String())
			}
			if strings.Contains(buf.String(), `\u003c`) || strings.Contains(buf.String(), `\u0026`) {
				t.Fatalf("HTML escaping in output:\n%s", buf.String())
			}
		})
	}
}

func TestJSONOutputBinaryAsBase64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		text   string
		b64    string // all data_b64, decoded and joined
	}{
		{"text", []string{"héllo\n"}, "héllo\n", ""},
		{"character split across writes", []string{"caf\xc3", "\xa9\n"}, "café\n", ""},
		{"binary", []string{"\x89PNG\r\n\x1a\n\xff\x00"}, "\ufffdPNG\r\n\x1a\n\ufffd\x00", "\x89PNG\r\n\x1a\n\xff\x00"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		app := &App{masker: config.NewMasker(), stream: newEventStream(output.NewLines(&buf, nil), "r1")}
		current := &events.CurrentCall{}
		current.Set("c1")
		w := app.output("stdout", current)
		for _, s := range tt.writes {
			w.Write([]byte(s))
		}
		w.Close()
		text, bin := outputEvents(t, buf.String())
		if text["stdout"] != tt.text || bin["stdout"] != tt.b64 {
			t.Errorf("%s: text %q, data_b64 %q; want %q, %q", tt.name, text["stdout"], bin["stdout"], tt.text, tt.b64)
		}
	}
}

func TestExecJSONMasksSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FAKE_API_KEY": secret}
	// stdout: the secret split across two writes of cat.
	code, out, stderr := runMainIn(t, env, &chunkReader{chunks: []string{"before k<&\"s3c", "r3t-value after\n"}},
		"--sandbox", "fake", "--json", "exec", "--", "cat")
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	if leaks(out) {
		t.Fatalf("secret in --json output:\n%s", out)
	}
	text, _ := outputEvents(t, out)
	if text["stdout"] != "before *** after\n" {
		t.Fatalf("stdout events say %q", text["stdout"])
	}
	// stderr: the secret as a command name the fake does not know.
	code, out, stderr = runMainIn(t, env, strings.NewReader(""), "--sandbox", "fake", "--json", "exec", "--", secret, "x")
	if code != 127 || leaks(out) || leaks(stderr) {
		t.Fatalf("code %d, secret in output:\n%s\n%s", code, out, stderr)
	}
	text, _ = outputEvents(t, out)
	if !strings.Contains(text["stderr"], "fake: ***: command not found") {
		t.Fatalf("stderr events say %q", text["stderr"])
	}
}

func TestExecJSONBinaryOutput(t *testing.T) {
	t.Parallel()
	bin := "\x00\x01\xfe\xff text"
	code, out, stderr := runMainIn(t, map[string]string{"FAKE_API_KEY": "k-123456"}, strings.NewReader(bin),
		"--sandbox", "fake", "--json", "exec", "--", "cat")
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	_, raw := outputEvents(t, out)
	if raw["stdout"] != bin {
		t.Fatalf("data_b64 decodes to %q, want %q:\n%s", raw["stdout"], bin, out)
	}
}

// hostileNames would drive a terminal if printed as they are: OSC (set
// the title, ended by BEL or ST), CSI, BEL, a carriage return, a newline
// and a C1 CSI.
var hostileNames = []struct{ raw, shown string }{
	{"/w/\x1b]0;title\a", `/w/\x1b]0;title\a`},
	{"/w/\x1b]0;t\x1b\\", `/w/\x1b]0;t\x1b\`},
	{"/w/\x1b[2J\x1b[H", `/w/\x1b[2J\x1b[H`},
	{"/w/bell\a", `/w/bell\a`},
	{"/w/evil\rgood", `/w/evil\rgood`},
	{"/w/two\nlines", `/w/two\nlines`},
	{"/w/c1\u009b31m", `/w/c1\u009b31m`},
	{"/w/tab\there", `/w/tab\there`},
}

// terminalSafe fails when s holds a character that drives a terminal;
// newlines end lines.
func terminalSafe(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Fatalf("%s holds %U raw:\n%q", what, r, s)
		}
	}
}

func TestPrintFilesEscapesNames(t *testing.T) {
	t.Parallel()
	var list []providers.FileInfo
	for _, n := range hostileNames {
		list = append(list, providers.FileInfo{Path: n.raw, Size: 1, Mode: 0o644, ModTime: time.Unix(0, 0)})
	}
	list = append(list, providers.FileInfo{Path: "/w/link", Target: "\x1b]0;pwned\a", Mode: os.ModeSymlink | 0o777})
	for _, long := range []bool{false, true} {
		var out bytes.Buffer
		app := &App{streams: Streams{Out: &out}, masker: config.NewMasker()}
		if err := app.printFiles(list, long); err != nil {
			t.Fatal(err)
		}
		terminalSafe(t, "ls output", out.String())
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if want := len(list) + map[bool]int{false: 0, true: 1}[long]; len(lines) != want {
			t.Fatalf("long %v: %d lines, want %d:\n%s", long, len(lines), want, out.String())
		}
		for _, n := range hostileNames {
			if !strings.Contains(out.String(), n.shown) {
				t.Errorf("long %v: output lacks %q:\n%s", long, n.shown, out.String())
			}
		}
		if long && !strings.Contains(out.String(), `/w/link -> \x1b]0;pwned\a`) {
			t.Errorf("symlink target not escaped:\n%s", out.String())
		}
	}
	// JSON stays exact: encoding escapes it.
	var out bytes.Buffer
	app := &App{streams: Streams{Out: &out}, masker: config.NewMasker(), flags: globalFlags{json: true}}
	app.printFiles(list, true)
	terminalSafe(t, "ls --json", out.String())
	var back []events.File
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back[0].Path != hostileNames[0].raw {
		t.Fatalf("ls --json does not decode to the names: %v", err)
	}
}

func TestPrintMatchesEscapesLines(t *testing.T) {
	t.Parallel()
	var ms []providers.GrepMatch
	for i, n := range hostileNames {
		ms = append(ms, providers.GrepMatch{Path: n.raw, Line: i + 1, Text: "\tfound " + n.raw})
	}
	ms = append(ms, providers.GrepMatch{Path: "/w/s", Line: 9, Text: "key=" + secret})
	var out bytes.Buffer
	app := &App{streams: Streams{Out: &out}, masker: config.NewMasker(secret)}
	if err := app.printMatches(ms); err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(out.String(), "\t", "") // a line's tabs are kept
	terminalSafe(t, "grep output", s)
	for i, n := range hostileNames {
		// The path is escaped whole; the line keeps its tabs.
		if want := n.shown + ":" + string(rune('1'+i)) + ":\tfound " + output.EscapeLine(n.raw) + "\n"; !strings.Contains(out.String(), want) {
			t.Errorf("grep output lacks %q:\n%s", want, out.String())
		}
	}
	if leaks(out.String()) || !strings.Contains(out.String(), "/w/s:9:key=***") {
		t.Fatalf("grep output:\n%s", out.String())
	}
	out.Reset()
	app.flags.json = true
	app.printMatches(ms)
	if leaks(out.String()) {
		t.Fatalf("secret in grep --json:\n%s", out.String())
	}
}

func TestRunPlanEscapesListingsAndProgress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte(`steps:
  - write: {path: "/workspace/d/\e]0;title\a", content: "hit\n"}
  - write: {path: "/workspace/d/evil\rgood", content: "hit \e[2J\n"}
  - write: {path: "/workspace/d/two\nlines", content: "hit\n"}
  - ls: /workspace/d
  - glob: "d/*"
  - grep: {pattern: hit, path: /workspace/d}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, "--sandbox", "fake", "--yes", "run", plan)
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	terminalSafe(t, "stdout", out)
	terminalSafe(t, "stderr", stderr)
	for _, want := range []string{`/workspace/d/\x1b]0;title\a`, `/workspace/d/evil\rgood:1:hit \x1b[2J`, `/workspace/d/two\nlines`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, `write /workspace/d/\x1b]0;title\a`) {
		t.Errorf("progress not escaped:\n%s", stderr)
	}
}

func TestAuditRequired(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("/dev/full (standing in for a full disk) is missing: %v", err)
	}
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Every write to the audit log fails with ENOSPC.
	if err := os.Symlink("/dev/full", filepath.Join(state, "sandbox", "audit.jsonl")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FAKE_API_KEY": "k-123456", "XDG_STATE_HOME": state}
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHave string
	}{
		{"required: refused", []string{"--audit-required", "exec", "--", "echo", "hi"}, ExitError, "",
			`refused exec "echo hi": the audit log cannot be written`},
		{"required, after the verb", []string{"write", "/workspace/f", "x", "--audit-required"}, ExitError, "",
			`"/workspace/f": the audit log cannot be written`},
		{"not required: runs, with a warning", []string{"exec", "--", "echo", "hi"}, 0, "hi\n",
			"warning: the audit log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runMain(t, env, append([]string{"--sandbox", "fake"}, tt.args...)...)
			if code != tt.code || out != tt.stdout || !strings.Contains(stderr, tt.stderrHave) {
				t.Fatalf("code %d, stdout %q, stderr %q", code, out, stderr)
			}
			if tt.code != 0 && !strings.Contains(stderr, "no space left on device") {
				t.Fatalf("stderr does not say why: %q", stderr)
			}
		})
	}
}

func TestExitCodeAuditError(t *testing.T) {
	t.Parallel()
	err := &approval.AuditError{Request: approval.Request{Kind: approval.KindExec, Target: "ls"}, Err: syscall.ENOSPC}
	if got := exitCode(err); got != ExitError {
		t.Fatalf("exitCode = %d, want %d", got, ExitError)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatal("AuditError does not unwrap")
	}
}
