// Package wire holds the JSON shapes of Daytona's API that this
// project's client and emulator share: the control plane (paths relative
// to the API URL, which ends in /api on Daytona's cloud) and the toolbox,
// the daemon inside every sandbox, reached at the sandbox's
// toolboxProxyUrl followed by "/" and the sandbox's id.
//
// Field names follow Daytona's published API descriptions (api.json and
// toolbox.json of the daytona/clients repository) and what the official
// TypeScript SDK 0.218.0 sends and reads.
package wire

import (
	"strconv"
	"time"
)

// Headers of every API and toolbox request.
const (
	// HeaderSDKVersion selects the toolbox's reply formats: from 0.167.0
	// on, sessions return stdout and stderr apart.
	HeaderSDKVersion = "X-Daytona-SDK-Version"
	// HeaderSource names the client.
	HeaderSource = "X-Daytona-Source"
	// HeaderOrganization names the organization (needed with a JWT).
	HeaderOrganization = "X-Daytona-Organization-ID"
)

// SDKVersion is the version this project's client announces.
const SDKVersion = "0.218.0"

// Sandbox states (SandboxState) this project uses; Daytona has more.
const (
	StateCreating   = "creating"
	StateStarting   = "starting"
	StateStarted    = "started"
	StateStopping   = "stopping"
	StateStopped    = "stopped"
	StateArchived   = "archived"
	StateDestroying = "destroying"
	StateDestroyed  = "destroyed"
	StateError      = "error"
	StatePaused     = "paused"
)

// LabelLanguage is the label the SDKs always set on a create: the
// language of process.codeRun.
const LabelLanguage = "code-toolbox-language"

// Log line markers of session output: every line of stdout is preceded by
// StdoutMarker, every line of stderr by StderrMarker.
var (
	StdoutMarker = [3]byte{1, 1, 1}
	StderrMarker = [3]byte{2, 2, 2}
)

// CreateSandbox is the body of POST /sandbox.
type CreateSandbox struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	BuildInfo           *BuildInfo        `json:"buildInfo,omitempty"`
	User                string            `json:"user,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Public              bool              `json:"public,omitempty"`
	NetworkBlockAll     *bool             `json:"networkBlockAll,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 int               `json:"cpu,omitempty"`
	GPU                 int               `json:"gpu,omitempty"`
	Memory              int               `json:"memory,omitempty"`
	Disk                int               `json:"disk,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
}

// BuildInfo builds a sandbox from a Dockerfile (the SDKs' image option:
// "FROM <image>").
type BuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent,omitempty"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
}

// Sandbox is a sandbox as the control plane describes it. Intervals are
// minutes.
type Sandbox struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	Target              string            `json:"target"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	State               string            `json:"state,omitempty"`
	DesiredState        string            `json:"desiredState,omitempty"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	Volumes             []any             `json:"volumes"`
	BuildInfo           *BuildInfo        `json:"buildInfo,omitempty"`
	CreatedAt           time.Time         `json:"createdAt"`
	UpdatedAt           time.Time         `json:"updatedAt"`
	LastActivityAt      time.Time         `json:"lastActivityAt,omitzero"`
	SandboxClass        string            `json:"sandboxClass,omitempty"`
	DaemonVersion       string            `json:"daemonVersion,omitempty"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// SandboxList is the reply of GET /sandbox.
type SandboxList struct {
	Items      []Sandbox `json:"items"`
	NextCursor *string   `json:"nextCursor"`
}

// ToolboxProxyURL is the reply of GET /sandbox/{id}/toolbox-proxy-url.
type ToolboxProxyURL struct {
	URL string `json:"url"`
}

// Error is the error body of the control plane and of the toolbox.
type Error struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Error      string `json:"error,omitempty"`
	// Code is a daemon error code (FILE_NOT_FOUND, …) with Source
	// "DAYTONA_DAEMON", which the SDKs turn into typed errors.
	Code      string `json:"code,omitempty"`
	Source    string `json:"source,omitempty"`
	Path      string `json:"path,omitempty"`
	Method    string `json:"method,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
}

// Daemon error codes the emulator sends.
const (
	CodeFileNotFound     = "FILE_NOT_FOUND"
	CodeExecutionTimeout = "PROCESS_EXECUTION_TIMEOUT"
	SourceDaemon         = "DAYTONA_DAEMON"
)

// ExecuteRequest is the body of POST /process/execute; Timeout is in
// seconds.
type ExecuteRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	Timeout int               `json:"timeout,omitempty"`
}

// ExecuteResponse is the reply of POST /process/execute: Result is stdout
// and stderr together.
type ExecuteResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// CodeRunRequest is the body of POST /process/code-run; Timeout is in
// seconds. The reply is an ExecuteResponse.
type CodeRunRequest struct {
	Code     string            `json:"code"`
	Language string            `json:"language,omitempty"`
	Argv     []string          `json:"argv,omitempty"`
	Envs     map[string]string `json:"envs,omitempty"`
	Timeout  int               `json:"timeout,omitempty"`
}

// CreateSession is the body of POST /process/session.
type CreateSession struct {
	SessionID string `json:"sessionId"`
}

// SessionExecuteRequest is the body of POST /process/session/{id}/exec.
type SessionExecuteRequest struct {
	Command  string `json:"command"`
	RunAsync bool   `json:"runAsync,omitempty"`
	// Async is the older name of RunAsync.
	Async             bool `json:"async,omitempty"`
	SuppressInputEcho bool `json:"suppressInputEcho,omitempty"`
}

// SessionExecuteResponse is the reply of a session exec: just CmdID when
// it runs asynchronously.
type SessionExecuteResponse struct {
	CmdID    string `json:"cmdId"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Output   string `json:"output,omitempty"`
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
}

// Command is one command of a session; ExitCode is absent while it runs.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Session is a session and its commands.
type Session struct {
	SessionID string    `json:"sessionId"`
	Commands  []Command `json:"commands"`
}

// SessionLogs is the JSON reply of GET …/command/{id}/logs.
type SessionLogs struct {
	Output string `json:"output"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// SessionInput is the body of POST …/command/{id}/input.
type SessionInput struct {
	Data string `json:"data"`
}

// FileInfo describes one path of the toolbox's file API. Mode is Go's
// mode string ("-rw-r--r--"), Permissions four octal digits.
type FileInfo struct {
	Name        string `json:"name"`
	Path        string `json:"path,omitempty"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	Permissions string `json:"permissions"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	ModifiedAt  string `json:"modifiedAt"`
	ModTime     string `json:"modTime"`
}

// DownloadFiles is the body of POST /files/bulk-download.
type DownloadFiles struct {
	Paths []string `json:"paths"`
}

// UploadedFile is the reply of POST /files/upload-v2.
type UploadedFile struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// Match is one line GET /files/find found.
type Match struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// SearchFilesResponse is the reply of GET /files/search.
type SearchFilesResponse struct {
	Files []string `json:"files"`
}

// ReplaceRequest is the body of POST /files/replace.
type ReplaceRequest struct {
	Files    []string `json:"files"`
	Pattern  string   `json:"pattern"`
	NewValue string   `json:"newValue"`
}

// ReplaceResult is one file's outcome of POST /files/replace.
type ReplaceResult struct {
	File    string `json:"file"`
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
}

// Multipart field names of the bulk file endpoints.
const (
	// PartFile carries a file's bytes, PartError a JSON Error for a path
	// that could not be read (bulk-download; the part's filename is the
	// path asked for).
	PartFile  = "file"
	PartError = "error"
)

// UploadPathField and UploadFileField are the multipart field names of
// the i-th file of POST /files/bulk-upload: its destination, then its
// bytes.
func UploadPathField(i int) string { return "files[" + strconv.Itoa(i) + "].path" }

// UploadFileField is the field of the i-th file's bytes.
func UploadFileField(i int) string { return "files[" + strconv.Itoa(i) + "].file" }
