package engine

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestStoreConcurrentPuts(t *testing.T) {
	t.Parallel()
	s := NewStore(t.TempDir())
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put(Record{ID: fmt.Sprintf("sb-%02d", i), Provider: "local", CreatedAt: time.Unix(int64(i), 0)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	all, err := s.All()
	if err != nil || len(all) != 40 {
		t.Fatalf("All = %d records, %v; want 40 (lost updates)", len(all), err)
	}
	if all[0].ID != "sb-00" || all[39].ID != "sb-39" {
		t.Fatalf("not sorted by creation: %s..%s", all[0].ID, all[39].ID)
	}
	if err := s.Remove("sb-05"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get("sb-05"); ok {
		t.Fatal("removed record still present")
	}
	if r, ok, _ := s.Get("sb-06"); !ok || r.Provider != "local" {
		t.Fatalf("Get sb-06 = %+v, %v", r, ok)
	}
}

func TestStoreCorruptFile(t *testing.T) {
	t.Parallel()
	s := NewStore(t.TempDir())
	os.WriteFile(s.Path(), []byte("{not json"), 0o600)
	if _, err := s.All(); err == nil {
		t.Fatal("corrupt state must be reported")
	}
}

// TestReplaceFileReusesInodes: the state file is replaced atomically by
// exchanging it with its spare, so that a write after the first allocates
// no inode: the file and its spare keep swapping the same two, and nothing
// else is left beside them. The spare is overwritten in place: a shorter
// content ("5" into the spare that held "three") leaves nothing of the
// longer one.
func TestReplaceFileReusesInodes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	inode := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	var inodes map[uint64]bool
	for i, content := range []string{"one", "two", "three", "four", "5", "six"} {
		if err := replaceFile(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Fatalf("write %d: read %q, %v; want %q", i, got, err, content)
		}
		if i == 0 {
			continue
		}
		now := map[uint64]bool{inode(path): true, inode(filepath.Join(dir, ".state.json.next")): true}
		if inodes != nil && !maps.Equal(now, inodes) {
			t.Errorf("write %d: inodes %v, were %v: the write allocated one", i, now, inodes)
		}
		inodes = now
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("left beside the file: %v, want only the spare", entries)
	}
}
