package driver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/config"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// stream collects the events of a run, engine's and driver's, in order.
type stream struct {
	mu  sync.Mutex
	evs []events.Event
}

func (s *stream) add(evs ...events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, evs...)
}

// check validates every event against the schema and returns them.
func (s *stream) check(t *testing.T) []events.Event {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	for _, ev := range s.evs {
		b, err := output.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	return eventstest.New(t).Lines(t, buf.Bytes())
}

// session opens a fresh fake sandbox under policy (nil allows
// everything); its events go to st when st is not nil.
func session(t *testing.T, policy *approval.Policy, st *stream) *engine.Session {
	t.Helper()
	if policy == nil {
		policy = &approval.Policy{Yes: true}
	}
	f := fake.New()
	reg := fake.Registration()
	reg.New = func(providers.Config) (providers.Provider, error) { return f, nil }
	o := engine.Options{
		Registry:        providers.NewRegistry(reg),
		StateDir:        t.TempDir(),
		DefaultProvider: "fake",
		Policy:          policy,
	}
	if st != nil {
		o.Events = func(ev engine.Event) { st.add(ev.Public()...) }
	}
	s, err := engine.New(o).Open(context.Background(), engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// outputs returns the call.output text of each call, by call id.
func outputs(evs []events.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Type == events.CallOutput {
			out[ev.CallID] += ev.Data
		}
	}
	return out
}

// callOf returns the call id of the last call.requested with this kind
// and target.
func callOf(t *testing.T, evs []events.Event, kind, target string) string {
	t.Helper()
	id := ""
	for _, ev := range evs {
		if ev.Type == events.CallRequested && ev.Kind == kind && ev.Target == target {
			id = ev.CallID
		}
	}
	if id == "" {
		t.Fatalf("no call %s %q in %+v", kind, target, evs)
	}
	return id
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
	st := &stream{}
	s := session(t, nil, st)
	plan := &Plan{Name: "p"}
	for _, n := range hostile {
		plan.Steps = append(plan.Steps, Step{Op: "write", Path: "/workspace/d/" + n, Content: "match " + n + "\n"})
	}
	listings := &Plan{Name: "p", Steps: []Step{
		{Op: "ls", Path: "/workspace/d"},
		{Op: "glob", Pattern: "d/*"},
		{Op: "grep", Pattern: "match", Path: "/workspace/d"},
	}}
	plan.Steps = append(plan.Steps, listings.Steps...)
	var stdout, progress bytes.Buffer
	if err := Run(context.Background(), s, plan, Options{Stdout: &stdout, Stderr: &progress, Progress: &progress}); err != nil {
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
	// As events, the names stay exact: JSON escapes them when encoded.
	if err := Run(context.Background(), s, listings, Options{Events: func(ev events.Event) { st.add(ev) }}); err != nil {
		t.Fatal(err)
	}
	evs := st.check(t)
	var all strings.Builder
	for _, out := range outputs(evs) {
		all.WriteString(out)
	}
	if !strings.Contains(all.String(), "/workspace/d/evil\rgood\n") {
		t.Errorf("listing output %q", all.String())
	}
}

func TestRunMasksOutputPerStream(t *testing.T) {
	t.Parallel()
	const secret = `k<&"s3cr3t-value`
	m := config.NewMasker(secret)
	st := &stream{}
	s := session(t, nil, st)
	plan := &Plan{Name: "p", Steps: []Step{
		{Op: "write", Path: "/workspace/s", Content: "a " + secret + " b\n"},
		{Op: "exec", Argv: []string{"cat", "/workspace/s"}},
		{Op: "exec", Argv: []string{secret}}, // "command not found" on stderr
		{Op: "read", Path: "/workspace/s"},
	}}
	err := Run(context.Background(), s, plan, Options{Mask: m.String, MaskWriter: m.Writer, Events: func(ev events.Event) { st.add(ev) }})
	var se *StepError
	if !errors.As(err, &se) || se.ExitCode != 127 {
		t.Fatalf("error = %v", err)
	}
	evs := st.check(t)
	var stderr strings.Builder
	for _, ev := range evs {
		if ev.Type == events.CallOutput && strings.Contains(ev.Data, "s3cr3t") {
			t.Fatalf("secret in event %+v", ev)
		}
		if ev.Type == events.CallOutput && ev.Stream == "stderr" {
			stderr.WriteString(ev.Data)
		}
	}
	out := outputs(evs)
	if got := out[callOf(t, evs, "exec", "cat /workspace/s")]; got != "a *** b\n" {
		t.Errorf("cat printed %q", got)
	}
	if !strings.Contains(stderr.String(), "fake: ***: command not found") {
		t.Errorf("stderr events %q", stderr.String())
	}
	// The failed step is the last: its call completes as failed, with
	// its step and line.
	last := evs[len(evs)-1]
	if last.Type != events.CallCompleted || last.Status != events.StatusFailed || *last.ExitCode != 127 || last.Step != 3 {
		t.Errorf("last event %+v", last)
	}
}

func TestRunBinaryOutputInBase64(t *testing.T) {
	t.Parallel()
	st := &stream{}
	s := session(t, nil, st)
	bin := "\xff\x00bin\xc3"
	plan := &Plan{Name: "p", Steps: []Step{
		{Op: "write", Path: "/workspace/b", Content: bin},
		{Op: "exec", Argv: []string{"cat", "/workspace/b"}},
		{Op: "exec", Argv: []string{"echo", "text é"}},
	}}
	if err := Run(context.Background(), s, plan, Options{Events: func(ev events.Event) { st.add(ev) }}); err != nil {
		t.Fatal(err)
	}
	evs := st.check(t)
	bid, tid := callOf(t, evs, "exec", "cat /workspace/b"), callOf(t, evs, "exec", "echo 'text é'")
	var raw []byte
	for _, ev := range evs {
		switch {
		case ev.Type != events.CallOutput:
		case ev.CallID == bid:
			b, err := base64.StdEncoding.DecodeString(ev.DataB64)
			if err != nil || !utf8.ValidString(ev.Data) {
				t.Fatalf("binary output event %+v", ev)
			}
			raw = append(raw, b...)
		case ev.CallID == tid:
			if ev.Data != "text é\n" || ev.DataB64 != "" {
				t.Fatalf("text output event %+v", ev)
			}
		}
	}
	if string(raw) != bin {
		t.Fatalf("data_b64 decodes to %q", raw)
	}
}

// TestRunStreamsExecOutput checks that a step's output becomes events
// while the command runs, not when it ends.
func TestRunStreamsExecOutput(t *testing.T) {
	t.Parallel()
	const pause = 300 * time.Millisecond
	st := &stream{}
	s := session(t, nil, st)
	var mu sync.Mutex
	seen := map[string]time.Time{}
	plan := &Plan{Name: "p", Steps: []Step{{Op: "exec", Command: "echo one; sleep 0.3; echo two"}}}
	err := Run(context.Background(), s, plan, Options{Events: func(ev events.Event) {
		mu.Lock()
		seen[ev.Data] = time.Now()
		mu.Unlock()
		st.add(ev)
	}})
	if err != nil {
		t.Fatal(err)
	}
	st.check(t)
	one, two := seen["one\n"], seen["two\n"]
	if one.IsZero() || two.IsZero() || two.Sub(one) < pause-50*time.Millisecond {
		t.Fatalf("output events at %v and %v: not streamed while the command ran (%v)", one, two, seen)
	}
}

// TestRunDenialEvents checks a denied step's events: requested, decided
// (not allowed, by which rule) and completed as denied, placed at its
// step and line.
func TestRunDenialEvents(t *testing.T) {
	t.Parallel()
	policy := &approval.Policy{}
	if err := policy.AddDeny("exec:rm *", `--deny "exec:rm *"`); err != nil {
		t.Fatal(err)
	}
	if err := policy.AddAllow("exec:echo *", `--allow "exec:echo *"`); err != nil {
		t.Fatal(err)
	}
	st := &stream{}
	s := session(t, policy, st)
	plan, err := ParsePlan("plan.yaml", []byte("steps:\n  - exec: echo hi\n  - exec: rm -rf /workspace\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), s, plan, Options{Events: func(ev events.Event) { st.add(ev) }})
	if !approval.IsDenied(err) {
		t.Fatalf("error = %v, want a denial", err)
	}
	var got []string
	for _, ev := range st.check(t) {
		if strings.HasPrefix(ev.Type, "call.") {
			got = append(got, ev.Type+" "+ev.CallID+" "+ev.Status+" "+ev.Rule+" "+ev.Data)
		}
	}
	want := []string{
		"call.requested c1   ", `call.decided c1  --allow "exec:echo *" `, "call.output c1   hi\n", "call.completed c1 ok  ",
		"call.requested c2   ", `call.decided c2  --deny "exec:rm *" `, "call.completed c2 denied  ",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events\n%q\nwant\n%q", got, want)
	}
	last := st.check(t)[len(st.check(t))-1]
	if last.Step != 2 || last.Line != 3 || !strings.Contains(last.Error, "denied") {
		t.Fatalf("denied call completed as %+v", last)
	}
}
