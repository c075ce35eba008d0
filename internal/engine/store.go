package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/gofrs/flock"
)

// Record is what the tool remembers about a sandbox it created, so that
// `--sandbox-id` finds the provider, `list` shows deadlines and
// `delete --expired` can enforce --ttl.
type Record struct {
	ID        string            `json:"id"`
	Provider  string            `json:"provider"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
}

// Store is the registry of created sandboxes: one JSON file guarded by an
// advisory file lock, so concurrent invocations never lose each other's
// updates. Writes replace the file atomically.
type Store struct {
	path string
}

// NewStore returns a store kept in dir/sandboxes.json.
func NewStore(dir string) *Store {
	return &Store{path: filepath.Join(dir, "sandboxes.json")}
}

// Path is the file holding the records.
func (s *Store) Path() string { return s.path }

// Get returns the record for id, or ok=false.
func (s *Store) Get(id string) (rec Record, ok bool, err error) {
	err = s.update(false, func(m map[string]Record) error {
		rec, ok = m[id]
		return nil
	})
	return rec, ok, err
}

// All returns every record sorted by creation time.
func (s *Store) All() ([]Record, error) {
	var out []Record
	err := s.update(false, func(m map[string]Record) error {
		for _, r := range m {
			out = append(out, r)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].ID < out[j].ID
		}
		return out[i].CreatedAt.Before(out[j].CreatedAt)
	})
	return out, err
}

// Put adds or replaces a record.
func (s *Store) Put(r Record) error {
	return s.update(true, func(m map[string]Record) error {
		m[r.ID] = r
		return nil
	})
}

// Remove forgets id; forgetting an unknown id is not an error.
func (s *Store) Remove(id string) error {
	return s.update(true, func(m map[string]Record) error {
		delete(m, id)
		return nil
	})
}

func (s *Store) update(write bool, fn func(map[string]Record) error) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	lock := flock.New(s.path + ".lock")
	var err error
	if write {
		err = lock.Lock()
	} else {
		err = lock.RLock()
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", s.path, err)
	}
	defer lock.Unlock()

	m := map[string]Record{}
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read state: %w", err)
	default:
		var recs []Record
		if err := json.Unmarshal(data, &recs); err != nil {
			return fmt.Errorf("state file %s is corrupt (move it away to start afresh): %w", s.path, err)
		}
		for _, r := range recs {
			m[r.ID] = r
		}
	}
	if err := fn(m); err != nil {
		return err
	}
	if !write {
		return nil
	}
	recs := make([]Record, 0, len(m))
	for _, r := range m {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	out, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".sandboxes-*.json")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}
