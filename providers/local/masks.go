package local

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Host secrets that the sandbox's base (the host's /usr, /etc, /opt and
// /var, read-only below the sandbox's own layer) would otherwise show.
// Homes under /home and /root, and everything in /run and /tmp (agent
// sockets), are never mounted at all; what is left is masked: an empty,
// read-only file over a file, an empty, read-only tmpfs over a directory.

// secretScanDirs are the host directories whose entries are checked when
// the sandbox runs as root, who could otherwise read anything: an entry
// that the host keeps from other users (no read bit for "other") and that
// is not empty is hidden. Caches are left alone (nothing secret, and tools
// such as ldconfig must write there).
var secretScanDirs = []string{
	"/etc", "/etc/ssh", "/etc/ssl", "/etc/security", "/etc/NetworkManager",
	"/var/lib", "/var/backups", "/var/log", "/var/spool", "/var/spool/cron", "/var/mail",
	"/opt", "/usr/local/etc",
}

// hostMasks lists the paths to hide in the sandbox, as absolute paths that
// lie in one of layers (the same path inside and on the host): the homes of
// the host's users and the invoking user's HOME where they live under a
// system directory (for example /var/lib/jenkins), and, for root, what the
// host hides from other users in secretScanDirs.
func hostMasks(layers []layer, uid int, home, passwd string) []string {
	under := func(p string) bool {
		for _, l := range layers {
			if strings.HasPrefix(p, "/"+l.Name+"/") {
				return true
			}
		}
		return false
	}
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
		if !filepath.IsAbs(p) || !under(p) {
			return
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			return
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == owner {
			add(p)
		}
	}
	for _, u := range passwdHomes(passwd) {
		ownedHome(u.home, u.uid)
	}
	if home != "" {
		ownedHome(home, uid)
	}
	if uid == 0 {
		for _, d := range secretScanDirs {
			for _, p := range unreadableEntries(d) {
				if under(p) {
					add(p)
				}
			}
		}
	}
	slices.Sort(masks)
	return masks
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

// unreadableEntries lists the entries of dir that other users may not
// read: directories without r for "other", and non-empty files without it.
func unreadableEntries(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		m := fi.Mode()
		if m.Perm()&0o004 != 0 {
			continue
		}
		switch {
		case m.IsDir():
			out = append(out, filepath.Join(dir, e.Name()))
		case m.IsRegular() && fi.Size() > 0:
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// maskDir hides a directory under an empty, read-only tmpfs.
const maskDirOpts = "mode=000,size=4k,nr_inodes=1"

// isMaskableDir tells whether fi is a directory to mask (symlinks are not:
// the sandbox replaced the host's entry with something of its own).
func isMaskableDir(fi fs.FileInfo) bool {
	return fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0
}

// maskCacheFile is where a provider keeps the masks it computed, so that
// every CLI run does not scan the host again (the scan costs about a
// millisecond for root).
const maskCacheFile = "masks-cache.json"

// maskCache is the cached list and what it was computed from.
type maskCache struct {
	Key   string   `json:"key"`
	Masks []string `json:"masks"`
}

// cachedMasks returns compute's result, cached in file under a key made of
// extra and the modification times of keyPaths: adding, removing or
// renaming an entry of a scanned directory, or editing the passwd file,
// changes the key. (A chmod of an existing entry does not; the next change
// of its directory, or deleting the cache, picks it up.)
func cachedMasks(file, extra string, keyPaths []string, compute func() []string) []string {
	var key strings.Builder
	key.WriteString(extra)
	for _, p := range keyPaths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err == nil {
			fmt.Fprintf(&key, "|%s:%d.%d:%d", p, st.Mtim.Sec, st.Mtim.Nsec, st.Ino)
		} else {
			fmt.Fprintf(&key, "|%s:-", p)
		}
	}
	if b, err := os.ReadFile(file); err == nil {
		var c maskCache
		if json.Unmarshal(b, &c) == nil && c.Key == key.String() {
			return c.Masks
		}
	}
	masks := compute()
	_ = writeJSONAtomic(file, maskCache{Key: key.String(), Masks: masks})
	return masks
}

// providerMasks is hostMasks for this provider, through the cache in its
// state directory.
func providerMasks(stateDir string, layers []layer, uid int, home string) []string {
	const passwd = "/etc/passwd"
	keyPaths := []string{passwd}
	if home != "" {
		keyPaths = append(keyPaths, home)
	}
	if uid == 0 {
		keyPaths = append(keyPaths, secretScanDirs...)
	}
	extra := fmt.Sprintf("uid=%d home=%s", uid, home)
	return cachedMasks(filepath.Join(stateDir, maskCacheFile), extra, keyPaths, func() []string {
		return hostMasks(layers, uid, home, passwd)
	})
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
	for _, l := range p.layers {
		if l.Name == "etc" {
			return true
		}
	}
	return false
}
