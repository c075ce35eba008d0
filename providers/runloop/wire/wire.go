// Package wire holds the JSON shapes and constants of Runloop's REST API
// (base https://api.runloop.ai, every path under /v1) that this project's
// client and emulator share. Field names follow the official SDKs'
// generated types; only the fields the two use are here.
package wire

// Header and environment names of the API.
const (
	// HeaderShouldRetry tells Stainless-generated clients whether to
	// repeat a call; a long poll's 408 carries "true".
	HeaderShouldRetry = "X-Should-Retry"
	// HeaderRequestID is the idempotency key the SDKs send on every
	// non-GET request, kept across the retries of one call.
	HeaderRequestID = "X-Request-Id"
)

// Devbox statuses.
const (
	StatusQueued       = "queued"
	StatusProvisioning = "provisioning"
	StatusInitializing = "initializing"
	StatusRunning      = "running"
	StatusSuspending   = "suspending"
	StatusSuspended    = "suspended"
	StatusResuming     = "resuming"
	StatusFailure      = "failure"
	StatusShutdown     = "shutdown"
)

// Execution statuses.
const (
	ExecQueued    = "queued"
	ExecRunning   = "running"
	ExecCompleted = "completed"
)

// Longest server-side holds of the long polls, in seconds.
const (
	DevboxWaitHold    = 30
	ExecutionWaitHold = 25
)

// Devbox is DevboxView.
type Devbox struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Status           string            `json:"status"`
	CreateTimeMs     int64             `json:"create_time_ms"`
	EndTimeMs        *int64            `json:"end_time_ms,omitempty"`
	Metadata         map[string]string `json:"metadata"`
	LaunchParameters LaunchParameters  `json:"launch_parameters"`
	StateTransitions []StateTransition `json:"state_transitions"`
	Capabilities     []string          `json:"capabilities"`
	BlueprintID      string            `json:"blueprint_id,omitempty"`
	SnapshotID       string            `json:"snapshot_id,omitempty"`
	FailureReason    string            `json:"failure_reason,omitempty"`
	ShutdownReason   string            `json:"shutdown_reason,omitempty"`
	InitiatorType    string            `json:"initiator_type,omitempty"`
}

// StateTransition is one entry of a devbox's history.
type StateTransition struct {
	Status           string `json:"status"`
	TransitionTimeMs int64  `json:"transition_time_ms"`
}

// LaunchParameters are a devbox's launch parameters.
type LaunchParameters struct {
	ResourceSizeRequest  string          `json:"resource_size_request,omitempty"`
	CustomCPUCores       float64         `json:"custom_cpu_cores,omitempty"`
	CustomGBMemory       int             `json:"custom_gb_memory,omitempty"`
	CustomDiskSize       int             `json:"custom_disk_size,omitempty"`
	KeepAliveTimeSeconds int64           `json:"keep_alive_time_seconds,omitempty"`
	AfterIdle            *AfterIdle      `json:"after_idle,omitempty"`
	LaunchCommands       []string        `json:"launch_commands,omitempty"`
	UserParameters       *UserParameters `json:"user_parameters,omitempty"`
	Architecture         string          `json:"architecture,omitempty"`
}

// AfterIdle is the idle policy: on_idle is "shutdown" or "suspend".
type AfterIdle struct {
	IdleTimeSeconds int64  `json:"idle_time_seconds"`
	OnIdle          string `json:"on_idle"`
}

// UserParameters name the user commands run as (Runloop's default is
// "user").
type UserParameters struct {
	Username string `json:"username"`
	UID      *int   `json:"uid,omitempty"`
}

// DefaultUser is the user of a devbox created without user_parameters.
const DefaultUser = "user"

// CreateDevbox is the body of POST /v1/devboxes and of
// /v1/devboxes/create_and_await_running.
type CreateDevbox struct {
	Name                 string            `json:"name,omitempty"`
	BlueprintID          string            `json:"blueprint_id,omitempty"`
	BlueprintName        string            `json:"blueprint_name,omitempty"`
	SnapshotID           string            `json:"snapshot_id,omitempty"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	Metadata             map[string]string `json:"metadata,omitempty"`
	Entrypoint           string            `json:"entrypoint,omitempty"`
	LaunchParameters     *LaunchParameters `json:"launch_parameters,omitempty"`
}

// DevboxList is the reply of GET /v1/devboxes.
type DevboxList struct {
	Devboxes   []Devbox `json:"devboxes"`
	HasMore    bool     `json:"has_more"`
	TotalCount *int     `json:"total_count,omitempty"`
}

// WaitForStatus is the body of the devbox and execution long polls.
type WaitForStatus struct {
	Statuses       []string `json:"statuses"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
}

// Execute is the body of POST /v1/devboxes/{id}/execute; CommandID makes
// a repeated call run the command once.
type Execute struct {
	Command           string `json:"command"`
	CommandID         string `json:"command_id"`
	OptimisticTimeout *int   `json:"optimistic_timeout,omitempty"`
	ShellName         string `json:"shell_name,omitempty"`
}

// ExecuteAsync is the body of POST /v1/devboxes/{id}/execute_async.
type ExecuteAsync struct {
	Command     string `json:"command"`
	ShellName   string `json:"shell_name,omitempty"`
	AttachStdin bool   `json:"attach_stdin,omitempty"`
}

// ExecuteSync is the body of the deprecated POST …/execute_sync.
type ExecuteSync struct {
	Command   string `json:"command"`
	ShellName string `json:"shell_name,omitempty"`
}

// Execution is DevboxAsyncExecutionDetailView; ExitStatus, Stdout and
// Stderr are set once it is completed.
type Execution struct {
	DevboxID        string `json:"devbox_id"`
	ExecutionID     string `json:"execution_id"`
	Status          string `json:"status"`
	ExitStatus      *int   `json:"exit_status,omitempty"`
	Stdout          string `json:"stdout,omitempty"`
	Stderr          string `json:"stderr,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	ShellName       string `json:"shell_name,omitempty"`
}

// ExecutionDetail is DevboxExecutionDetailView, the reply of execute_sync
// and write_file_contents.
type ExecutionDetail struct {
	DevboxID   string `json:"devbox_id"`
	ExitStatus int    `json:"exit_status"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ShellName  string `json:"shell_name,omitempty"`
}

// Chunk is one event of stream_stdout_updates / stream_stderr_updates:
// Output and Offset, the byte offset of the stream where it ends, which a
// reconnecting client sends back as the offset query parameter.
type Chunk struct {
	Output string `json:"output"`
	Offset int64  `json:"offset"`
}

// Kill is the body of POST …/executions/{eid}/kill.
type Kill struct {
	KillProcessGroup bool `json:"kill_process_group,omitempty"`
}

// ReadFileContents is the body of POST …/read_file_contents.
type ReadFileContents struct {
	FilePath string `json:"file_path"`
}

// WriteFileContents is the body of POST …/write_file_contents.
type WriteFileContents struct {
	FilePath string `json:"file_path"`
	Contents string `json:"contents"`
}

// DownloadFile is the body of POST …/download_file; upload_file is a
// multipart form with the text field "path" and the file part "file".
type DownloadFile struct {
	Path string `json:"path"`
}

// Error is an error reply.
type Error struct {
	Message string `json:"message"`
}
