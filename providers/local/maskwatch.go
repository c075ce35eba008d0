//go:build linux

package local

import (
	"encoding/binary"
	"hash/crc32"
	"net"
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
// its low priority the check may take longer than a start waits). A
// change of the host's mounts, which no inotify event reports, already
// keeps a start from claiming the standby (see standbyKey).

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
	mu sync.Mutex
	fd int // the inotify instance; -1 when closed or never opened
	// cache is what verify watches and checks, and digest its file's
	// digest (cacheDigest).
	cache  maskCache
	digest uint64
	// verified is digest once verify found the stamps current with every
	// watch in place; 0 until then.
	verified atomic.Uint64
}

// noMaskWatch is a watch that vouches for nothing.
func noMaskWatch() *maskWatch { return &maskWatch{fd: -1} }

// cacheDigest is the digest a watch vouches for: the cache file's length
// and CRC-32C (the processor computes it; FNV-1a of the 90 KB a root's
// cache holds was a hundredth of a create's CPU), never 0 (0 says
// "nothing vouched for"). It tells apart the versions of a file that only
// this program writes, not files made to collide.
func cacheDigest(b []byte) uint64 {
	return max(uint64(len(b))<<32|uint64(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))), 1)
}

// watchMasks opens a watch on the masks cache of the provider whose
// standby directory is dirFD (the cache lies beside it), for verify. It
// never fails: a watch that could not open vouches for nothing.
func watchMasks(dirFD int) *maskWatch {
	w := noMaskWatch()
	b, err := readAtFD(dirFD, "../"+maskCacheFile)
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
	w.fd, w.cache, w.digest = in, c, cacheDigest(b)
	return w
}

// verify watches every path of the cache and the directories on their
// way, then checks the cache's stamps (without owners, which this user
// namespace may not show: a change of owner shows in a path's ctime, and
// once watched as an event); when they hold, the watch vouches for the
// cache. The standby runs it beside the rest of its start.
func (w *maskWatch) verify() {
	if w.digest == 0 {
		return
	}
	for _, e := range w.cache.watch {
		// Watched through its parent only: it must not be a link.
		if len(e) > 1 && e[0] == stampPerms {
			if _, ok := lstatNoLink(e[1:]); !ok {
				return
			}
		}
	}
	for _, p := range watchedPaths(w.cache.watch) {
		// A path that does not exist cannot be watched, and a link
		// resolves through directories nobody watches.
		st, ok := lstatNoLink(p)
		if !ok {
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
	if w.cache.ownerless == "" || stampSum(w.cache.watch, false) != w.cache.ownerless {
		return
	}
	w.verified.Store(w.digest)
}

// lstatNoLink is p's own state, when p exists and is not a symbolic link.
func lstatNoLink(p string) (unix.Stat_t, bool) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return st, false
	}
	return st, true
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
	if w.fd < 0 {
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
	if w.fd < 0 {
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
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// handTo writes msg to the claimer on c with the watch's descriptor, and
// closes the watch here. An inotify instance's end frees its marks one by
// one (~1 µs each, in the kernel) and waits for an RCU grace period: 2-3
// ms that slowed a start by as much beside it, and a one-off exec's delete
// when its init ended with the watch open. The claimer gives the
// descriptor to the next standby machine it starts, which closes it once
// it is ready, off everyone's way (see runStandby); what is closed here
// is then only a reference.
func (w *maskWatch) handTo(c *net.UnixConn, msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var oob []byte
	if w.fd >= 0 {
		oob = unix.UnixRights(w.fd)
	}
	_, _, err := c.WriteMsgUnix(msg, oob, nil)
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	return err
}

// claimAnswer is a standby's answer to a claim: claimByte, then the
// digest its watch vouches for (see maskWatch), little-endian.
func claimAnswer(vouched uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{claimByte}, vouched)
}
