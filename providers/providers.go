package providers

import (
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"syscall"
	"time"
)

// Provider is the contract between the engine and one sandbox backend.
//
// Every method takes a context first and honours its cancellation. Methods
// keyed by a sandbox id return an error matching ErrNotFound when the sandbox
// does not exist. Errors are classified with the kinds in errors.go so the CLI
// can map them to exit codes; providers keep the server's own message.
type Provider interface {
	// Name is the registry name of the provider ("local", "e2b", …).
	Name() string
	// Capabilities declares what the provider supports; the CLI refuses
	// flags that need a missing capability before anything is created.
	Capabilities() Capabilities

	// Create makes a new sandbox and returns once it can run commands.
	Create(ctx context.Context, spec Spec) (Info, error)
	// Get describes one sandbox.
	Get(ctx context.Context, id string) (Info, error)
	// List returns the sandboxes visible to the provider whose labels
	// contain every pair in filter.Labels.
	List(ctx context.Context, filter Filter) ([]Info, error)
	// Delete destroys the sandbox and everything in it. Deleting a
	// sandbox that does not exist returns ErrNotFound.
	Delete(ctx context.Context, id string) error

	// Exec runs a command and streams its output to req.Stdout and
	// req.Stderr as it is produced. A command that ran and exited returns
	// its status in Result.ExitCode with a nil error, whatever the status.
	// When req.Timeout elapses the whole process tree is killed and the
	// error matches ErrTimeout. A program that does not exist exits 127
	// with a nil error. Stdin on a provider that does not declare the Stdin
	// capability returns ErrUnsupported.
	Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error)

	// ReadFile opens a file for streaming. The caller closes it.
	ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error)
	// WriteFile creates or replaces a file with the bytes of r, creating
	// missing parent directories. A reader that fails leaves no partial file.
	WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error
	// Stat describes one path without following a final symlink.
	Stat(ctx context.Context, id, path string) (FileInfo, error)
	// ListDir lists a directory (not including itself). Depth 1 lists its
	// entries; a larger depth descends that many levels. Entries carry
	// absolute paths and Name is the base name. A missing path returns
	// ErrNotFound.
	ListDir(ctx context.Context, id, path string, depth int) ([]FileInfo, error)
	// Mkdir creates a directory and its missing parents; an existing
	// directory is not an error.
	Mkdir(ctx context.Context, id, path string) error
	// Remove deletes a path; a directory only when recursive is set.
	Remove(ctx context.Context, id, path string, recursive bool) error
	// Rename moves a path within the sandbox.
	Rename(ctx context.Context, id, from, to string) error

	// Upload unpacks a tar stream under dst, a directory inside the sandbox
	// that is created when missing. Entries must stay beneath dst.
	Upload(ctx context.Context, id, dst string, archive io.Reader) error
	// Download writes a tar stream of src to w. A directory yields its
	// contents relative to itself; a single file yields one entry named by
	// its base name. A missing src returns ErrNotFound.
	Download(ctx context.Context, id, src string, w io.Writer) error
}

// Grepper is an optional interface for providers that can search file
// contents natively. Without it the engine runs grep inside the sandbox.
type Grepper interface {
	Grep(ctx context.Context, id string, req GrepRequest) ([]GrepMatch, error)
}

// FileDownloader is an optional interface for providers that can copy one
// regular file of a sandbox into a host file directly: the local provider
// hands the host file to the process that reads the sandbox's file, which
// copies it in the kernel, where Download's tar stream passes through a
// pipe and a second process. DownloadFile writes the file's bytes to dst
// from its current offset; a src that is not a regular file returns an
// error matching ErrInvalid, a missing one ErrNotFound. Without it the
// engine extracts Download's stream.
type FileDownloader interface {
	DownloadFile(ctx context.Context, id, src string, dst *os.File) error
}

// FileUploader is an optional interface for providers that can copy one
// regular host file into a sandbox directly (the local provider hands it
// to the process that writes the sandbox's file, which copies it in the
// kernel). UploadFile creates or replaces dst with the bytes of src from
// its current offset to its end, with the mode perm and the modification
// time mtime (unless zero), creating missing parent directories; a failure
// or a cancellation leaves no partial file. Without it the engine sends
// Upload a tar stream.
type FileUploader interface {
	UploadFile(ctx context.Context, id, dst string, src *os.File, perm fs.FileMode, mtime time.Time) error
}

// Machine is an optional interface for providers whose sandboxes are
// machines: what one call starts keeps running until it ends or the
// sandbox stops. A stopped sandbox keeps its files and starts again at its
// next operation (or Start). Processes lists what runs; Signal sends one
// process a signal; Logs copies the output of a command started with
// ExecRequest.Background into w, following it until it ends when follow
// is set, and returns its exit status once it has ended (nil while it
// runs). An unknown pid matches ErrNotFound.
type Machine interface {
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string) error
	Processes(ctx context.Context, id string) ([]Process, error)
	Signal(ctx context.Context, id string, pid int, sig syscall.Signal) error
	Logs(ctx context.Context, id string, pid int, follow bool, w io.Writer) (*int, error)
}

// Terminal is an optional interface for providers that can run a command
// on a pseudo-terminal, as interactive programs (shells, editors) need.
// ExecTerminal starts req (Argv or Shell, Cwd, Env, User; its Stdin,
// Stdout, Stderr, Background and Timeout are not used) with a terminal of
// term's size as its standard streams and controlling terminal, and TERM
// set to term.Term unless req.Env sets it. The session ends with ctx.
type Terminal interface {
	ExecTerminal(ctx context.Context, id string, req ExecRequest, term TerminalRequest) (TerminalSession, error)
}

// TerminalRequest describes the terminal of ExecTerminal: its size in
// character cells (zero means 80×24) and the TERM its programs see (empty
// means xterm-256color).
type TerminalRequest struct {
	Cols, Rows uint16
	Term       string
}

// WithDefaults fills the zero fields of t: 80×24, xterm-256color.
func (t TerminalRequest) WithDefaults() TerminalRequest {
	if t.Cols == 0 {
		t.Cols = 80
	}
	if t.Rows == 0 {
		t.Rows = 24
	}
	if t.Term == "" {
		t.Term = "xterm-256color"
	}
	return t
}

// Env returns a copy of env with TERM set to t's (defaulted) Term unless
// env sets it.
func (t TerminalRequest) Env(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+1)
	maps.Copy(out, env)
	if _, ok := out["TERM"]; !ok {
		out["TERM"] = t.WithDefaults().Term
	}
	return out
}

// TerminalSession is a command running on a pseudo-terminal. Read returns
// what the command writes to the terminal (its echo of the input too),
// then io.EOF once it has ended and its output is read; Write types
// input; Resize changes the terminal's size (the command gets SIGWINCH).
// Reads, writes and resizes may come from different goroutines at once,
// so one session can serve a client after another (the e2b emulator's
// PTY Connect reattaches this way). Wait returns as Exec
// does when the command ends; Close kills the command if it still runs
// and releases the terminal.
type TerminalSession interface {
	io.ReadWriteCloser
	Resize(cols, rows uint16) error
	Wait() (ExecResult, error)
}

// Process is one process of a sandbox.
type Process struct {
	PID  int `json:"pid"`
	PPID int `json:"ppid,omitempty"`
	// Name is the program's short name, Argv its command line.
	Name string   `json:"name,omitempty"`
	Argv []string `json:"argv,omitempty"`
	UID  int      `json:"uid"`
	// State is the kernel's one-letter state (R, S, D, Z, T…), or
	// "exited" for a background command that ended.
	State   string    `json:"state"`
	Started time.Time `json:"started,omitzero"`
	// Background marks a command started with ExecRequest.Background;
	// ExitCode is its status once it exited.
	Background bool `json:"background,omitempty"`
	ExitCode   *int `json:"exit_code,omitempty"`
}

// Closer is an optional interface for providers that hold connections or
// background work that must end when the program exits.
type Closer interface {
	Close() error
}

// Capabilities lists the optional features of a provider.
type Capabilities struct {
	// Network reports that --network on|off is honoured.
	Network bool `json:"network"`
	// TTL reports that the provider itself ends a sandbox after Spec.TTL.
	// Without it the engine records the deadline and `delete --expired`
	// enforces it.
	TTL bool `json:"ttl"`
	// Labels reports that labels are stored with the sandbox and filter List.
	Labels bool `json:"labels"`
	// Stdin reports that ExecRequest.Stdin is delivered to the command.
	Stdin bool `json:"stdin"`
	// Resources reports that Spec.Resources is honoured.
	Resources bool `json:"resources"`
	// Image reports that Spec.Image (a template, snapshot or image) is honoured.
	Image bool `json:"image"`
	// EndsWithCaller reports that a foreground command whose caller goes
	// away (its connection cut, the calling process killed) is ended by
	// the provider itself, its process group killed: a caller that dies
	// leaves nothing running.
	EndsWithCaller bool `json:"ends_with_caller"`
}

// Spec describes a sandbox to create.
type Spec struct {
	// Labels are stored with the sandbox (metadata, tags) and used by List.
	Labels map[string]string
	// Env is set for every command run in the sandbox.
	Env map[string]string
	// TTL ends the sandbox after this long when the provider supports it.
	TTL time.Duration
	// Network selects the default network for commands.
	Network Network
	// Image names a template, snapshot or image; empty means the default.
	Image string
	// Resources asks for limits where supported.
	Resources Resources
	// AutoStop stops a sandbox after this long without an operation
	// (providers implementing Machine); zero means the provider's
	// default, a negative value never.
	AutoStop time.Duration
	// User is the default user of the sandbox's commands (see
	// ExecRequest.User); empty means root.
	User string
	// Transient says that the sandbox is made for the run that creates
	// it and deleted at its end (`sandbox exec` without --keep): a
	// provider may then keep its files less durably while that run lasts
	// (the local provider's first machine honours no fsync).
	Transient bool
}

// Network is the network mode of a sandbox or a command.
type Network string

// Network modes. NetworkDefault lets the provider choose (off for local).
const (
	NetworkDefault Network = ""
	NetworkOn      Network = "on"
	NetworkOff     Network = "off"
)

// Resources are optional limits; zero means the provider default.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int     `json:"memory_mb,omitempty"`
	Pids     int     `json:"pids,omitempty"`
	// DiskMB bounds what the sandbox's files may take on disk.
	DiskMB int `json:"disk_mb,omitempty"`
}

// State is the coarse lifecycle state of a sandbox.
type State string

// Sandbox states shared by every provider.
const (
	StateRunning State = "running"
	StatePaused  State = "paused"
	StateStopped State = "stopped"
	StateUnknown State = "unknown"
)

// Info describes a sandbox. It is a plain value, never a live handle.
type Info struct {
	ID        string            `json:"id"`
	Provider  string            `json:"provider"`
	State     State             `json:"state"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at"`
	// ExpiresAt is zero when the sandbox has no deadline.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Image     string    `json:"image,omitempty"`
	Network   Network   `json:"network,omitempty"`
	// Isolation is empty for the provider's normal isolation, or names a
	// weaker mode the sandbox runs in ("weak" for local without user
	// namespaces); the CLI warns about it on every use.
	Isolation string `json:"isolation,omitempty"`
	// Resources are the limits in force, defaults included, where the
	// provider says.
	Resources Resources `json:"resources,omitzero"`
	// AutoStop is how long the sandbox runs without an operation before
	// it stops by itself; zero when it never does or the provider does
	// not say.
	AutoStop time.Duration `json:"auto_stop_ns,omitempty"`
	// User is the sandbox's default user, when it has one besides the
	// provider's own default.
	User string `json:"user,omitempty"`
}

// Noter is implemented by providers that have something to tell about a
// sandbox beyond an operation's result: a machine found dead and started
// again, say. TakeNote returns it once ("" when there is nothing).
type Noter interface {
	TakeNote(id string) string
}

// Collector is implemented by providers that keep state on this host
// which an interrupted create or delete (a killed CLI, a full disk) can
// leave behind without a sandbox to delete: half-made directories, empty
// cgroups. Collect removes what is older than grace and names it.
type Collector interface {
	Collect(ctx context.Context, grace time.Duration) ([]string, error)
}

// Filter selects sandboxes in List.
type Filter struct {
	// Labels must all be present with equal values.
	Labels map[string]string
}

// Matches reports whether labels contain every pair of the filter.
func (f Filter) Matches(labels map[string]string) bool {
	for k, v := range f.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ExecRequest is one command to run.
type ExecRequest struct {
	// Argv runs a program directly. Exactly one of Argv and Shell is set.
	Argv []string
	// Shell runs a string with the sandbox's /bin/sh -c.
	Shell string
	// Cwd is the working directory; empty means the provider default
	// (/workspace for local).
	Cwd string
	// Env adds to (and overrides) the sandbox environment.
	Env map[string]string
	// Stdin is copied to the command; nil means an empty stdin.
	Stdin io.Reader
	// Stdout and Stderr receive output as it is produced; nil discards.
	Stdout io.Writer
	Stderr io.Writer
	// Timeout bounds the command; zero means no limit beyond ctx.
	Timeout time.Duration
	// Network overrides the sandbox's network mode for this command.
	Network Network
	// Background starts the command detached and returns at once with
	// its pid in ExecResult.PID (providers implementing Machine); its
	// output is kept for Machine.Logs. Stdin, Stdout and Stderr are not
	// used.
	Background bool
	// Session names a long-lived shell of the sandbox whose working
	// directory and exported variables carry over from one command to
	// the next (see SessionCommand).
	Session string
	// User runs the command as this user of the sandbox (a name in its
	// /etc/passwd, or a numeric uid), with that user's HOME; empty means
	// the sandbox's default user (Spec.User), else root. An unknown user
	// is ErrInvalid.
	User string
}

// ExecResult is the outcome of a command that ran.
type ExecResult struct {
	// ExitCode is the command's status: 0..255, or 128+signal when killed.
	ExitCode int           `json:"exit_code"`
	Duration time.Duration `json:"duration_ns"`
	// PID is a background command's process id.
	PID int `json:"pid,omitempty"`
}

// FileInfo describes one path in a sandbox.
type FileInfo struct {
	// Path is absolute inside the sandbox.
	Path    string      `json:"path"`
	Name    string      `json:"name"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
	// Target is the link target when Mode has fs.ModeSymlink.
	Target string `json:"target,omitempty"`
}

// IsDir reports whether the path is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// GrepRequest is a content search.
type GrepRequest struct {
	// Pattern is a regular expression (RE2 syntax for native searchers,
	// extended grep syntax for the fallback).
	Pattern string
	// Path is a file or a directory searched recursively.
	Path string
	// Glob, when set, limits the files searched by base name or path.
	Glob string
	// IgnoreCase makes the match case-insensitive.
	IgnoreCase bool
	// MaxMatches stops the search after this many matches; zero means 1000.
	MaxMatches int
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// PathResolver is an optional interface for providers that can tell where a
// path leads inside a sandbox. ResolvePath returns path (absolute and clean)
// with every symlink in it resolved by the sandbox itself, as `realpath -m`
// does: the part that exists is resolved component by component, a link's
// target taken relative to the directory that holds it, and the part that
// does not exist is appended as it is. Too many links (a loop) is an error
// matching ErrInvalid; a missing sandbox ErrNotFound.
//
// The approval gate evaluates path rules on both the typed and the resolved
// path of a file operation, and then runs the operation on the resolved
// path with a context from WithNoFollow, so that a symlink swapped in after
// the decision makes the operation fail instead of redirecting it. Without
// this interface path rules see only the path as typed.
type PathResolver interface {
	ResolvePath(ctx context.Context, id, path string) (string, error)
}

type noFollowKey struct{}

// WithNoFollow returns a context that asks a provider implementing
// PathResolver to follow no symlink in the paths of the file operations
// made with it: the paths were resolved already (ResolvePath) and a
// decision was made on them. A symlink met in any component then makes
// the operation fail with an error matching ErrInvalid, rather than lead
// it elsewhere; the checks and the opening are one step in the sandbox,
// so that nothing the sandbox does in between can win a race with them.
//
// The final component is treated as the operation treats it: ReadFile,
// ListDir, Mkdir, Upload, Download, DownloadFile and Grep fail on a
// symlink there too, while Stat, Remove and Rename act on the link
// itself, and WriteFile and UploadFile replace it. Operations on a tree
// (ListDir, Upload, Download, Grep, a recursive Remove) never leave the
// directory they were given, whatever symlinks appear below it.
// Providers without PathResolver ignore the request.
func WithNoFollow(ctx context.Context) context.Context {
	return context.WithValue(ctx, noFollowKey{}, true)
}

// NoFollow reports whether ctx carries WithNoFollow.
func NoFollow(ctx context.Context) bool {
	v, _ := ctx.Value(noFollowKey{}).(bool)
	return v
}
