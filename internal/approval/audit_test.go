package approval

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/agentbox/sandbox/internal/events"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// memFile is an auditFile in memory whose writes fail on demand, like a
// file on a full disk: a failing write stores partial bytes of the record
// (a short write) and then reports ENOSPC.
type memFile struct {
	mu   sync.Mutex
	data []byte
	// okWrites is how many writes succeed before they start failing; -1
	// means they never fail.
	okWrites int
	// partial is how many bytes a failing write still stores.
	partial int
	writes  int // write(2) calls
}

func (m *memFile) lock() (func(), error) { return func() {}, nil }

func (m *memFile) tail() (int64, byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.data) == 0 {
		return 0, '\n', nil
	}
	return int64(len(m.data)), m.data[len(m.data)-1], nil
}

func (m *memFile) writeOnce(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.okWrites >= 0 && m.writes > m.okWrites {
		n := min(m.partial, len(p))
		m.data = append(m.data, p[:n]...)
		return n, syscall.ENOSPC
	}
	m.data = append(m.data, p...)
	return len(p), nil
}

func (m *memFile) truncate(size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = m.data[:size]
	return nil
}

func (m *memFile) Close() error { return nil }

func (m *memFile) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return string(m.data)
}

func TestAuditWriteFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		file     *memFile
		records  int
		wantErrs int
		// wantLines is how many whole records the log ends with.
		wantLines int
	}{
		{"all written", &memFile{okWrites: -1}, 3, 0, 3},
		{"full disk from the start", &memFile{okWrites: 0}, 2, 2, 0},
		{"short write is truncated away", &memFile{okWrites: 1, partial: 7}, 3, 2, 1},
		{"disk full after two", &memFile{okWrites: 2, partial: 1}, 4, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &AuditLog{f: tt.file, path: "audit.jsonl"}
			errs := 0
			for range tt.records {
				if err := a.Write(events.Event{Type: events.CallRequested, Kind: "exec", Target: "ls"}); err != nil {
					if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "audit audit.jsonl: write: ") {
						t.Fatalf("error = %v", err)
					}
					errs++
				}
			}
			if errs != tt.wantErrs {
				t.Fatalf("%d errors, want %d", errs, tt.wantErrs)
			}
			if (a.Err() != nil) != (tt.wantErrs > 0) {
				t.Fatalf("Err() = %v", a.Err())
			}
			if tt.file.writes != tt.records {
				t.Fatalf("%d write calls for %d records, want one each", tt.file.writes, tt.records)
			}
			data := tt.file.String()
			if data != "" && !strings.HasSuffix(data, "\n") {
				t.Fatalf("the log ends torn: %q", data)
			}
			lines := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
			if data == "" {
				lines = nil
			}
			if len(lines) != tt.wantLines {
				t.Fatalf("%d lines, want %d: %q", len(lines), tt.wantLines, data)
			}
			for _, l := range lines {
				var rec events.Event
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("bad line %q: %v", l, err)
				}
			}
		})
	}
}

func TestAuditRepairsTornTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, before string
	}{
		{"torn record", `{"time":"2025-01-02T03:04:05Z","kind":"ex`},
		{"one byte", `{`},
		{"whole records then a torn one", "{\"kind\":\"exec\"}\n{\"kind\":\"re"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "audit.jsonl")
			if err := os.WriteFile(file, []byte(tt.before), 0o600); err != nil {
				t.Fatal(err)
			}
			a, err := OpenAudit(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, target := range []string{"first", "second"} {
				if err := a.Write(events.Event{Type: events.CallRequested, Kind: "exec", Target: target}); err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rest, ok := strings.CutPrefix(string(data), tt.before+"\n")
			if !ok {
				t.Fatalf("the torn line was not ended with a newline:\n%q", data)
			}
			lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("want two records after the torn line, got %q", rest)
			}
			for i, want := range []string{"first", "second"} {
				var rec events.Event
				if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil || rec.Target != want {
					t.Fatalf("record %d = %q (%v)", i, lines[i], err)
				}
			}
		})
	}
}

// TestAuditDevFull writes to a real device that is always full.
func TestAuditDevFull(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("/dev/full (a device that is always full) is missing: %v", err)
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.Symlink("/dev/full", file); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(file)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Write(events.Event{Type: events.CallRequested, Kind: "exec"}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("error = %v, want ENOSPC", err)
	}
}

func TestGateAuditRequired(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		file     *memFile
		required bool
		// ran says whether the provider was reached.
		ran     bool
		wantErr string // "" for none
		wantRan bool   // AuditError.Ran
		// wantTypes are the types of the events written.
		wantTypes []string
	}{
		{"not required, disk full: runs unaudited", &memFile{okWrites: 0}, false, true, "", false, nil},
		{"required, disk fine: started then outcome", &memFile{okWrites: -1}, true, true, "", false, []string{events.CallRequested, events.CallDecided, events.CallCompleted}},
		{"required, disk full: refused", &memFile{okWrites: 0}, true, false, "refused exec \"echo hi\": the audit log cannot be written", false, nil},
		{"required, full after the start: ran, error", &memFile{okWrites: 1}, true, true, "exec \"echo hi\" ran, but the audit log could not record it", true, []string{events.CallRequested, events.CallDecided}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := seededFake()
			g := NewGate(fake, GateOptions{
				Policy:        mustPolicy(t, "allow: [\"exec:echo *\"]\n"),
				Audit:         &AuditLog{f: tt.file, path: "audit.jsonl"},
				AuditRequired: tt.required,
			})
			_, err := g.Exec(context.Background(), "sb", providers.ExecRequest{Shell: "echo hi"})
			if ran := len(fake.Calls()) > 0; ran != tt.ran {
				t.Fatalf("provider reached = %v, want %v (calls %v)", ran, tt.ran, fake.Calls())
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("error = %v", err)
				}
			} else {
				var aerr *AuditError
				if !errors.As(err, &aerr) || aerr.Ran != tt.wantRan || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("error = %v, want an *AuditError (ran %v) saying %q", err, tt.wantRan, tt.wantErr)
				}
				if IsDenied(err) {
					t.Fatal("an audit failure is not a denial")
				}
			}
			var types []string
			for l := range strings.Lines(tt.file.String()) {
				var rec events.Event
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("bad line %q", l)
				}
				types = append(types, rec.Type)
			}
			if strings.Join(types, ",") != strings.Join(tt.wantTypes, ",") {
				t.Fatalf("types %q, want %q:\n%s", types, tt.wantTypes, tt.file.String())
			}
		})
	}
}

func TestGateAuditRequiredDenialStaysDenied(t *testing.T) {
	t.Parallel()
	fake := seededFake()
	g := NewGate(fake, GateOptions{Audit: &AuditLog{f: &memFile{okWrites: 0}, path: "a"}, AuditRequired: true})
	_, err := g.Exec(WithSource(context.Background(), SourceAgent), "sb", providers.ExecRequest{Shell: "rm -rf /"})
	if !IsDenied(err) || len(fake.Calls()) != 0 {
		t.Fatalf("error = %v, calls %v", err, fake.Calls())
	}
	// Required, but no log at all: nothing runs.
	noLog := seededFake()
	g = NewGate(noLog, GateOptions{AuditRequired: true, Policy: &Policy{Yes: true}})
	if _, err := g.Exec(context.Background(), "sb", providers.ExecRequest{Shell: "ls"}); err == nil || !strings.Contains(err.Error(), "no audit log is open") || len(noLog.Calls()) != 0 {
		t.Fatalf("without a log: %v, calls %v", err, noLog.Calls())
	}
}
