//go:build linux

package local

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWatchedPaths: every path of a watch list and each directory on its
// way, once, ancestors first; a directory stamped for its permissions
// alone through its parent.
func TestWatchedPaths(t *testing.T) {
	tests := []struct {
		name  string
		watch []string
		want  []string
	}{
		{"one", []string{"f/etc"}, []string{"/", "/etc"}},
		{"nested", []string{"f/etc", "f/etc/ssl", "f/usr/local"}, []string{"/", "/etc", "/etc/ssl", "/usr", "/usr/local"}},
		{"perms through the parent", []string{"f/etc", "p/etc/polkit-1/rules.d"}, []string{"/", "/etc", "/etc/polkit-1"}},
		{"a file", []string{"f/etc/passwd"}, []string{"/", "/etc", "/etc/passwd"}},
		{"relative and empty left out", []string{"fetc", "f", ""}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := watchedPaths(tt.watch); !slices.Equal(got, tt.want) {
				t.Errorf("watchedPaths(%q) = %q, want %q", tt.watch, got, tt.want)
			}
		})
	}
}

// maskWatchTree is a tree stamped as a root scan stamps the host: t, the
// directories a and a/b read (stampFull), a file in a, a directory p
// hidden whole (stampPerms) and a watched file; its cache lies beside a
// standby directory, as a provider's does. It lives under /dev/shm when
// there is one, whose ancestors no other test writes in (a change in an
// ancestor of a watched path ends the watch's vouching).
type maskWatchTree struct {
	dir, standby string
	cache        []byte
}

func newMaskWatchTree(t *testing.T, extra ...string) *maskWatchTree {
	t.Helper()
	base, err := os.MkdirTemp("/dev/shm", "maskwatch-")
	if err != nil {
		base = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(base) })
	}
	tr := &maskWatchTree{dir: filepath.Join(base, "tree"), standby: filepath.Join(base, "prov", standbyDir)}
	for _, d := range []string{filepath.Join(tr.dir, "a/b"), filepath.Join(tr.dir, "p"), tr.standby} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/f", "file"} {
		if err := os.WriteFile(filepath.Join(tr.dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := newStamps()
	for _, d := range []string{"", "a", "a/b"} {
		st.add(stampFull, filepath.Join(tr.dir, d))
	}
	st.add(stampPerms, filepath.Join(tr.dir, "p"))
	st.add(stampFull, filepath.Join(tr.dir, "file"))
	for _, e := range extra {
		st.add(stampFull, e)
	}
	tr.cache = maskCache{key: "test", sum: st.sum(), ownerless: st.ownerlessSum(), masks: []string{filepath.Join(tr.dir, "p")}, watch: st.watch}.encode()
	if err := os.WriteFile(filepath.Join(filepath.Dir(tr.standby), maskCacheFile), tr.cache, 0o600); err != nil {
		t.Fatal(err)
	}
	return tr
}

// watch starts a standby's watch on the tree and runs its check.
func (tr *maskWatchTree) watch(t *testing.T) *maskWatch {
	t.Helper()
	fd, err := unix.Open(tr.standby, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	w := watchMasks(fd)
	t.Cleanup(w.close)
	w.verify()
	return w
}

// TestMaskWatch: a standby's watch vouches for the cache it checked until
// a change that may change what the scan finds (an entry made, removed
// or renamed in a directory the scan read, the mode of one of its paths
// or of an entry in one, a write to a watched file, a hidden directory
// removed or its mode changed); a write to a file's contents in a read
// directory changes nothing the scan found. It never vouches for a cache
// whose stamps changed before the watch, nor for one with a path it
// cannot watch (gone, a symbolic link).
func TestMaskWatch(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		change  func(dir string)
		vouched bool
	}{
		{"nothing", func(string) {}, true},
		{"contents of a file in a read directory", func(d string) { must(os.WriteFile(filepath.Join(d, "a/f"), []byte("changed"), 0o644)) }, true},
		{"entry made", func(d string) { must(os.WriteFile(filepath.Join(d, "a/new"), nil, 0o600)) }, false},
		{"entry removed", func(d string) { must(os.Remove(filepath.Join(d, "a/f"))) }, false},
		{"directory renamed", func(d string) { must(os.Rename(filepath.Join(d, "a/b"), filepath.Join(d, "a/c"))) }, false},
		{"mode of a read directory", func(d string) { must(os.Chmod(filepath.Join(d, "a"), 0o700)) }, false},
		{"mode of an entry", func(d string) { must(os.Chmod(filepath.Join(d, "a/f"), 0o600)) }, false},
		{"watched file written", func(d string) { must(os.WriteFile(filepath.Join(d, "file"), []byte("more"), 0o644)) }, false},
		{"hidden directory's mode", func(d string) { must(os.Chmod(filepath.Join(d, "p"), 0o700)) }, false},
		{"hidden directory removed", func(d string) { must(os.Remove(filepath.Join(d, "p"))) }, false},
		{"read directory replaced", func(d string) {
			must(os.Rename(filepath.Join(d, "a"), filepath.Join(d, "old")))
			must(os.Mkdir(filepath.Join(d, "a"), 0o755))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// An unrelated change in an ancestor (/dev/shm, /) also ends
			// the vouching: a vouched case tries again.
			for attempt := 1; ; attempt++ {
				tr := newMaskWatchTree(t)
				w := tr.watch(t)
				want := cacheDigest(tr.cache)
				if got := w.vouch(); got != want {
					if attempt < 3 {
						continue
					}
					t.Fatalf("before any change: vouch() = %x, want %x", got, want)
				}
				tt.change(tr.dir)
				got := w.vouch()
				if tt.vouched && got != want && attempt < 3 {
					continue
				}
				if (got == want) != tt.vouched || got != want && got != 0 {
					t.Errorf("vouch() = %x after the change, want vouched %v (%x)", got, tt.vouched, want)
				}
				break
			}
		})
	}
	t.Run("stamps changed before the watch", func(t *testing.T) {
		tr := newMaskWatchTree(t)
		must(os.WriteFile(filepath.Join(tr.dir, "a/new"), nil, 0o600))
		if got := tr.watch(t).vouch(); got != 0 {
			t.Errorf("vouch() = %x, want 0", got)
		}
	})
	t.Run("a path that is gone", func(t *testing.T) {
		base := t.TempDir()
		tr := newMaskWatchTree(t, filepath.Join(base, "missing"))
		if got := tr.watch(t).vouch(); got != 0 {
			t.Errorf("vouch() = %x, want 0", got)
		}
	})
	t.Run("a symbolic link", func(t *testing.T) {
		base := t.TempDir()
		must(os.Symlink(base, filepath.Join(base, "link")))
		tr := newMaskWatchTree(t, filepath.Join(base, "link"))
		if got := tr.watch(t).vouch(); got != 0 {
			t.Errorf("vouch() = %x, want 0", got)
		}
	})
	t.Run("no cache", func(t *testing.T) {
		tr := newMaskWatchTree(t)
		must(os.Remove(filepath.Join(filepath.Dir(tr.standby), maskCacheFile)))
		if got := tr.watch(t).vouch(); got != 0 {
			t.Errorf("vouch() = %x, want 0", got)
		}
	})
	t.Run("closed", func(t *testing.T) {
		tr := newMaskWatchTree(t)
		w := tr.watch(t)
		w.close()
		if got := w.vouch(); got != 0 {
			t.Errorf("vouch() after close = %x, want 0", got)
		}
	})
}
