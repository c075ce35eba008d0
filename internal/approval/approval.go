// Package approval decides whether an operation on a sandbox may run.
//
// Every operation becomes a Request. The Gate, a decorator around a
// providers.Provider, evaluates the Policy (rules from a policy file and
// from --allow/--deny/--yes), asks an Approver when the policy says "ask",
// records the decision in the audit log, and only then reaches the provider.
// The engine builds exactly one Gate per sandbox session and never hands out
// the inner provider.
package approval

import (
	"context"
	"fmt"

	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

// Source says who asked for an operation.
type Source string

// Request sources.
const (
	SourceUser   Source = "user"
	SourceScript Source = "script"
	SourceAgent  Source = "agent"
	SourceMCP    Source = "mcp"
	SourceSetup  Source = "setup"
)

// Kind is the class of an operation; rules match on it.
type Kind string

// Operation kinds.
const (
	KindExec     Kind = "exec"
	KindRead     Kind = "read"
	KindList     Kind = "list"
	KindWrite    Kind = "write"
	KindEdit     Kind = "edit"
	KindDelete   Kind = "delete"
	KindUpload   Kind = "upload"
	KindDownload Kind = "download"
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{KindExec, KindRead, KindList, KindWrite, KindEdit, KindDelete, KindUpload, KindDownload}

// FileEntry describes one file of an upload or download for the dialog.
type FileEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// Exists is true when the destination already exists (an overwrite).
	Exists bool `json:"exists,omitempty"`
}

// Details is what an approver shows so a person can decide: the exact effect.
type Details struct {
	// Cwd is the working directory of an exec.
	Cwd string `json:"cwd,omitempty"`
	// Diff is a unified diff for write and edit.
	Diff string `json:"diff,omitempty"`
	// Files lists what an upload or download moves.
	Files []FileEntry `json:"files,omitempty"`
	// Bytes is the total size moved or written.
	Bytes int64 `json:"bytes,omitempty"`
	// Dest is the destination of an upload, download or rename. For a
	// rename (kind write) it is a sandbox path and rules match it too; for
	// an upload or download it is where the bytes go and is only shown.
	Dest string `json:"dest,omitempty"`
	// Pattern is the glob or regular expression of a glob or grep.
	Pattern string `json:"pattern,omitempty"`
	// From is where an upload's bytes come from on the host (only shown).
	From string `json:"from,omitempty"`
	// Background marks an exec that starts the command detached: the
	// call returns at once with its pid, and the command keeps running
	// in the sandbox after it (providers.ExecRequest.Background).
	Background bool `json:"background,omitempty"`
	// User is the sandbox user an exec runs as, when the caller named
	// one (providers.ExecRequest.User).
	User string `json:"user,omitempty"`
	// Resolved is where Target leads inside the sandbox, when a symlink
	// in it leads elsewhere (providers.PathResolver), and ResolvedDest
	// the same for a rename's Dest. Path rules must match them as well
	// as the paths as typed, and the operation runs on them.
	Resolved     string `json:"resolved,omitempty"`
	ResolvedDest string `json:"resolved_dest,omitempty"`
}

// Request is one operation awaiting a decision.
type Request struct {
	Source   Source `json:"source"`
	Kind     Kind   `json:"kind"`
	Provider string `json:"provider"`
	Sandbox  string `json:"sandbox"`
	// Target is the command line for exec, the path otherwise.
	Target string `json:"target"`
	// Argv is set when an exec runs a program directly rather than through
	// a shell; Target is then the argv quoted for display, and rules see
	// the argv as one segment that is never complex.
	Argv    []string `json:"argv,omitempty"`
	Details Details  `json:"details,omitzero"`
}

// Segments returns the command segments of an exec request: the argv as
// one segment, or the shell command line split by SplitShell. It returns
// nil for other kinds.
func (r Request) Segments() []Segment {
	switch {
	case r.Kind != KindExec:
		return nil
	case r.Argv != nil:
		return []Segment{ArgvSegment(r.Argv)}
	default:
		return SplitShell(r.Target)
	}
}

// Paths returns the sandbox paths a non-exec request touches, which path
// rules must all match: the target, for a rename the destination, and
// where each resolves to when a symlink leads elsewhere (Details.Resolved,
// Details.ResolvedDest).
func (r Request) Paths() []string {
	if r.Kind == KindExec {
		return nil
	}
	out := []string{r.Target}
	rename := r.Kind == KindWrite && r.Details.Dest != ""
	if rename {
		out = append(out, r.Details.Dest)
	}
	if res := r.Details.Resolved; res != "" && res != r.Target {
		out = append(out, res)
	}
	if res := r.Details.ResolvedDest; rename && res != "" && res != r.Details.Dest {
		out = append(out, res)
	}
	return out
}

// String renders the request as a rule would match it, e.g. "exec:go test".
// The target is exact: to show it to a person, escape it (output.Escape).
func (r Request) String() string { return fmt.Sprintf("%s:%s", r.Kind, r.Target) }

// Texts returns every text of r that an approver shows: the sandbox, the
// target, the argv, and the details. HiddenWarning looks at them all.
func (r Request) Texts() []string {
	d := r.Details
	out := []string{r.Provider, r.Sandbox, r.Target, d.Cwd, d.User, d.Diff, d.Dest, d.Pattern, d.From, d.Resolved, d.ResolvedDest}
	out = append(out, r.Argv...)
	for _, f := range d.Files {
		out = append(out, f.Path, f.SHA256)
	}
	return out
}

// HiddenWarning returns the warning line every approval surface shows
// above a request that holds characters a person could not see or that
// change how the text around them is shown — control characters other
// than tab and newline, bidirectional controls, zero-width and other
// invisible characters — e.g. "hidden characters: \r (carriage return)
// (shown escaped)"; or "" when there are none. The request itself is
// shown through output.Escape.
func HiddenWarning(r Request) string { return output.HiddenWarning(r.Texts()...) }

// Effect is what a policy says about a request.
type Effect string

// Policy effects.
const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
	Ask   Effect = "ask"
)

// Decision is the final answer for a request.
type Decision struct {
	Allow bool `json:"allow"`
	// By says who decided: "policy", "flag", "user", "session", "default".
	By string `json:"by"`
	// Rule is the rule or flag that decided, e.g. `--allow "exec:go test *"`.
	Rule string `json:"rule,omitempty"`
	// Reason is a free-text reason, e.g. from "deny with a reason".
	Reason string `json:"reason,omitempty"`
	// SessionRule, when set on an allowing decision, is added to the
	// session's allow rules so later matching requests pass without asking.
	SessionRule string `json:"session_rule,omitempty"`
	// SessionRules are further rules added like SessionRule, for a command
	// whose segments need different rules.
	SessionRules []string `json:"session_rules,omitempty"`
	// SessionExact, on an allowing decision, allows requests identical
	// to this one for the rest of the session (Gate.AllowExactForSession).
	SessionExact bool `json:"session_exact,omitempty"`
}

// ExactOrigin is the Rule of a decision made by an exact call allowed for
// the session (Decision.SessionExact).
const ExactOrigin = "session: this exact call"

// Approver answers requests the policy marks "ask". Implementations: a line
// prompt on a terminal, the TUI's dialog broker, and a deny-all used for
// non-interactive runs. Approve blocks until a decision or ctx is done.
type Approver interface {
	Approve(ctx context.Context, req Request) (Decision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req Request) (Decision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req Request) (Decision, error) { return f(ctx, req) }

type ctxKey int

const (
	sourceKey ctxKey = iota
	detailsKey
)

// WithSource tags every gated call made with ctx as coming from src.
// Untagged calls count as SourceUser.
func WithSource(ctx context.Context, src Source) context.Context {
	return context.WithValue(ctx, sourceKey, src)
}

// SourceFrom returns the source tagged on ctx, or SourceUser.
func SourceFrom(ctx context.Context) Source {
	if s, ok := ctx.Value(sourceKey).(Source); ok {
		return s
	}
	return SourceUser
}

// WithDetails attaches the preview of the next gated call (for example the
// file list of an upload, computed by the caller) to ctx.
func WithDetails(ctx context.Context, d Details) context.Context {
	return context.WithValue(ctx, detailsKey, d)
}

// DetailsFrom returns the details attached to ctx.
func DetailsFrom(ctx context.Context) Details {
	d, _ := ctx.Value(detailsKey).(Details)
	return d
}

// DeniedError is returned for a denied request; the CLI exits 3 with it.
type DeniedError struct {
	Request  Request
	Decision Decision
	// Hint names the flag or rule that would allow the request.
	Hint string
}

// Is makes a denial match providers.ErrDenied, so code that sees only the
// provider contract (an emulator answering an SDK) can recognise it.
func (e *DeniedError) Is(target error) bool { return target == providers.ErrDenied }

// Error names what was denied, why, and how to allow it. It is escaped
// (output.Escape), as the rule, the reason and the hint may quote the
// request.
func (e *DeniedError) Error() string {
	s := fmt.Sprintf("denied: %s %q", e.Request.Kind, e.Request.Target)
	if e.Decision.Rule != "" {
		s += " by " + e.Decision.Rule
	}
	if e.Decision.Reason != "" {
		s += ": " + e.Decision.Reason
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return output.Escape(s)
}
