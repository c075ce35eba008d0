package approval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Event types.
const (
	// EventDecision is sent once a request is allowed or denied.
	EventDecision = "decision"
	// EventOperation is sent once an allowed operation has finished.
	EventOperation = "operation"
)

// Event is what the Gate reports to GateOptions.OnEvent and what `--json`
// runs print, one JSON object a line. Field names are snake_case and
// stable. Secrets are already masked.
type Event struct {
	// Type is EventDecision or EventOperation.
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Request  Request   `json:"request"`
	Decision Decision  `json:"decision"`
	// ExitCode is the status of an exec that ran (operation events only).
	ExitCode *int `json:"exit_code,omitempty"`
	// Error is the operation's error, or why a request was not decided.
	Error string `json:"error,omitempty"`
	// Duration is how long the operation ran (operation events only);
	// DurationMS is the same in milliseconds, for JSON.
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms"`
}

// AuditRecord is one line of the audit log: a request, its decision and,
// when it ran, its outcome.
type AuditRecord struct {
	Time time.Time `json:"time"`
	// Source is who asked (user, script, agent, mcp, setup).
	Source   Source `json:"source"`
	Kind     Kind   `json:"kind"`
	Target   string `json:"target"`
	Dest     string `json:"dest,omitempty"`
	Provider string `json:"provider"`
	Sandbox  string `json:"sandbox"`
	// Decision is "allow" or "deny".
	Decision string `json:"decision"`
	By       string `json:"by"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// ExitCode is set for an exec that ran.
	ExitCode   *int   `json:"exit_code,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// AuditLog appends AuditRecords to a file as JSON Lines. Each record is
// written with a single write(2) on a file opened with O_APPEND, so
// records from concurrent processes do not interleave within a line, and
// a mutex orders goroutines. A nil *AuditLog discards records.
type AuditLog struct {
	mu   sync.Mutex
	f    *os.File
	path string
	err  error
}

// OpenAudit opens (creating it and its directory when missing) the audit
// log at path for appending. The file is private to the user (0600).
func OpenAudit(path string) (*AuditLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &AuditLog{f: f, path: path}, nil
}

// Path returns the file the log appends to.
func (a *AuditLog) Path() string {
	if a == nil {
		return ""
	}
	return a.path
}

// Write appends one record as one line. It is safe for concurrent use. The
// first error is also kept for Err.
func (a *AuditLog) Write(rec AuditRecord) error {
	if a == nil {
		return nil
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return fmt.Errorf("audit: log is closed")
	}
	if _, err := a.f.Write(line); err != nil {
		err = fmt.Errorf("audit: %w", err)
		if a.err == nil {
			a.err = err
		}
		return err
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
