package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Connect service paths of envd (always POST).
const (
	ProcessStart       = "/process.Process/Start"
	ProcessConnect     = "/process.Process/Connect"
	ProcessList        = "/process.Process/List"
	ProcessSendInput   = "/process.Process/SendInput"
	ProcessStreamInput = "/process.Process/StreamInput"
	ProcessSendSignal  = "/process.Process/SendSignal"
	ProcessCloseStdin  = "/process.Process/CloseStdin"
	ProcessUpdate      = "/process.Process/Update"
	FSWatchDir         = "/filesystem.Filesystem/WatchDir"
	FSCreateWatcher    = "/filesystem.Filesystem/CreateWatcher"
	FSGetWatcherEvents = "/filesystem.Filesystem/GetWatcherEvents"
	FSRemoveWatcher    = "/filesystem.Filesystem/RemoveWatcher"
	FSStat             = "/filesystem.Filesystem/Stat"
	FSListDir          = "/filesystem.Filesystem/ListDir"
	FSMakeDir          = "/filesystem.Filesystem/MakeDir"
	FSMove             = "/filesystem.Filesystem/Move"
	FSRemove           = "/filesystem.Filesystem/Remove"
)

// ProcessConfig is the command envd starts: cmd is executed directly with
// args (no shell).
type ProcessConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// StartRequest starts a process. Stdin absent means true (old clients).
type StartRequest struct {
	Process ProcessConfig `json:"process"`
	Tag     *string       `json:"tag,omitempty"`
	Stdin   *bool         `json:"stdin,omitempty"`
	PTY     *PTY          `json:"pty,omitempty"`
}

// PTY asks for a pseudo-terminal.
type PTY struct {
	Size struct {
		Cols uint32 `json:"cols,omitempty"`
		Rows uint32 `json:"rows,omitempty"`
	} `json:"size"`
}

// ProcessSelector picks a process by pid or tag (a oneof).
type ProcessSelector struct {
	PID uint32  `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

// ProcessEvent is one event of a process stream (a oneof).
type ProcessEvent struct {
	Start     *StartEvent `json:"start,omitempty"`
	Data      *DataEvent  `json:"data,omitempty"`
	End       *EndEvent   `json:"end,omitempty"`
	Keepalive *struct{}   `json:"keepalive,omitempty"`
}

// StartEvent reports the pid of a started process.
type StartEvent struct {
	PID uint32 `json:"pid,omitempty"`
}

// DataEvent carries output bytes (base64 on the wire).
type DataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	PTY    []byte `json:"pty,omitempty"`
}

// EndEvent reports how a process ended. Status is Go's ProcessState
// string, such as "exit status 1" or "signal: killed".
type EndEvent struct {
	ExitCode int32   `json:"exitCode,omitempty"`
	Exited   bool    `json:"exited,omitempty"`
	Status   string  `json:"status,omitempty"`
	Error    *string `json:"error,omitempty"`
}

// StreamEvent is the message of the Start and Connect streams.
type StreamEvent struct {
	Event ProcessEvent `json:"event"`
}

// ProcessInput is stdin or pty bytes (a oneof).
type ProcessInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	PTY   []byte `json:"pty,omitempty"`
}

// SendInputRequest sends bytes to a process.
type SendInputRequest struct {
	Process ProcessSelector `json:"process"`
	Input   ProcessInput    `json:"input"`
}

// StreamInputRequest is one message of the StreamInput client stream.
type StreamInputRequest struct {
	Start *struct {
		Process ProcessSelector `json:"process"`
	} `json:"start,omitempty"`
	Data *struct {
		Input ProcessInput `json:"input"`
	} `json:"data,omitempty"`
	Keepalive *struct{} `json:"keepalive,omitempty"`
}

// SelectRequest is the body of CloseStdin and Connect.
type SelectRequest struct {
	Process ProcessSelector `json:"process"`
}

// SendSignalRequest sends a signal to a process.
type SendSignalRequest struct {
	Process ProcessSelector `json:"process"`
	Signal  Signal          `json:"signal"`
}

// ListResponse lists running processes.
type ListResponse struct {
	Processes []ProcessInfo `json:"processes,omitempty"`
}

// ProcessInfo describes one running process.
type ProcessInfo struct {
	Config ProcessConfig `json:"config"`
	PID    uint32        `json:"pid,omitempty"`
	Tag    *string       `json:"tag,omitempty"`
}

// Signal is envd's signal enum, named on the wire.
type Signal int32

// Signals envd knows.
const (
	SignalUnspecified Signal = 0
	SignalSIGKILL     Signal = 9
	SignalSIGTERM     Signal = 15
)

var signalNames = map[Signal]string{SignalUnspecified: "SIGNAL_UNSPECIFIED", SignalSIGKILL: "SIGNAL_SIGKILL", SignalSIGTERM: "SIGNAL_SIGTERM"}

// MarshalJSON writes the enum name.
func (s Signal) MarshalJSON() ([]byte, error) { return marshalEnum(int32(s), signalNames[s]) }

// UnmarshalJSON accepts a name or a number, as protojson does.
func (s *Signal) UnmarshalJSON(b []byte) error {
	v, err := unmarshalEnum(b, func(name string) (int32, bool) {
		for k, n := range signalNames {
			if n == name {
				return int32(k), true
			}
		}
		return 0, false
	})
	*s = Signal(v)
	return err
}

// PathRequest is the body of Stat, MakeDir and Remove.
type PathRequest struct {
	Path string `json:"path"`
}

// ListDirRequest lists a directory; depth 0 means 1.
type ListDirRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth,omitempty"`
}

// MoveRequest renames a path.
type MoveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// EntryResponse is the reply of Stat, MakeDir and Move.
type EntryResponse struct {
	Entry EntryInfo `json:"entry"`
}

// ListDirResponse is the reply of ListDir.
type ListDirResponse struct {
	Entries []EntryInfo `json:"entries,omitempty"`
}

// EntryInfo describes one path. Mode holds Go fs.FileMode bits.
type EntryInfo struct {
	Name          string     `json:"name,omitempty"`
	Type          FileType   `json:"type,omitempty"`
	Path          string     `json:"path,omitempty"`
	Size          int64      `json:"size,omitempty,string"`
	Mode          uint32     `json:"mode,omitempty"`
	Permissions   string     `json:"permissions,omitempty"`
	Owner         string     `json:"owner,omitempty"`
	Group         string     `json:"group,omitempty"`
	ModifiedTime  *Timestamp `json:"modifiedTime,omitempty"`
	SymlinkTarget *string    `json:"symlinkTarget,omitempty"`
	// Metadata is the file's metadata: its extended attributes under
	// MetadataXattrPrefix, without the prefix.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// MetadataXattrPrefix is the namespace of the extended attributes that
// hold a file's metadata (X-Metadata-* headers of an upload).
const MetadataXattrPrefix = "user.e2b."

// HeaderMetadataPrefix starts the upload headers that carry metadata.
const HeaderMetadataPrefix = "X-Metadata-"

// UpdateRequest resizes a process's PTY.
type UpdateRequest struct {
	Process ProcessSelector `json:"process"`
	PTY     *PTY            `json:"pty,omitempty"`
}

// WatchRequest is the body of WatchDir and CreateWatcher.
type WatchRequest struct {
	Path               string `json:"path"`
	Recursive          bool   `json:"recursive,omitempty"`
	IncludeEntry       bool   `json:"includeEntry,omitempty"`
	AllowNetworkMounts bool   `json:"allowNetworkMounts,omitempty"`
}

// FilesystemEvent is one change in a watched directory: Name is the path
// relative to the watched directory.
type FilesystemEvent struct {
	Name  string     `json:"name"`
	Type  EventType  `json:"type"`
	Entry *EntryInfo `json:"entry,omitempty"`
}

// WatchEvent is one message of the WatchDir stream (a oneof).
type WatchEvent struct {
	Start      *struct{}        `json:"start,omitempty"`
	Filesystem *FilesystemEvent `json:"filesystem,omitempty"`
	Keepalive  *struct{}        `json:"keepalive,omitempty"`
}

// CreateWatcherResponse names a new polling watcher.
type CreateWatcherResponse struct {
	WatcherID string `json:"watcherId"`
}

// WatcherRequest is the body of GetWatcherEvents and RemoveWatcher.
type WatcherRequest struct {
	WatcherID string `json:"watcherId"`
}

// GetWatcherEventsResponse holds the events since the last call.
type GetWatcherEventsResponse struct {
	Events []FilesystemEvent `json:"events"`
}

// EventType is envd's filesystem event enum, named on the wire.
type EventType int32

// Event types.
const (
	EventUnspecified EventType = 0
	EventCreate      EventType = 1
	EventWrite       EventType = 2
	EventRemove      EventType = 3
	EventRename      EventType = 4
	EventChmod       EventType = 5
)

var eventTypeNames = []string{"EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE", "EVENT_TYPE_REMOVE", "EVENT_TYPE_RENAME", "EVENT_TYPE_CHMOD"}

// MarshalJSON writes the enum name.
func (t EventType) MarshalJSON() ([]byte, error) { return marshalNamed(int32(t), eventTypeNames) }

// UnmarshalJSON accepts a name or a number.
func (t *EventType) UnmarshalJSON(b []byte) error {
	v, err := unmarshalNamed(b, eventTypeNames)
	*t = EventType(v)
	return err
}

// marshalNamed writes the name of v in names, or its number.
func marshalNamed(v int32, names []string) ([]byte, error) {
	name := ""
	if v >= 0 && int(v) < len(names) {
		name = names[v]
	}
	return marshalEnum(v, name)
}

// unmarshalNamed reads a name of names or a number.
func unmarshalNamed(b []byte, names []string) (int32, error) {
	return unmarshalEnum(b, func(name string) (int32, bool) {
		for i, n := range names {
			if n == name {
				return int32(i), true
			}
		}
		return 0, false
	})
}

// FileType is envd's file type enum, named on the wire.
type FileType int32

// File types.
const (
	FileTypeUnspecified FileType = 0
	FileTypeFile        FileType = 1
	FileTypeDirectory   FileType = 2
	FileTypeSymlink     FileType = 3
)

var fileTypeNames = []string{"FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE", "FILE_TYPE_DIRECTORY", "FILE_TYPE_SYMLINK"}

// MarshalJSON writes the enum name.
func (t FileType) MarshalJSON() ([]byte, error) { return marshalNamed(int32(t), fileTypeNames) }

// UnmarshalJSON accepts a name or a number.
func (t *FileType) UnmarshalJSON(b []byte) error {
	v, err := unmarshalNamed(b, fileTypeNames)
	*t = FileType(v)
	return err
}

func marshalEnum(v int32, name string) ([]byte, error) {
	if name == "" {
		return []byte(strconv.Itoa(int(v))), nil
	}
	return json.Marshal(name)
}

func unmarshalEnum(b []byte, byName func(string) (int32, bool)) (int32, error) {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		if v, ok := byName(name); ok {
			return v, nil
		}
		return 0, fmt.Errorf("unknown enum value %q", name)
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return 0, fmt.Errorf("enum: %w", err)
	}
	return n, nil
}

// Timestamp is a google.protobuf.Timestamp: RFC 3339 in UTC with zero,
// three, six or nine fractional digits, as protojson writes and parsers
// insist on.
type Timestamp struct{ time.Time }

// MarshalJSON writes nanosecond precision in UTC.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format("2006-01-02T15:04:05.000000000Z"))
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// UploadedEntry is one element of the reply of POST /files.
type UploadedEntry struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}
