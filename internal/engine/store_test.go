package engine

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
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
