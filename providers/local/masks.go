//go:build linux

package local

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Host secrets that the sandbox's base (the host's /usr, /etc, /opt and
// /var, read-only below the sandbox's own layer) would otherwise show.
// Homes under /home and /root, and everything in /run and /tmp (agent
// sockets), are never mounted at all, and /var/tmp is every sandbox's own
// (see privateVarTmp); what is left is masked: an empty, read-only file
// over a file, an empty, read-only tmpfs over a directory.

// secretScanRoots are the host trees scanned, to their full depth, when
// the sandbox runs as root. Root inside is the host's root (uid and gid 0,
// without capabilities), so file permissions alone would let it read what
// the host keeps from every other user: /etc/ssl/private,
// /var/cache/debconf/passwords.dat, /opt/app/secrets/credentials in a
// directory only root may enter. The scan hides each entry that other
// users may not read (a file) or list and enter (a directory) and that the
// sandbox's root could (see hidden): the sandbox's root reads nothing the
// host would refuse an unprivileged user. Entries of other owners that
// root could not read either stay, so that the sandbox's own writes to
// them (apt's partial directories, owned by _apt) keep working. The rest
// of /usr holds the system's programs and libraries and is not scanned.
var secretScanRoots = []string{"/etc", "/opt", "/usr/local", "/var"}

// privateDirs are the host directories of the layers that every sandbox
// replaces with a directory of its own (see privateVarTmp): nothing of the
// host's shows there, and the scan leaves them out.
var privateDirs = []string{"/var/tmp"}

// maskRule names the rule of hostMasks in the key of its cache: a binary
// with another rule never uses a result computed by this one.
const maskRule = "rule=3"

// hostMasks lists the paths to hide in the sandbox, as absolute paths that
// lie in one of layers (the same path inside and on the host): the homes of
// the host's users and the invoking user's HOME where they live under a
// system directory (for example /var/lib/jenkins), and, for root, what the
// host hides from other users in secretScanRoots.
func hostMasks(layers []layer, uid int, home, passwd string) []string {
	return scanHostMasks(layers, uid, home, passwd, newStamps())
}

// scanHostMasks is hostMasks; it adds to st every path whose change may
// change its result, with its state before it was read.
func scanHostMasks(layers []layer, uid int, home, passwd string, st *stamps) []string {
	var masks []string
	add := func(p string) {
		if !slices.Contains(masks, p) {
			masks = append(masks, p)
		}
	}
	// A home is the user's own directory only if the user owns it: that
	// leaves out homes such as /usr/sbin or /var/mail that daemons share
	// with the system.
	ownedHome := func(p string, owner int) {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) || !underLayer(layers, p) {
			return
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			return
		}
		if s, ok := fi.Sys().(*syscall.Stat_t); ok && int(s.Uid) == owner {
			add(p)
		}
	}
	st.add(stampFull, passwd)
	for _, u := range passwdHomes(passwd) {
		ownedHome(u.home, u.uid)
	}
	if home != "" {
		st.add(stampFull, home)
		ownedHome(home, uid)
	}
	if uid == 0 {
		s := &secretScanner{groups: rootGroups(), stamps: st}
		for _, root := range secretScanRoots {
			s.scanTree(layers, root)
		}
		for _, p := range s.masks {
			add(p)
		}
	}
	slices.Sort(masks)
	return masks
}

// underLayer tells whether the absolute path p lies below one of layers.
func underLayer(layers []layer, p string) bool {
	for _, l := range layers {
		if strings.HasPrefix(p, "/"+l.Name+"/") {
			return true
		}
	}
	return false
}

// rootGroups are the groups whose permission bits apply to the sandbox's
// root: gid 0 and this process's groups, which its processes keep.
func rootGroups() []uint32 {
	groups := []uint32{0, uint32(os.Getgid())}
	if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			groups = append(groups, uint32(g))
		}
	}
	return groups
}

// secretScanner walks host trees for the entries that the sandbox's root
// could read and other users cannot (see secretScanRoots).
type secretScanner struct {
	// groups are rootGroups.
	groups []uint32
	// masks are the entries found.
	masks []string
	// stamps records the directories read, and the entries whose change
	// alone (without one of their directory) could make them secrets:
	// directories skipped because root may not enter them, and empty
	// files only root may read, which may be written to.
	stamps *stamps
}

// scanTree scans root and everything below it that lies on root's mount
// (an overlay shows nothing of the file systems mounted below its lower
// layer) when root is one of layers or lies in one.
func (s *secretScanner) scanTree(layers []layer, root string) {
	inLayer := underLayer(layers, root)
	if !inLayer && !slices.ContainsFunc(layers, func(l layer) bool { return "/"+l.Name == root }) {
		return
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return
	}
	if s.hidden(&st) {
		unix.Close(fd)
		if inLayer {
			s.masks = append(s.masks, root)
		}
		return
	}
	s.walk(fd, root, &st)
}

// walk scans the directory open as fd (which it closes), named dir and
// whose state is st, and the directories below it on its mount.
// Entries are read relative to their directory's descriptor, which spares
// a lookup of the whole path for each.
func (s *secretScanner) walk(fd int, dir string, st *unix.Stat_t) {
	s.stamps.addStat(stampFull, dir, st)
	f := os.NewFile(uintptr(fd), dir)
	entries, _ := f.ReadDir(-1)
	defer f.Close()
	for _, e := range entries {
		if e.Type()&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			continue
		}
		name := e.Name()
		p := dir + "/" + name
		var est unix.Stat_t
		if err := unix.Fstatat(fd, name, &est, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		switch est.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			switch {
			case est.Dev != st.Dev && mountPoint(fd, name) || slices.Contains(privateDirs, p):
			case s.hidden(&est):
				s.masks = append(s.masks, p)
			case !s.enterable(&est):
				s.stamps.addStat(stampPerms, p, &est)
			default:
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				// The state of the directory as it is read: a
				// change since the Fstatat above is seen later.
				if err := unix.Fstat(sub, &est); err != nil {
					unix.Close(sub)
					continue
				}
				s.walk(sub, p, &est)
			}
		case unix.S_IFREG:
			if !s.hidden(&est) {
				continue
			}
			if est.Size > 0 {
				s.masks = append(s.masks, p)
			} else {
				// Nothing to hide yet (lock files): the
				// first write changes its stamp.
				s.stamps.addStat(stampFull, p, &est)
			}
		}
	}
}

// mountPoint tells whether the directory name, in the directory open as fd
// and on another device, is a mount point: the overlay shows what lies
// beneath one, on its lower layer's own file system, not what is mounted
// there. Another device alone may be a btrfs subvolume, which the overlay
// does show; the mount ids tell (a kernel without them: a mount point).
func mountPoint(fd int, name string) bool {
	var dir, sub unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &dir) != nil || dir.Mask&unix.STATX_MNT_ID == 0 {
		return true
	}
	if unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sub) != nil || sub.Mask&unix.STATX_MNT_ID == 0 {
		return true
	}
	return dir.Mnt_id != sub.Mnt_id
}

// hidden tells whether the host keeps the entry from other users while
// the sandbox's root may have it. Root's own entries count whatever their
// owner bits say (capabilities over them would bypass these); one of
// another owner whose group is one of root's, when its group bits let root
// read it (a file) or list it (a directory).
func (s *secretScanner) hidden(st *unix.Stat_t) bool {
	dir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if dir && st.Mode&0o005 == 0o005 || !dir && st.Mode&0o004 != 0 {
		return false // others may read it too: not a secret
	}
	switch {
	case st.Uid == 0:
		return true
	case slices.Contains(s.groups, st.Gid):
		return st.Mode&0o040 != 0
	}
	return false
}

// enterable tells whether the sandbox's root may enter a directory that
// is not hidden: by its group bits when its group is one of root's, else
// by "other" bits. What lies below one it may not enter is out of its
// reach.
func (s *secretScanner) enterable(st *unix.Stat_t) bool {
	if st.Uid != 0 && slices.Contains(s.groups, st.Gid) {
		return st.Mode&0o010 != 0
	}
	return st.Mode&0o001 != 0 || st.Uid == 0
}

// passwdUser is one line of /etc/passwd.
type passwdUser struct {
	uid  int
	home string
}

// passwdHomes reads the uid and home of every user in a passwd file.
func passwdHomes(path string) []passwdUser {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []passwdUser
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 7 {
			continue
		}
		uid, err := strconv.Atoi(fields[2])
		if err != nil || fields[5] == "" {
			continue
		}
		out = append(out, passwdUser{uid: uid, home: fields[5]})
	}
	return out
}

// maskDirOpts are the options of the tmpfs that hides a directory: empty
// and read-only.
const maskDirOpts = "mode=000,size=4k,nr_inodes=1"

// isMaskableDir tells whether fi is a directory to mask (symlinks are not:
// the sandbox replaced the host's entry with something of its own).
func isMaskableDir(fi fs.FileInfo) bool {
	return fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0
}

// maskCacheFile is where a provider keeps the masks it computed, so that a
// machine's start does not scan the host again (see cachedMasks).
const maskCacheFile = "masks-cache"

// oldMaskCacheFile is where older binaries kept it (as JSON, keyed on the
// scanned directories alone); loadMasks removes it.
const oldMaskCacheFile = "masks-cache.json"

// maskCacheMagic starts the cache file.
const maskCacheMagic = "sandbox-masks-2"

// Kinds of stamps: what of a path's state is recorded.
const (
	// stampFull: its identity, size, mode, owner and times; adding,
	// removing or renaming an entry changes a directory's times, and
	// writes, chmod and chown a file's.
	stampFull = 'f'
	// stampPerms: its identity, mode and owner only; for a directory
	// that is not read, whose contents may change as they please.
	stampPerms = 'p'
)

// stamps records the state of the paths a result was computed from, in
// the order they were read. Each of watch is a kind (stampFull,
// stampPerms) followed by the path.
type stamps struct {
	watch   []string
	digests []uint64
	// ownerless are the same digests without the owners (see
	// stampDigest).
	ownerless []uint64
}

// newStamps returns an empty record.
func newStamps() *stamps { return &stamps{} }

// add records path, following symlinks, as it is now.
func (s *stamps) add(kind byte, path string) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		s.addStat(kind, path, nil)
		return
	}
	s.addStat(kind, path, &st)
}

// addStat records path with its state st (nil: it does not exist).
func (s *stamps) addStat(kind byte, path string, st *unix.Stat_t) {
	s.watch = append(s.watch, string(kind)+path)
	s.digests = append(s.digests, stampDigest(kind, st, true))
	s.ownerless = append(s.ownerless, stampDigest(kind, st, false))
}

// sum is the digest of what was recorded; ownerlessSum the same without
// the owners.
func (s *stamps) sum() string          { return foldDigests(s.digests) }
func (s *stamps) ownerlessSum() string { return foldDigests(s.ownerless) }

// stampDigest is the digest of one path's state of kind (FNV-1a over its
// fields), with its owner or without: a standby machine's user namespace
// shows the owners it does not map as the overflow id, and checks a cache
// by its ownerless sum (see maskWatch); a change of owner changes a
// path's ctime, which stampFull holds.
func stampDigest(kind byte, st *unix.Stat_t, owners bool) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for range 8 {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	if st == nil {
		mix(1)
		return h
	}
	mix(st.Dev)
	mix(st.Ino)
	mix(uint64(st.Mode))
	if owners {
		mix(uint64(st.Uid))
		mix(uint64(st.Gid))
	}
	if kind == stampFull {
		mix(uint64(st.Size))
		mix(uint64(st.Mtim.Sec))
		mix(uint64(st.Mtim.Nsec))
		mix(uint64(st.Ctim.Sec))
		mix(uint64(st.Ctim.Nsec))
	}
	return h
}

// foldDigests combines the digests of the paths, in order.
func foldDigests(ds []uint64) string {
	h := fnv.New64a()
	var b [8]byte
	for _, d := range ds {
		binary.LittleEndian.PutUint64(b[:], d)
		h.Write(b[:])
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// stampSum is the sum (or, without owners, the ownerless sum) of the
// paths of watch as they are now. The paths are stated by a few goroutines
// at once: a root scan watches a few thousand directories, and a machine's
// start may wait for this check (see maskState).
func stampSum(watch []string, owners bool) string {
	ds := make([]uint64, len(watch))
	digest := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var st unix.Stat_t
			var sp *unix.Stat_t
			if len(watch[i]) > 1 && unix.Stat(watch[i][1:], &st) == nil {
				sp = &st
			}
			if len(watch[i]) > 0 {
				ds[i] = stampDigest(watch[i][0], sp, owners)
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(watch)/256+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { digest(w*len(watch)/workers, (w+1)*len(watch)/workers) })
	}
	wg.Wait()
	return foldDigests(ds)
}

// maskCache is the cached list and what it was computed from: the key of
// the computation, and the paths read with the sum of their stamps (and
// their ownerless sum, for a standby machine, see maskWatch).
type maskCache struct {
	key, sum, ownerless string
	masks               []string
	watch               []string
}

// encode lays the cache out as NUL-separated fields (no path holds a
// NUL): the magic, the key, the sum, the ownerless sum, the number of
// masks, the masks and the watched paths. It reads back far faster than
// JSON.
func (c maskCache) encode() []byte {
	var b []byte
	for _, f := range []string{maskCacheMagic, c.key, c.sum, c.ownerless, strconv.Itoa(len(c.masks))} {
		b = append(append(b, f...), 0)
	}
	for _, f := range slices.Concat(c.masks, c.watch) {
		b = append(append(b, f...), 0)
	}
	return b
}

// decodeMaskCache reads what encode wrote.
func decodeMaskCache(b []byte) (maskCache, bool) {
	fields := strings.Split(string(b), "\x00")
	if len(fields) < 6 || fields[0] != maskCacheMagic || fields[len(fields)-1] != "" {
		return maskCache{}, false
	}
	fields = fields[:len(fields)-1]
	n, err := strconv.Atoi(fields[4])
	if err != nil || n < 0 || 5+n > len(fields) {
		return maskCache{}, false
	}
	return maskCache{key: fields[1], sum: fields[2], ownerless: fields[3], masks: fields[5 : 5+n], watch: fields[5+n:]}, true
}

// decodeMaskCacheHead is decodeMaskCache without the watched paths: a start
// that takes the masks from the cache needs only its head (a dozen fields,
// where a root's cache watches two thousand paths).
func decodeMaskCacheHead(b []byte) (maskCache, bool) {
	if len(b) == 0 || b[len(b)-1] != 0 {
		return maskCache{}, false
	}
	next := func() (string, bool) {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return "", false
		}
		f := string(b[:i])
		b = b[i+1:]
		return f, true
	}
	var head [5]string
	for i := range head {
		f, ok := next()
		if !ok {
			return maskCache{}, false
		}
		head[i] = f
	}
	n, err := strconv.Atoi(head[4])
	if head[0] != maskCacheMagic || err != nil || n < 0 || n > bytes.Count(b, []byte{0}) {
		return maskCache{}, false
	}
	c := maskCache{key: head[1], sum: head[2], ownerless: head[3], masks: make([]string, n)}
	for i := range c.masks {
		c.masks[i], _ = next()
	}
	return c, true
}

// cachedMasks returns compute's result, cached in file under key and the
// stamps compute recorded: a result is used again while key is the same
// and none of the paths it was computed from changed. (A chmod or chown of
// a file that was not a secret is not seen; the next change of its
// directory, or deleting the cache, picks it up.)
func cachedMasks(file, key string, compute func(*stamps) []string) []string {
	if b, err := readFile(file); err == nil {
		if c, ok := decodeMaskCache(b); ok && c.key == key && c.sum == stampSum(c.watch, true) {
			return c.masks
		}
	}
	st := newStamps()
	masks := compute(st)
	_ = writeFileAtomic(file, maskCache{key: key, sum: st.sum(), ownerless: st.ownerlessSum(), masks: masks, watch: st.watch}.encode())
	return masks
}

// providerMasks is hostMasks for this provider, through the cache in its
// state directory.
func providerMasks(stateDir string, layers []layer, uid int, home string) []string {
	const passwd = "/etc/passwd"
	key := maskCacheKey(uid, home, layers)
	return cachedMasks(filepath.Join(stateDir, maskCacheFile), key, func(st *stamps) []string {
		return scanHostMasks(layers, uid, home, passwd, st)
	})
}

// stateMasks lists the state directories dirs (the tool's, with its
// registry and audit log, and this provider's, with every sandbox's
// files) as the sandbox would see them: by their real paths, where these
// lie in one of layers (XDG_STATE_HOME=/var/lib/x, say). A sandbox must
// never read another's workspace, HOME or metadata, nor the audit log.
func stateMasks(layers []layer, dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		d, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		paths := []string{filepath.Clean(d)}
		if real, err := filepath.EvalSymlinks(d); err == nil && real != paths[0] {
			paths = append(paths, real)
		}
		for _, p := range paths {
			if underLayer(layers, p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// sanitized is a shadow or gshadow file with the second field of every
// line (the password hash) replaced by "*".
func sanitized(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		f := strings.Split(l, ":")
		if len(f) > 2 {
			f[1] = "*"
			lines[i] = strings.Join(f, ":")
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// withoutShadow drops the shadow files from a list of masks (the scan of
// /etc finds them hidden from other users).
func withoutShadow(masks []string) []string {
	var out []string
	for _, m := range masks {
		if !slices.Contains(maskedFiles, m) {
			out = append(out, m)
		}
	}
	return out
}

// hasEtc tells whether the host's /etc is one of the sandbox's layers.
func (p *Provider) hasEtc() bool {
	for _, l := range p.host().layers {
		if l.Name == "etc" {
			return true
		}
	}
	return false
}

// maskState is how a provider keeps its masks current. The first machine
// start of a provider reads them from the cache (computing them when there
// is none); the check that the host has not changed since, which for root
// stats every directory the scan read (a few milliseconds), runs beside
// the start of the machine's init and the building of its root instead of
// before them: lateMasks, called once the init has its configuration,
// waits for it and returns whatever new secret it found, which the init
// masks before it starts any process. Every later start checks again.
type maskState struct {
	once sync.Once
	mu   sync.Mutex
	// check is the latest check started (nil: none needed); a start
	// confirms with the latest, which began no earlier than its own.
	check *maskCheck
	// cached is the digest (cacheDigest) of the cache file the masks
	// were read from; 0 when they were computed instead.
	cached uint64
}

// maskCheck is one check of the host's secrets, in the background.
type maskCheck struct {
	done chan struct{}
	// masks is what the host needs hidden now; set before done closes.
	masks []string
	// started is when it started.
	started time.Time
}

// maskCacheKey is the key under which masks are cached: a different
// rule, user, HOME, layout or set of root's groups computes them again.
func maskCacheKey(uid int, home string, layers []layer) string {
	key := fmt.Sprintf("%s uid=%d home=%q layers=%v", maskRule, uid, home, layerNames(layers))
	if uid == 0 {
		key += fmt.Sprintf(" groups=%v", rootGroups())
	}
	return key
}

// currentMasks are the masks the host needs now, through the cache, with
// the state directories.
func (p *Provider) currentMasks() []string {
	return p.withStateMasks(providerMasks(p.dir, p.host().layers, p.uid, p.hostHome))
}

// withStateMasks adds the state directories (stateMasks) to masks.
func (p *Provider) withStateMasks(masks []string) []string {
	for _, m := range stateMasks(p.host().layers, p.stateDir, p.dir) {
		if !slices.Contains(masks, m) {
			masks = append(masks, m)
		}
	}
	slices.Sort(masks)
	return masks
}

// loadMasks sets p.masks before the first machine (or weak-mode init) is
// configured, so that a CLI run that starts none never looks at the
// host's secrets; it then starts the check that lateMasks waits for,
// unless vouched is the digest of the cache p.masks came from: a claimed
// standby machine found that cache current and has watched the host
// since (see maskWatch). Only root's scan is large enough to be worth
// checking in the background; every other start computes its masks (or
// checks the cache) on the spot.
func (p *Provider) loadMasks(since time.Time, vouched uint64) {
	background := p.uid == 0 && !p.weak
	checked := false
	p.mask.once.Do(func() {
		_ = os.Remove(filepath.Join(p.dir, oldMaskCacheFile))
		if background {
			if b, err := readFile(filepath.Join(p.dir, maskCacheFile)); err == nil {
				if c, ok := decodeMaskCacheHead(b); ok && c.key == maskCacheKey(p.uid, p.hostHome, p.host().layers) {
					p.masks = p.withStateMasks(slices.Clone(c.masks))
					p.mask.cached = cacheDigest(b)
					return
				}
			}
		}
		p.masks = p.currentMasks()
		checked = true
	})
	if !background || checked || p.vouchedFor(vouched) {
		return
	}
	p.mask.mu.Lock()
	recent := p.mask.check != nil && !p.mask.check.started.Before(since)
	p.mask.mu.Unlock()
	if recent {
		return // started since this start began, ahead of its configuration
	}
	c := &maskCheck{done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(c.done)
		c.masks = p.currentMasks()
	}()
	p.mask.mu.Lock()
	p.mask.check = c
	p.mask.mu.Unlock()
}

// vouchedFor says whether vouched is the digest of the cache p.masks came
// from (see loadMasks).
func (p *Provider) vouchedFor(vouched uint64) bool {
	return vouched != 0 && vouched == p.mask.cached
}

// lateMasks waits for the latest check of the host's secrets and returns
// what it found that cfg.Masks, read from the cache, lacks: a secret made
// on the host since the cache was written. The machine's init builds its
// root meanwhile, and masks these before it starts any process (see
// machineGate). A start whose standby vouched for the cache (see
// loadMasks) has nothing to wait for.
func (p *Provider) lateMasks(cfg *initConfig, vouched uint64) []string {
	if p.vouchedFor(vouched) {
		return nil
	}
	p.mask.mu.Lock()
	c := p.mask.check
	p.mask.mu.Unlock()
	if c == nil {
		return nil
	}
	<-c.done
	_, shadow := p.etcBaseDir()
	var late []string
	for _, m := range c.masks {
		if shadow && slices.Contains(maskedFiles, m) {
			continue // the base layer's sanitized copy (see isolation)
		}
		if !slices.Contains(cfg.Masks, m) && !slices.Contains(late, m) {
			late = append(late, m)
		}
	}
	return late
}
