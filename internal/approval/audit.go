package approval

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/output"
)

// Event types.
const (
	// EventRequested is sent when a request reaches the gate, before it is
	// decided.
	EventRequested = "requested"
	// EventDecision is sent once a request is allowed or denied.
	EventDecision = "decision"
	// EventOperation is sent once an allowed operation has finished.
	EventOperation = "operation"
)

// Event is what the Gate reports to GateOptions.OnEvent, in process (the
// TUI); Public turns it into the events of the schema that `--json` runs
// print and the audit log records. Secrets are already masked.
type Event struct {
	// Type is EventRequested, EventDecision or EventOperation.
	Type string
	Time time.Time
	// CallID names the call; its events share it.
	CallID string
	// Step and Line place a call made for a step of a plan (WithStep).
	Step, Line int
	Request    Request
	// Decision is the decision (decision and operation events).
	Decision Decision
	// ExitCode is the status of an exec that ran (operation events only).
	ExitCode *int
	// Error is the operation's error, or why a request was not decided.
	Error string
	// Duration is how long the operation ran (operation events only);
	// DurationMS is the same in milliseconds.
	Duration   time.Duration
	DurationMS int64

	// denial is the message of a denied request; cancelled is set when
	// Error is an interrupt.
	denial    string
	cancelled bool
}

// AuditLog appends the call events of package events to a file as JSON
// Lines: a call's call.requested and call.decided when it is decided, its
// call.completed when it has run (or, denied, with its decision).
//
// Each record is written with exactly one write(2) on a file opened with
// O_APPEND, under an exclusive flock(2) of the file that every sandbox
// process takes, and a mutex orders goroutines; so records of concurrent
// processes never interleave. A record always starts on a line of its
// own: before each write the log's last byte is read, and when it is not
// a newline (a record torn by a full disk or a crash, in this or another
// process) the record is written with a newline in front of it, in the
// same write. The torn line is kept, as evidence, on its own line; a
// reader skips the one line that does not parse. A write this log leaves
// partial (a short write on a full disk) is truncated away at once.
//
// A nil *AuditLog discards records.
type AuditLog struct {
	mu   sync.Mutex
	f    auditFile
	path string
	err  error
}

// auditFile is the file under an AuditLog; tests inject one that fails.
type auditFile interface {
	// lock takes the exclusive lock that orders writers across processes.
	lock() (unlock func(), err error)
	// tail returns the file's size and its last byte ('\n' when empty).
	tail() (size int64, last byte, err error)
	// writeOnce appends p with a single write(2) and says how much of it
	// was written.
	writeOnce(p []byte) (int, error)
	// truncate cuts the file back to size.
	truncate(size int64) error
	Close() error
}

// OpenAudit opens (creating it and its directory when missing) the audit
// log at path for appending. The file is private to the user (0600).
func OpenAudit(path string) (*AuditLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &AuditLog{f: osAuditFile{f}, path: path}, nil
}

// Path returns the file the log appends to.
func (a *AuditLog) Path() string {
	if a == nil {
		return ""
	}
	return a.path
}

// Write appends evs, one line each, as one record. It is safe for
// concurrent use. The first error is also kept for Err.
func (a *AuditLog) Write(evs ...events.Event) error {
	if a == nil || len(evs) == 0 {
		return nil
	}
	var line []byte
	for _, ev := range evs {
		b, err := output.Marshal(ev)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		line = append(append(line, b...), '\n')
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return errors.New("audit: log is closed")
	}
	if err := a.append(line); err != nil {
		err = fmt.Errorf("audit %s: %w", a.path, err)
		if a.err == nil {
			a.err = err
		}
		return err
	}
	return nil
}

// append writes line at the end of the file, on a line of its own, with
// one write(2), holding the lock.
func (a *AuditLog) append(line []byte) error {
	unlock, err := a.f.lock()
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer unlock()
	size, last, err := a.f.tail()
	if err != nil {
		return fmt.Errorf("read the end of the log: %w", err)
	}
	if last != '\n' {
		line = append([]byte{'\n'}, line...) // repair a torn last line
	}
	n, err := a.f.writeOnce(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 {
			// Leave no partial record behind; should this fail too, the
			// next record still starts on a line of its own.
			_ = a.f.truncate(size)
		}
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// Err returns the first error a Write met, so that a run can report at
// exit that its audit trail is incomplete.
func (a *AuditLog) Err() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Close closes the file; later writes fail.
func (a *AuditLog) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	if err != nil {
		return fmt.Errorf("close audit log: %w", err)
	}
	return nil
}

// osAuditFile is an auditFile on a real file, opened O_RDWR|O_APPEND.
type osAuditFile struct{ f *os.File }

func (o osAuditFile) lock() (func(), error) {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if lerr = unix.Flock(int(fd), unix.LOCK_EX); lerr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	if lerr != nil {
		return nil, lerr
	}
	return func() {
		_ = rc.Control(func(fd uintptr) { _ = unix.Flock(int(fd), unix.LOCK_UN) })
	}, nil
}

func (o osAuditFile) tail() (int64, byte, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if fi.Size() == 0 {
		return 0, '\n', nil
	}
	var b [1]byte
	if _, err := o.f.ReadAt(b[:], fi.Size()-1); err != nil {
		return 0, 0, err
	}
	return fi.Size(), b[0], nil
}

// writeOnce calls write(2) once: os.File.Write would retry a short write,
// which on a full disk only tears the record further.
func (o osAuditFile) writeOnce(p []byte) (int, error) {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		n    int
		werr error
	)
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Write(int(fd), p)
			if werr != unix.EINTR {
				return true
			}
		}
	}); err != nil {
		return 0, err
	}
	return max(n, 0), werr
}

func (o osAuditFile) truncate(size int64) error { return o.f.Truncate(size) }

func (o osAuditFile) Close() error { return o.f.Close() }
