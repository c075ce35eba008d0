package approval

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/agentbox/sandbox/internal/output"
)

// Limits of what the line prompt prints.
const (
	promptDiffLines = 40
	promptFiles     = 10
	promptLineWidth = 200
)

// prompt is the line approver for a terminal without the TUI.
type prompt struct {
	out io.Writer
	in  *bufio.Reader

	mu      sync.Mutex // one question at a time
	pending chan lineResult
}

type lineResult struct {
	line string
	err  error
}

// NewPrompt returns an Approver that asks on out and reads answers from in,
// one line each: y allows once; a allows and adds the suggested session
// rule (see SuggestRules); n, an empty line or end of input denies; r asks
// for a reason and denies with it. Concurrent requests are asked one after
// the other. The request is shown exactly, escaped with output.Escape, and
// one holding hidden characters gets a warning line (HiddenWarning), so a
// command cannot disguise itself on the terminal.
func NewPrompt(in io.Reader, out io.Writer) Approver {
	return &prompt{in: bufio.NewReader(in), out: out}
}

// Approve prints the request and reads the answer. When ctx ends first it
// returns ctx.Err(); a line typed later answers the next question.
func (p *prompt) Approve(ctx context.Context, req Request) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	rules := SuggestRules(req)
	fmt.Fprint(p.out, describe(req))
	for {
		question := "allow? [y]es / [n]o / "
		if len(rules) > 0 {
			question += "[a]lways (session rule " + output.Escape(strings.Join(rules, ", ")) + ") / "
		}
		question += "[r]eason: "
		fmt.Fprint(p.out, question)
		line, err := p.readLine(ctx)
		if err != nil && ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		answer := strings.ToLower(strings.TrimSpace(line))
		if err != nil && answer == "" {
			fmt.Fprintln(p.out)
			return Decision{By: "user", Reason: "no answer"}, nil
		}
		switch answer {
		case "y", "yes":
			return Decision{Allow: true, By: "user"}, nil
		case "a", "always":
			if len(rules) == 0 {
				fmt.Fprintln(p.out, "no rule can allow this call again; answer y or n")
				continue
			}
			d := Decision{Allow: true, By: "user", SessionRule: rules[0]}
			if len(rules) > 1 {
				d.SessionRules = rules[1:]
			}
			return d, nil
		case "", "n", "no":
			return Decision{By: "user"}, nil
		case "r", "reason":
			fmt.Fprint(p.out, "reason: ")
			reason, err := p.readLine(ctx)
			if err != nil && ctx.Err() != nil {
				return Decision{}, ctx.Err()
			}
			return Decision{By: "user", Reason: strings.TrimSpace(reason)}, nil
		default:
			fmt.Fprintf(p.out, "unknown answer \"%s\"\n", output.Escape(answer))
		}
	}
}

// readLine reads one line, or returns ctx.Err() when ctx ends first. A
// read cut short by ctx stays pending and answers the next call.
func (p *prompt) readLine(ctx context.Context) (string, error) {
	if p.pending == nil {
		ch := make(chan lineResult, 1)
		p.pending = ch
		go func() {
			line, err := p.in.ReadString('\n')
			ch <- lineResult{line, err}
		}()
	}
	select {
	case r := <-p.pending:
		p.pending = nil
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// describe renders a request for the prompt: every text escaped with
// output.Escape, after a warning line when it holds hidden characters.
// The target is shown whole, however long.
func describe(req Request) string {
	var b strings.Builder
	src := req.Source
	if src == "" {
		src = SourceUser
	}
	where := req.Sandbox
	if req.Provider != "" {
		where = req.Provider + "/" + req.Sandbox
	}
	fmt.Fprintf(&b, "\n%s wants to %s in %s:\n", output.Escape(string(src)), output.Escape(string(req.Kind)), output.Escape(where))
	if w := HiddenWarning(req); w != "" {
		fmt.Fprintf(&b, "  WARNING: %s\n", w)
	}
	label := "path"
	if req.Kind == KindExec {
		label = "command"
	}
	fmt.Fprintf(&b, "  %s: %s\n", label, output.Escape(req.Target))
	d := req.Details
	if d.Resolved != "" {
		fmt.Fprintf(&b, "  resolves to: %s (through a symlink)\n", output.Escape(d.Resolved))
	}
	if req.Kind == KindExec {
		for _, seg := range req.Segments() {
			if seg.Complex {
				fmt.Fprintf(&b, "  note: %s (no prefix rule matches it)\n", output.Escape(seg.Reason))
				break
			}
		}
	}
	if d.Cwd != "" {
		fmt.Fprintf(&b, "  cwd: %s\n", output.Escape(d.Cwd))
	}
	if d.User != "" {
		fmt.Fprintf(&b, "  as user: %s\n", output.Escape(d.User))
	}
	if d.Background {
		fmt.Fprintf(&b, "  runs: in the background (it keeps running after this call returns)\n")
	}
	if d.From != "" {
		fmt.Fprintf(&b, "  from (host): %s\n", output.Escape(d.From))
	}
	if d.Dest != "" {
		fmt.Fprintf(&b, "  to: %s\n", output.Escape(d.Dest))
	}
	if d.ResolvedDest != "" {
		fmt.Fprintf(&b, "  to resolves to: %s (through a symlink)\n", output.Escape(d.ResolvedDest))
	}
	if d.Pattern != "" {
		fmt.Fprintf(&b, "  pattern: %s\n", output.Escape(d.Pattern))
	}
	if d.Bytes > 0 {
		fmt.Fprintf(&b, "  size: %s\n", output.Bytes(d.Bytes))
	}
	if len(d.Files) > 0 {
		fmt.Fprintf(&b, "  files (%d):\n", len(d.Files))
		for i, f := range d.Files {
			if i == promptFiles {
				fmt.Fprintf(&b, "    … %d more\n", len(d.Files)-promptFiles)
				break
			}
			extra := ""
			if f.Exists {
				extra = "  (overwrites)"
			}
			if f.SHA256 != "" {
				extra = "  sha256:" + output.Escape(truncate(f.SHA256, 12)) + extra
			}
			fmt.Fprintf(&b, "    %s  %s%s\n", output.Escape(f.Path), output.Bytes(f.Size), extra)
		}
	}
	if d.Diff != "" {
		b.WriteString("  diff:\n")
		lines := strings.Split(strings.TrimSuffix(d.Diff, "\n"), "\n")
		for i, l := range lines {
			if i == promptDiffLines {
				fmt.Fprintf(&b, "    … %d more lines\n", len(lines)-promptDiffLines)
				break
			}
			fmt.Fprintf(&b, "    %s\n", output.Escape(truncate(l, promptLineWidth)))
		}
	}
	return b.String()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// DenyAll returns an Approver that denies every request it is asked
// about, for runs that cannot ask anyone. The Gate adds the hint naming
// the flag or rule that would allow the request. (A nil Approver in
// GateOptions behaves the same way.)
func DenyAll() Approver {
	return ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		return Decision{By: "policy", Reason: "approval required, and no one can be asked in a non-interactive run"}, nil
	})
}
