package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The TUI driven in a real terminal (tmux): each test starts the built
// binary with no verb, so it opens the TUI on a local sandbox, and asserts
// what the screen shows.

// dialogGuard is a little more than the dialog's type-ahead guard: keys
// sent sooner after a request appears are ignored by design.
const dialogGuard = 400 * time.Millisecond

// tuiSession starts `sandbox ARGS…` in a terminal and waits until the
// sandbox is ready; it returns the session and the sandbox id.
func tuiSession(t *testing.T, c *runner, args string) (*tmuxSession, string) {
	t.Helper()
	s := startTmuxSized(t, c.dir, c.command().Env, c.bin+" "+args, 120, 40)
	scr := s.waitFor("ready: local sandbox ")
	id := regexp.MustCompile(`ready: local sandbox (sb-[a-z0-9]+)`).FindStringSubmatch(scr)[1]
	status := strings.SplitN(scr, "\n", 2)[0]
	for _, want := range []string{"local", id, "ready", "net off", "mode session"} {
		if !strings.Contains(status, want) {
			t.Fatalf("status line %q lacks %q", status, want)
		}
	}
	return s, id
}

// answer waits out the type-ahead guard of the dialog on screen and sends
// keys to it.
func (s *tmuxSession) answer(keys ...string) {
	s.t.Helper()
	time.Sleep(dialogGuard)
	s.send(keys...)
}

// quitDeleting leaves through the quit prompt, deleting the sandbox; the
// terminal then says so.
func quitDeleting(t *testing.T, s *tmuxSession, c *runner) {
	t.Helper()
	s.typeLine("/quit")
	s.waitFor("Delete it?")
	s.answer("d")
	scr := s.waitFor("EXIT=")
	if !strings.Contains(scr, "EXIT=0") || !regexp.MustCompile(`deleted sandbox sb-[a-z0-9]+`).MatchString(scr) {
		t.Fatalf("want exit 0 and the deletion said after quitting; screen:\n%s", scr)
	}
	c.assertNoLeak()
}

// TestTUIStreamCancelQuit opens the TUI on a fresh local sandbox, runs a
// command whose output streams, cancels a long command (its process tree
// dies, the TUI stays), and quits, which deletes the sandbox.
func TestTUIStreamCancelQuit(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	s, id := tuiSession(t, c, "")
	if !slices.Contains(c.sandboxes(), id) {
		t.Fatalf("sandbox list does not show %s while the TUI is open", id)
	}

	s.typeLine(`!for i in 1 2 3 4; do echo tick-$i; sleep 1; done`)
	scr := s.waitFor("tick-1")
	if strings.Contains(scr, "tick-4") {
		t.Fatalf("all output arrived at once; it should stream:\n%s", scr)
	}
	s.waitFor("tick-4")
	s.waitFor("exit 0")

	// A long command with a child of its own: ctrl+c must kill both.
	s.typeLine(`!sh -c 'sleep 313 & sleep 314; wait'`)
	s.waitForRe(`sleep 314; wait' \(\d+s\)`) // the running line with its timer
	waitFor(t, "the command to start", func() bool { return len(hostProcs("313", "314")) == 2 })
	s.send("C-c")
	s.waitFor("cancelled: $ sh -c")
	waitFor(t, "the remote process tree to die", func() bool { return len(hostProcs("313", "314")) == 0 })

	// Still in the TUI, still usable.
	s.typeLine("!echo still-here")
	s.waitForRe(`(?m)^still-here\s*$`)
	quitDeleting(t, s, c)
}

// hostProcs returns the pids of `sleep N` processes for the given Ns.
func hostProcs(ns ...string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(argv) == 2 && filepath.Base(argv[0]) == "sleep" && slices.Contains(ns, argv[1]) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestTUIWriteDiffApproval writes a file under a policy that asks about
// everything: the dialog shows the diff, once for a new file and once for
// an overwrite typed in the multi-line input. Leaving with "keep" keeps the
// sandbox and prints the reattach command.
func TestTUIWriteDiffApproval(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	policy := filepath.Join(c.dir, "policy.yaml")
	os.WriteFile(policy, []byte("default: ask\n"), 0o644)
	s, id := tuiSession(t, c, "--policy "+policy)

	s.typeLine("/write /workspace/notes.txt hello")
	scr := s.waitFor("user wants to write")
	for _, want := range []string{"write /workspace/notes.txt", "+++ b/workspace/notes.txt", "+hello", "[y] allow once", "[r] deny with a reason"} {
		if !strings.Contains(scr, want) {
			t.Fatalf("the dialog lacks %q:\n%s", want, scr)
		}
	}
	s.answer("y")
	s.waitFor("wrote /workspace/notes.txt")

	// The multi-line input (no $EDITOR in the test's environment) opens
	// on the file's content.
	s.typeLine("/write /workspace/notes.txt")
	s.waitFor("new content of /workspace/notes.txt")
	s.waitFor("┃ hello")
	s.typeSlowly("bye")
	s.send("Enter")
	s.typeSlowly("for now")
	s.send("C-s")
	scr = s.waitFor("user wants to write")
	for _, want := range []string{"+bye", "+for now"} {
		if !strings.Contains(scr, want) {
			t.Fatalf("the overwrite's diff lacks %q:\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "-hello") {
		t.Fatalf("the file's content was lost from the editor:\n%s", scr)
	}
	s.answer("y")
	s.waitFor("wrote /workspace/notes.txt (18 B)")
	s.typeLine("/read /workspace/notes.txt")
	s.waitForRe(`(?m)^for now\s*$`)

	// ctrl+c with nothing running leaves; k keeps the sandbox.
	s.send("C-c")
	s.waitFor("Delete it?")
	s.answer("k")
	scr = s.waitFor("EXIT=")
	if !strings.Contains(scr, "EXIT=0") || !strings.Contains(scr, "reattach with: sandbox --sandbox-id "+id) {
		t.Fatalf("keeping should print the reattach command and exit 0:\n%s", scr)
	}
	if !slices.Contains(c.sandboxes(), id) {
		t.Fatalf("the kept sandbox %s is gone", id)
	}
	if err := c.command("delete", id).Run(); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// TestTUIReuseKeeps opens the TUI on an existing sandbox: quitting keeps it
// without a prompt.
func TestTUIReuseKeeps(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	if out, err := c.command("create").CombinedOutput(); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	ids := c.sandboxes()
	if len(ids) != 1 {
		t.Fatalf("sandboxes after create: %v", ids)
	}
	info := struct{ ID string }{ids[0]}
	s := startTmuxSized(t, c.dir, c.command().Env, c.bin+" --sandbox-id "+info.ID, 120, 40)
	s.waitFor("reusing local sandbox " + info.ID)
	s.waitFor("ready: local sandbox " + info.ID)
	s.typeLine("/quit")
	scr := s.waitFor("EXIT=")
	if strings.Contains(scr, "Delete it?") || !strings.Contains(scr, "EXIT=0") || !strings.Contains(scr, "left sandbox "+info.ID+" running") {
		t.Fatalf("a reused sandbox is kept without asking, and that is said:\n%s", scr)
	}
	if !slices.Contains(c.sandboxes(), info.ID) {
		t.Fatalf("the reused sandbox %s was deleted", info.ID)
	}
	if err := c.command("delete", info.ID).Run(); err != nil {
		t.Fatal(err)
	}
	c.assertNoLeak()
}

// TestTUIPlanApprovals runs a plan whose steps are allowed once, allowed
// for the session (the next matching step then passes without a dialog),
// and denied with a reason, which the screen and the audit log show.
func TestTUIPlanApprovals(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	plan := filepath.Join(c.dir, "plan.yaml")
	os.WriteFile(plan, []byte(`steps:
  - exec: "echo Once"
  - exec: "echo Session"
  - exec: "echo Covered"
  - exec: "touch /workspace/nope"
  - exec: "echo never-reached"
`), 0o644)
	s, _ := tuiSession(t, c, "")
	s.typeLine("/run " + plan)

	scr := s.waitFor("$ echo Once")
	if !strings.Contains(scr, "script wants to exec") {
		t.Fatalf("a plan step should ask as source script:\n%s", scr)
	}
	s.answer("y")
	s.waitFor("$ echo Session")
	scr = s.waitFor("[s] allow for the session: exec:echo *")
	s.answer("s")
	scr = s.waitFor("$ touch /workspace/nope")
	if !strings.Contains(scr, "allowed exec echo Covered (session \"exec:echo *\")") {
		t.Fatalf("the third step should pass by the session rule, without a dialog:\n%s", scr)
	}
	s.answer("r")
	s.waitFor("reason:")
	s.send("-l", "not in this plan")
	s.send("Enter")
	scr = s.waitFor("denied exec touch /workspace/nope: not in this plan")
	if strings.Contains(scr, "never-reached") {
		t.Fatalf("the plan should stop at the denied step:\n%s", scr)
	}
	for _, want := range []string{"Once", "Session", "Covered"} {
		if !regexp.MustCompile(`(?m)^` + want + `\s*$`).MatchString(scr) {
			t.Fatalf("the output of step %q is missing:\n%s", want, scr)
		}
	}

	// The audit log records who decided each step, and the reason.
	data, err := os.ReadFile(filepath.Join(c.state, "sandbox", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The audit log holds the call events: call.requested names the
	// request, call.decided (same call_id) the decision.
	type rec struct {
		Allow      bool
		By, Reason string
	}
	var ev struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Source string `json:"source"`
		Target string `json:"target"`
		Allow  bool   `json:"allow"`
		By     string `json:"by"`
		Reason string `json:"reason"`
	}
	targets := map[string]string{} // call id → target of a script call
	got := map[string]rec{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		ev.Type, ev.Source, ev.Target, ev.By, ev.Reason, ev.Allow = "", "", "", "", "", false
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "call.requested" && ev.Source == "script":
			targets[ev.CallID] = ev.Target
		case ev.Type == "call.decided" && targets[ev.CallID] != "":
			got[targets[ev.CallID]] = rec{Allow: ev.Allow, By: ev.By, Reason: ev.Reason}
		}
	}
	for target, want := range map[string]rec{
		"echo Once":             {Allow: true, By: "user"},
		"echo Session":          {Allow: true, By: "user"},
		"echo Covered":          {Allow: true, By: "session"},
		"touch /workspace/nope": {Allow: false, By: "user", Reason: "not in this plan"},
	} {
		if r, ok := got[target]; !ok || r != want {
			t.Errorf("audit for %q: %+v (found %v), want %+v", target, r, ok, want)
		}
	}
	if _, ok := got["echo never-reached"]; ok {
		t.Error("the step after the denial was audited; it should not have been asked")
	}
	quitDeleting(t, s, c)
}

// TestTUIUploadProgress uploads a large (sparse) file and checks the
// progress bar with bytes, rate and time left, then cancels it.
func TestTUIUploadProgress(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	big, err := os.Create(filepath.Join(c.dir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(8 << 30)
	big.Close()
	s, _ := tuiSession(t, c, "")
	s.typeLine("/upload big.bin /workspace/big.bin")
	scr := s.waitForRe(`█+░*\s+\d+%\s+[\d.]+ [KMG]iB / 8\.0 GiB\s+[\d.]+ [KMG]?i?B/s\s+\S+ left`)
	if !strings.Contains(scr, "upload big.bin → /workspace/big.bin") {
		t.Fatalf("the running upload is not named:\n%s", scr)
	}
	s.send("C-c")
	s.waitFor("cancelled: upload big.bin")
	quitDeleting(t, s, c)
}

// TestTUISetupLive runs a setup script inside the TUI: its output streams
// while the status line says it is setting up.
func TestTUISetupLive(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	script := filepath.Join(c.dir, "setup.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho setup-begin\nsleep 2\necho setup-end\n"), 0o755)
	s := startTmuxSized(t, c.dir, c.command().Env, c.bin+" --sandbox-setup "+script, 120, 40)
	scr := s.waitFor("setup-begin")
	status := strings.SplitN(scr, "\n", 2)[0]
	if !strings.Contains(status, "setting up") || strings.Contains(scr, "ready: local sandbox") || strings.Contains(scr, "setup-end") {
		t.Fatalf("setup output should stream before the sandbox is ready:\n%s", scr)
	}
	s.waitFor("setup finished")
	s.waitFor("ready: local sandbox")
	s.send("C-c")
	s.waitFor("Delete it?")
	s.answer("C-c") // ctrl+c in the quit prompt stays
	s.waitFor("staying; the sandbox is still here")
	quitDeleting(t, s, c)
}

// TestTUIEditorWrite writes a file with $EDITOR: the TUI hands the terminal
// over, reads the file back and asks with the diff.
func TestTUIEditorWrite(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	editor := filepath.Join(c.dir, "editor.sh")
	os.WriteFile(editor, []byte("#!/bin/sh\necho from-editor >> \"$1\"\n"), 0o755)
	policy := filepath.Join(c.dir, "policy.yaml")
	os.WriteFile(policy, []byte("default: ask\n"), 0o644)
	env := append(c.command().Env, "EDITOR="+editor)
	s := startTmuxSized(t, c.dir, env, c.bin+" --policy "+policy, 120, 40)
	s.waitFor("ready: local sandbox ")
	s.typeLine("/write /workspace/e.txt")
	scr := s.waitFor("user wants to write")
	if !strings.Contains(scr, "+from-editor") {
		t.Fatalf("the editor's text should be in the diff:\n%s", scr)
	}
	s.answer("y")
	s.waitFor("wrote /workspace/e.txt")
	quitDeleting(t, s, c)
}

// TestTUISignalsCleanUp sends SIGTERM, or SIGHUP as closing the terminal
// does, to the TUI while a command runs: the terminal is restored, the
// created sandbox (with the TUI's default TTL in the status line) deleted,
// and the exit status is 130.
func TestTUISignalsCleanUp(t *testing.T) {
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newRunner(t, buildBinary(t))
			s, _ := tuiSession(t, c, "")
			if status := strings.SplitN(s.screen(), "\n", 2)[0]; !regexp.MustCompile(`ttl \d+h\d+m left`).MatchString(status) {
				t.Fatalf("a sandbox the TUI creates should have a default TTL in the status line: %q", status)
			}
			n := strconv.Itoa(315 + i)
			s.typeLine("!sleep " + n)
			waitFor(t, "the command to start", func() bool { return len(hostProcs(n)) == 1 })
			s.signal(sig)
			scr := s.waitFor("EXIT=")
			if !strings.Contains(scr, "EXIT=130") {
				t.Fatalf("want exit 130 after %v:\n%s", sig, scr)
			}
			waitFor(t, "the command to die", func() bool { return len(hostProcs(n)) == 0 })
			c.assertNoLeak()
		})
	}
}

// signal sends sig to the TUI running in the pane: the process sandbox
// started, which replaced itself with sandbox-cloud (see TestTUIHandOver).
func (s *tmuxSession) signal(sig syscall.Signal) {
	s.t.Helper()
	out, err := exec.Command("tmux", "-S", s.sock, "display", "-p", "-t", s.name, "#{pane_pid}").Output()
	if err != nil {
		s.t.Fatal(err)
	}
	pid := childNamed(strings.TrimSpace(string(out)), "sandbox-cloud")
	if pid == 0 {
		s.t.Fatal("the TUI's process was not found under the pane's shell")
	}
	if err := syscall.Kill(pid, sig); err != nil {
		s.t.Fatal(err)
	}
}

// childNamed returns the pid of the child of ppid whose command is name.
func childNamed(ppid, name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		st := string(data)
		open, end := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(st[end+1:])
		if st[open+1:end] == name && len(fields) > 1 && fields[1] == ppid {
			pid, _ := strconv.Atoi(e.Name())
			return pid
		}
	}
	return 0
}

// TestTUISetupFails shows a failed setup's output and error in the TUI; a
// key leaves with status 125 and the sandbox is gone.
func TestTUISetupFails(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	script := filepath.Join(c.dir, "setup.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho about-to-fail\nexit 3\n"), 0o755)
	s := startTmuxSized(t, c.dir, c.command().Env, c.bin+" --sandbox-setup "+script, 120, 40)
	scr := s.waitFor("press any key to leave")
	if !strings.Contains(scr, "about-to-fail") || !strings.Contains(scr, "could not open the sandbox") {
		t.Fatalf("the setup's output and error should show:\n%s", scr)
	}
	s.send("q")
	scr = s.waitFor("EXIT=")
	if !strings.Contains(scr, "EXIT=125") {
		t.Fatalf("want exit 125 after a failed setup:\n%s", scr)
	}
	c.assertNoLeak()
}

// writePlan writes a plan file of exec steps and returns its path.
func writePlan(t *testing.T, dir, name string, steps ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("steps:\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "  - exec: %q\n", s)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTUITypingNeverApproves types words at a person's pace while a plan
// runs: the dialog that opens mid-typing says it waits, and neither the
// letters (y, e, s, n in "yes seen"), nor enter, nor "/quit⏎" answer it.
// It answers only a key after a pause.
func TestTUITypingNeverApproves(t *testing.T) {
	// The guard times keys as the TUI reads them: a stall of the TUI's
	// process between two keys (a loaded machine) makes the second one
	// look like it came after a pause, as it would for a person who
	// paused. So a run where a key answered is tried again; the guard
	// fails the test only if that happens every time (without it, it
	// always does).
	for attempt := 1; ; attempt++ {
		if typingNeverApproves(t, attempt == 3) {
			return
		}
		t.Logf("attempt %d: a typed key answered the dialog (the TUI stalled between two keys?); trying again", attempt)
	}
}

// typingNeverApproves is one run of TestTUITypingNeverApproves; it
// reports false when a typed key answered the dialog, unless last, when
// that fails the test.
func typingNeverApproves(t *testing.T, last bool) bool {
	c := newRunner(t, buildBinary(t))
	plan := writePlan(t, c.dir, "plan.yaml", "sleep 1", "touch /workspace/DANGER")
	policy := filepath.Join(c.dir, "policy.yaml")
	os.WriteFile(policy, []byte("allow: [\"exec:sleep *\"]\n"), 0o644)
	s, _ := tuiSession(t, c, "--policy "+policy)
	s.typeLine("/run " + plan)
	s.waitFor("step 1/2")
	// The dialog opens about a second in: keys typed at a person's pace
	// until it is open (however long a loaded machine takes), and more.
	// The screen is watched beside the typing, so that looking at it
	// does not slow the keys down into pauses.
	text := "hello you there, yes seen any "
	opened := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for !strings.Contains(s.screen(), "$ touch /workspace/DANGER") {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		close(opened)
	}()
typing:
	for i := 0; ; i++ {
		select {
		case <-opened:
			break typing
		default:
		}
		if i == 600 {
			t.Fatalf("the dialog never opened:\n%s", s.screen())
		}
		s.typeSlowly(text[i%len(text) : i%len(text)+1])
	}
	s.typeSlowly("yes, all and done")
	s.send("Enter")
	time.Sleep(keyDelay)
	s.typeLike("/quit")
	var scr string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		scr = s.screen()
		answered := strings.Contains(scr, "allowed exec touch") || strings.Contains(scr, "denied exec touch") || strings.Contains(scr, "Delete it?")
		if strings.Contains(scr, "$ touch /workspace/DANGER") && !answered {
			break
		}
		if answered || time.Now().After(deadline) {
			if last {
				t.Fatalf("typing answered the dialog:\n%s", scr)
			}
			// This run's TUI ends first (deleting its sandbox, as
			// on any SIGTERM): left running, it wrote to its state
			// directory while the test's clean-up removed it
			// ("directory not empty"). Whatever is left goes, so
			// that the state is empty for that clean-up.
			s.signal(syscall.SIGTERM)
			s.waitFor("EXIT=")
			_ = c.command("delete", "--all").Run()
			return false
		}
	}
	s.answer("n")
	s.waitFor("denied exec touch /workspace/DANGER")
	if out, _ := c.command("exec", "--sandbox-id", sandboxIn(t, scr), "--", "ls", "/workspace").CombinedOutput(); strings.Contains(string(out), "DANGER") {
		t.Fatalf("the denied file exists: %s", out)
	}
	s.send("Escape") // what was typed before the dialog opened is still in the input
	time.Sleep(keyDelay)
	quitDeleting(t, s, c)
	return true
}

// sandboxIn returns the sandbox id on a screen of the TUI.
func sandboxIn(t *testing.T, scr string) string {
	t.Helper()
	m := regexp.MustCompile(`sb-[a-z0-9]+`).FindString(scr)
	if m == "" {
		t.Fatalf("no sandbox id on the screen:\n%s", scr)
	}
	return m
}

// TestTUIQuitPromptGuarded: at the quit prompt, words typed at a person's
// pace (with a d in them), enter and ctrl+c never delete; ctrl+c stays.
func TestTUIQuitPromptGuarded(t *testing.T) {
	// As in TestTUITypingNeverApproves, the guard times keys as the TUI
	// reads them, and a stall of the TUI between two typed letters lets
	// the second act ("d" of "added" picks delete, which the enter after
	// the pause then answers): a run where that happened is tried again,
	// and the test fails only if it happens every time.
	for attempt := 1; ; attempt++ {
		if quitPromptGuarded(t, attempt == 3) {
			return
		}
		t.Logf("attempt %d: typed text left the quit prompt (the TUI stalled between two keys?); trying again", attempt)
	}
}

// quitPromptGuarded is one run of TestTUIQuitPromptGuarded; it reports
// false when typed text left the prompt, unless last, when that fails the
// test.
func quitPromptGuarded(t *testing.T, last bool) bool {
	c := newRunner(t, buildBinary(t))
	s, id := tuiSession(t, c, "")
	s.typeLike("/quit")
	s.waitFor("Delete it?")
	s.typeSlowly("added a diff")
	s.send("Enter")
	time.Sleep(dialogGuard)
	s.send("Enter")
	time.Sleep(dialogGuard)
	if scr := s.screen(); !strings.Contains(scr, "Delete it?") || strings.Contains(scr, "EXIT=") {
		if last {
			t.Fatalf("typed text or enter left the quit prompt:\n%s", scr)
		}
		// A sandbox the prompt kept goes, so that no machine outlives
		// the test.
		_ = c.command("delete", "--all").Run()
		return false
	}
	s.send("C-c")
	s.waitFor("staying; the sandbox is still here")
	if !slices.Contains(c.sandboxes(), id) {
		t.Fatalf("the sandbox %s is gone after staying", id)
	}
	quitDeleting(t, s, c)
	return true
}

// TestTUIYesVisible: -y shows as mode all (--yes), each automatic approval
// names the flag, and shift+tab to ask really asks again.
func TestTUIYesVisible(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	plan := writePlan(t, c.dir, "plan.yaml", "echo from-plan")
	s := startTmuxSized(t, c.dir, c.command().Env, c.bin+" -y", 120, 40)
	scr := s.waitFor("ready: local sandbox ")
	if status := strings.SplitN(scr, "\n", 2)[0]; !strings.Contains(status, "mode all (--yes)") {
		t.Fatalf("the status line should show --yes: %q", status)
	}
	s.typeLike("/run " + plan)
	s.waitFor("allowed exec echo from-plan (--yes)")
	s.send("BTab") // shift+tab: all → ask
	scr = s.waitFor("--yes is off")
	if status := strings.SplitN(scr, "\n", 2)[0]; !strings.Contains(status, "mode ask") || strings.Contains(status, "--yes") {
		t.Fatalf("the status line should show mode ask: %q", status)
	}
	s.typeLike("/run " + plan)
	s.waitFor("script wants to exec")
	s.answer("n")
	s.waitFor("denied exec echo from-plan")
	quitDeleting(t, s, c)
}

// TestTUIWordsAreText: a burst of text that spells a key name ("enter")
// is text, not the key; a bracketed paste of two lines keeps them apart,
// in the editor, and runs them as one script.
func TestTUIWordsAreText(t *testing.T) {
	c := newRunner(t, buildBinary(t))
	s, _ := tuiSession(t, c, "")
	s.typeSlowly("!echo ")
	s.send("-l", "enter")
	time.Sleep(dialogGuard)
	if scr := s.screen(); strings.Contains(scr, "› $ echo") || !strings.Contains(scr, "> !echo enter") {
		t.Fatalf("the word enter acted as the key:\n%s", scr)
	}
	s.send("Enter")
	s.waitForRe(`(?m)^enter\s*$`)

	if out, err := exec.Command("tmux", "-S", s.sock, "set-buffer", "echo first-line\necho second-line").CombinedOutput(); err != nil {
		t.Fatalf("set-buffer: %v\n%s", err, out)
	}
	if out, err := exec.Command("tmux", "-S", s.sock, "paste-buffer", "-p", "-t", s.name).CombinedOutput(); err != nil {
		t.Fatalf("paste-buffer: %v\n%s", err, out)
	}
	s.waitFor("pasted 2 lines")
	s.waitFor("pasted script")
	s.send("C-s")
	s.waitForRe(`(?m)^second-line\s*$`)
	s.waitForRe(`(?m)^first-line\s*$`)
	quitDeleting(t, s, c)
}
