package driver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/config"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// session opens a fresh fake sandbox that allows everything.
func session(t *testing.T) *engine.Session {
	t.Helper()
	f := fake.New()
	reg := fake.Registration()
	reg.New = func(providers.Config) (providers.Provider, error) { return f, nil }
	e := engine.New(engine.Options{
		Registry:        providers.NewRegistry(reg),
		StateDir:        t.TempDir(),
		DefaultProvider: "fake",
		Policy:          &approval.Policy{Yes: true},
	})
	s, err := e.Open(context.Background(), engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// hostile are file names that would drive a terminal if printed as they
// are: OSC (set the title), CSI (clear the screen), BEL, a carriage
// return, a newline, a C1 CSI and a bidi override.
var hostile = []string{
	"\x1b]0;title\a",
	"\x1b[2J\x1b[H",
	"ring\a",
	"evil\rgood",
	"two\nlines",
	"c1\u009b31m",
	"txt.\u202eexe",
}

func TestRunEscapesListingsAndProgress(t *testing.T) {
	t.Parallel()
	s := session(t)
	plan := &Plan{Name: "p"}
	for _, n := range hostile {
		plan.Steps = append(plan.Steps, Step{Op: "write", Path: "/workspace/d/" + n, Content: "match " + n + "\n"})
	}
	plan.Steps = append(plan.Steps,
		Step{Op: "ls", Path: "/workspace/d"},
		Step{Op: "glob", Pattern: "d/*"},
		Step{Op: "grep", Pattern: "match", Path: "/workspace/d"},
	)
	var stdout, progress bytes.Buffer
	var events []StepEvent
	err := Run(context.Background(), s, plan, Options{Stdout: &stdout, Stderr: &progress, Progress: &progress,
		Events: func(ev StepEvent) { events = append(events, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"stdout": stdout.String(), "progress": progress.String()} {
		for _, c := range "\x1b\a\r\u009b\u202e" {
			if strings.ContainsRune(out, c) {
				t.Errorf("%s holds %U raw:\n%q", name, c, out)
			}
		}
	}
	for _, want := range []string{`/workspace/d/\x1b]0;title\a`, `/workspace/d/evil\rgood`, `/workspace/d/two\nlines`, `/workspace/d/c1\u009b31m`, `/workspace/d/txt.\u202eexe`,
		`/workspace/d/\x1b[2J\x1b[H:1:match \x1b[2J\x1b[H`} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(progress.String(), `step 1/10: write /workspace/d/\x1b]0;title\a`) {
		t.Errorf("progress:\n%s", progress.String())
	}
	// The events keep the names exact: JSON escapes them when encoded.
	if ls := events[len(hostile)]; !strings.Contains(ls.Output, "/workspace/d/evil\rgood\n") {
		t.Errorf("ls event output %q", ls.Output)
	}
}

func TestRunMasksCapturedOutputPerStream(t *testing.T) {
	t.Parallel()
	const secret = `k<&"s3cr3t-value`
	m := config.NewMasker(secret)
	s := session(t)
	plan := &Plan{Name: "p", Steps: []Step{
		{Op: "write", Path: "/workspace/s", Content: "a " + secret + " b\n"},
		{Op: "exec", Argv: []string{"cat", "/workspace/s"}},
		{Op: "exec", Argv: []string{secret}}, // "command not found" on stderr
		{Op: "read", Path: "/workspace/s"},
	}}
	var events []StepEvent
	err := Run(context.Background(), s, plan, Options{Mask: m.String, MaskWriter: m.Writer,
		Events: func(ev StepEvent) { events = append(events, ev) }})
	var se *StepError
	if !errors.As(err, &se) || se.ExitCode != 127 {
		t.Fatalf("error = %v", err)
	}
	if len(events) != 3 {
		t.Fatalf("%d events", len(events))
	}
	for _, ev := range events {
		for _, f := range []string{ev.Output, ev.Target, ev.Error} {
			if strings.Contains(f, "s3cr3t") {
				t.Fatalf("secret in event %+v", ev)
			}
		}
	}
	if events[1].Output != "a *** b\n" || !strings.Contains(events[2].Output, "fake: ***: command not found") || events[2].Target != "***" {
		t.Fatalf("events %+v", events)
	}
}

func TestCapBufferCutsBetweenCharacters(t *testing.T) {
	t.Parallel()
	c := &capBuffer{limit: 5}
	c.Write([]byte("ab"))
	c.Write([]byte("c\u00e9\u00e9")) // the limit falls inside the second é
	c.Write([]byte("z"))
	out, truncated := c.bytes()
	if string(out) != "abc\u00e9" || !truncated {
		t.Fatalf("kept %q (truncated %v)", out, truncated)
	}
}

func TestRunBinaryOutputInBase64(t *testing.T) {
	t.Parallel()
	s := session(t)
	bin := "\xff\x00bin\xc3"
	plan := &Plan{Name: "p", Steps: []Step{
		{Op: "write", Path: "/workspace/b", Content: bin},
		{Op: "exec", Argv: []string{"cat", "/workspace/b"}},
		{Op: "exec", Argv: []string{"echo", "text é"}},
	}}
	var events []StepEvent
	if err := Run(context.Background(), s, plan, Options{Events: func(ev StepEvent) { events = append(events, ev) }}); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(events[1].OutputB64)
	if err != nil || string(raw) != bin || !utf8.ValidString(events[1].Output) {
		t.Fatalf("binary step: output %q, output_b64 %q", events[1].Output, events[1].OutputB64)
	}
	if events[2].Output != "text é\n" || events[2].OutputB64 != "" {
		t.Fatalf("text step: %+v", events[2])
	}
}
