//go:build linux

package local

import (
	"encoding/binary"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A start as root checks that the host's secrets have not changed since
// its masks were cached, by stating every directory the cached scan read
// (stampSum: a few thousand paths, most of the CPU a start spends beside
// its init's). A standby machine does that check once, ahead of need, and
// then watches every one of those paths with inotify: a claim that finds
// no event since is told the cache is current (the digest of the cache
// file it verified), and the start skips its own check. Anything the
// watch cannot vouch for (a path it cannot watch, a symbolic link on the
// way, a stamp that changed, an event, a full queue) leaves the start to
// check as before, and so does a claim that comes before the standby's
// check ended (the standby does not wait for it to say it is ready: at
// its low priority the check may take longer than a start waits). A change of the host's mounts, which no
// inotify event reports, already keeps a start from claiming the standby
// (see standbyKey).

// maxMaskWatches bounds the paths a standby watches: a scan larger than
// this is checked by each start, as before, rather than hold that many
// inotify watches for ten minutes.
const maxMaskWatches = 20000

// Events that may change what a path of the cached scan resolves to or
// holds: an entry made, removed or renamed in a watched directory, the
// metadata (mode, owner, times, links) of a watched path or of an entry
// in it, a watched path moved or removed. A watched file (the password
// file) counts its writes too; a directory's entries' writes do not
// change what the scan found (it reads no file's contents).
const (
	maskDirEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	maskFileEvents = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

// maskWatch is a standby init's watch over the paths of the cached scan.
type maskWatch struct {
	mu     sync.Mutex
	fd     int // the inotify instance; -1 when closed or never opened
	closed bool
	// verified is the digest (cacheDigest) of the cache file whose stamps
	// the watch found current once every watch was in place; 0 until then.
	verified atomic.Uint64
	// done is closed once the check ended.
	done chan struct{}
}

// noMaskWatch is a watch that vouches for nothing.
func noMaskWatch() *maskWatch {
	w := &maskWatch{fd: -1, done: make(chan struct{})}
	close(w.done)
	return w
}

// cacheDigest is the digest a watch vouches for: FNV-1a of the cache
// file's bytes, never 0 (0 says "nothing vouched for").
func cacheDigest(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return max(h.Sum64(), 1)
}

// watchMasks starts watching the paths of the masks cache of the provider
// whose standby directory is dirFD (the cache lies beside it), and checks
// them in the background (wait waits for the check). It never fails: a
// watch that could not start vouches for nothing.
func watchMasks(dirFD int) *maskWatch {
	w := noMaskWatch()
	fd, err := unix.Openat(dirFD, "../"+maskCacheFile, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return w
	}
	f := os.NewFile(uintptr(fd), maskCacheFile)
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return w
	}
	c, ok := decodeMaskCache(b)
	if !ok || len(c.watch) > maxMaskWatches {
		return w
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return w
	}
	w.fd = in
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		w.verify(c, cacheDigest(b))
	}()
	return w
}

// wait returns once the check of the watched paths ended.
func (w *maskWatch) wait() { <-w.done }

// verify watches every path of c and the directories on their way, then
// checks c's stamps (without owners, which this user namespace may not
// show: a change of owner shows in a path's ctime, and once watched as an
// event); when they hold, the watch vouches for digest.
func (w *maskWatch) verify(c maskCache, digest uint64) {
	for _, e := range c.watch {
		var st unix.Stat_t
		if len(e) > 1 && e[0] == stampPerms && (unix.Lstat(e[1:], &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK) {
			return // watched through its parent only: no link
		}
	}
	for _, p := range watchedPaths(c.watch) {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// A path that does not exist cannot be watched, and a link
			// resolves through directories nobody watches.
			return
		}
		events := uint32(maskFileEvents)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			events = maskDirEvents | unix.IN_ONLYDIR
		}
		if !w.add(p, events|unix.IN_DONT_FOLLOW) {
			return
		}
	}
	if c.ownerless == "" || stampSum(c.watch, false) != c.ownerless {
		return
	}
	w.verified.Store(digest)
}

// watchedPaths are the paths of watch (stamps' entries: a kind, then the
// path) and every directory on their way, each once, ancestors first. A
// directory stamped for its permissions alone (stampPerms: the scan does
// not read it, and hides it whole) is watched through its parent, whose
// watch reports its metadata and its removal: it may be one this user
// namespace cannot read.
func watchedPaths(watch []string) []string {
	seen := make(map[string]bool, len(watch))
	var out []string
	var add func(p string)
	add = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		if parent := filepath.Dir(p); parent != p {
			add(parent)
		}
		out = append(out, p)
	}
	for _, e := range watch {
		if len(e) < 2 || !filepath.IsAbs(e[1:]) {
			continue
		}
		p := filepath.Clean(e[1:])
		if e[0] == stampPerms {
			p = filepath.Dir(p)
		}
		add(p)
	}
	return out
}

// add adds a watch on p; false when the watch is closed or the kernel
// refused it (a limit, a permission).
func (w *maskWatch) add(p string, events uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	_, err := unix.InotifyAddWatch(w.fd, p, events)
	return err == nil
}

// vouch is the digest of the cache file the watch found current and saw
// no change to since (0: none).
func (w *maskWatch) vouch() uint64 {
	d := w.verified.Load()
	if d == 0 {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0
	}
	var buf [4096]byte
	if n, err := unix.Read(w.fd, buf[:]); n > 0 || err != unix.EAGAIN {
		return 0 // an event (or an overflow), or a queue it cannot read
	}
	return d
}

// close ends the watch.
func (w *maskWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// claimAnswer is a standby's answer to a claim: claimByte, then the
// digest its watch vouches for (see maskWatch), little-endian.
func claimAnswer(vouched uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{claimByte}, vouched)
}
