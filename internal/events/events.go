// Package events defines the event stream of scripted runs: the JSON Lines
// that `exec --json` and `run --json` print and the audit log records. Its
// contract is the JSON Schema in schema.json (Schema); Version names it.
//
// Every event is one flat object with a type and a time. A run starts with
// run.started and always ends with run.completed or run.failed. Between
// them come sandbox.* events, which carry the sandbox object, and the
// call.* events of each gated operation, tied together by a call id:
// call.requested once, call.decided, call.output while it runs (exec), and
// call.completed.
package events

import (
	_ "embed"
	"fmt"
	"io/fs"
	"maps"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Version is the version of the event schema, in run.started. It changes
// when a field changes meaning or goes away; new fields and new event
// types do not change it.
const Version = "1"

// Event types.
const (
	RunStarted   = "run.started"
	RunCompleted = "run.completed"
	RunFailed    = "run.failed"

	SandboxCreated = "sandbox.created"
	SandboxReused  = "sandbox.reused"
	SandboxStarted = "sandbox.started"
	SandboxStopped = "sandbox.stopped"
	SandboxDeleted = "sandbox.deleted"
	SandboxKept    = "sandbox.kept"

	CallRequested = "call.requested"
	CallDecided   = "call.decided"
	CallOutput    = "call.output"
	CallCompleted = "call.completed"
)

// Statuses of call.completed.
const (
	// StatusOK is an operation that ran and succeeded (an exec that
	// exited 0).
	StatusOK = "ok"
	// StatusFailed is an exec that ran and exited non-zero.
	StatusFailed = "failed"
	// StatusDenied is a call the gate refused.
	StatusDenied = "denied"
	// StatusError is an operation that could not run or failed.
	StatusError = "error"
	// StatusCancelled is a call stopped by an interrupt.
	StatusCancelled = "cancelled"
)

// Event is one line of the stream. Which fields are set depends on Type;
// schema.json says which ones each type carries.
type Event struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`

	// run.started.
	RunID   string `json:"run_id,omitempty"`
	Version string `json:"version,omitempty"`

	// sandbox.*: the sandbox as it is now; Reattach on sandbox.kept.
	Sandbox  *Sandbox `json:"sandbox,omitempty"`
	Reattach string   `json:"reattach,omitempty"`

	// call.*.
	CallID string `json:"call_id,omitempty"`
	// call.requested: who asked for what, where.
	Source    string   `json:"source,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	Target    string   `json:"target,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	Provider  string   `json:"provider,omitempty"`
	SandboxID string   `json:"sandbox_id,omitempty"`
	Details   *Details `json:"details,omitempty"`
	// call.decided.
	Allow *bool  `json:"allow,omitempty"`
	By    string `json:"by,omitempty"`
	Rule  string `json:"rule,omitempty"`
	// Reason is why a call was denied, when there is more to say than
	// the rule.
	Reason string `json:"reason,omitempty"`
	// call.output: a chunk of one stream. When the bytes are not valid
	// UTF-8, each invalid byte is U+FFFD in Data and DataB64 holds the
	// exact bytes.
	Stream  string `json:"stream,omitempty"`
	Data    string `json:"data,omitempty"`
	DataB64 string `json:"data_b64,omitempty"`
	// call.completed.
	Status     string `json:"status,omitempty"`
	DurationMS *int64 `json:"duration_ms,omitempty"`
	// Step and Line place a call of a plan: the step's number (from 1)
	// and its line in the plan file.
	Step int `json:"step,omitempty"`
	Line int `json:"line,omitempty"`

	// ExitCode is an exec's status on call.completed, the program's on
	// run.completed and run.failed.
	ExitCode *int `json:"exit_code,omitempty"`
	// Error says what went wrong (call.completed, run.failed).
	Error string `json:"error,omitempty"`
}

// Details is what a call.requested shows of an operation: the exact effect.
type Details struct {
	Cwd          string `json:"cwd,omitempty"`
	User         string `json:"user,omitempty"`
	Background   bool   `json:"background,omitempty"`
	Diff         string `json:"diff,omitempty"`
	Bytes        int64  `json:"bytes,omitempty"`
	Dest         string `json:"dest,omitempty"`
	From         string `json:"from,omitempty"`
	Pattern      string `json:"pattern,omitempty"`
	Resolved     string `json:"resolved,omitempty"`
	ResolvedDest string `json:"resolved_dest,omitempty"`
	// Files lists what an upload or download moves.
	Files []File `json:"files,omitempty"`
}

// File is a file in a listing or a transfer.
type File struct {
	Path string `json:"path"`
	// Type is file, dir, symlink or other; Mode the permission bits in
	// octal ("0644"). Both are empty when unknown.
	Type    string    `json:"type,omitempty"`
	Mode    string    `json:"mode,omitempty"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time,omitzero"`
	// Target is a symlink's target.
	Target string `json:"target,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Exists is true when a transfer overwrites the file.
	Exists bool `json:"exists,omitempty"`
}

// FileType names the type of a file mode: file, dir, symlink or other.
func FileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// FileMode renders the permission bits of m (with setuid, setgid and
// sticky) in four octal digits, e.g. "0644".
func FileMode(m fs.FileMode) string {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return fmt.Sprintf("%04o", bits)
}

// FromFileInfo is the File of a listing entry.
func FromFileInfo(fi providers.FileInfo) File {
	return File{Path: fi.Path, Type: FileType(fi.Mode), Mode: FileMode(fi.Mode), Size: fi.Size, ModTime: fi.ModTime, Target: fi.Target}
}

// Sandbox is a sandbox as events and `--json` verbs show it (DESIGN §4).
type Sandbox struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	State    string `json:"state"`
	// Labels are the labels the user gave; never nil.
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at,omitzero"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	Image     string            `json:"image,omitempty"`
	Network   string            `json:"network,omitempty"`
	Isolation string            `json:"isolation,omitempty"`
	User      string            `json:"user,omitempty"`
	// Resources are the limits in force, where the provider says.
	Resources *providers.Resources `json:"resources,omitempty"`
	// AutoStopSeconds is how long the sandbox runs without an operation
	// before it stops by itself; absent when it never does or the
	// provider does not say.
	AutoStopSeconds int64 `json:"auto_stop_seconds,omitempty"`
}

// NewSandbox is the sandbox object of info in state, without the labels
// named in hidden (the tool's own bookkeeping). An empty state keeps
// info's.
func NewSandbox(info providers.Info, state providers.State, hidden ...string) *Sandbox {
	if state == "" {
		state = info.State
	}
	if state == "" {
		state = "unknown"
	}
	labels := maps.Clone(info.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for _, k := range hidden {
		delete(labels, k)
	}
	sb := &Sandbox{
		ID: info.ID, Provider: info.Provider, State: string(state), Labels: labels,
		CreatedAt: info.CreatedAt, ExpiresAt: info.ExpiresAt, Image: info.Image,
		Network: string(info.Network), Isolation: info.Isolation, User: info.User,
		AutoStopSeconds: int64(info.AutoStop.Seconds()),
	}
	if info.Resources != (providers.Resources{}) {
		sb.Resources = &info.Resources
	}
	return sb
}

//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema (draft 2020-12) of one event.
func Schema() []byte { return append([]byte(nil), schema...) }

// Ptr returns a pointer to v, for the optional fields of an Event.
func Ptr[T any](v T) *T { return &v }
