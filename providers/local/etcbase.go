//go:build linux

package local

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// etcBase is a directory laid over the host's /etc, below each sandbox's
// own layer (a second lower layer of the /etc overlay), with what every
// sandbox gets instead of the host's files: its /etc/hostname and, for
// root, the shadow files with every password field "*" (no password)
// instead of masks: tools such as useradd, which package scripts run, read
// and rewrite them, and nothing secret is left in them. It is
// made once per content and shared, so a new sandbox writes none of these
// files: each costs an inode allocation and a rename on the state disk,
// and a removal later. A sandbox that changes one gets its own copy in its
// layer, as with any file of the host's.
type etcBase struct {
	once sync.Once
	// dir is the directory, "" when it could not be made.
	dir string
	// shadow: dir holds the sanitized shadow files.
	shadow bool
}

// etcBasePrefix names the base directories under the provider's directory,
// followed by a hash of their contents.
const etcBasePrefix = "etc-base-"

// etcBaseDir returns the provider's base directory for /etc, making it on
// first use, and whether it holds the shadow files; "" when there is none
// (no /etc layer, the weak mode, or it could not be made).
func (p *Provider) etcBaseDir() (string, bool) {
	p.base.once.Do(func() {
		if p.weak || !p.hasEtc() {
			return
		}
		var shadow []string
		if p.uid == 0 {
			shadow = maskedFiles
		}
		p.base.dir, p.base.shadow = makeEtcBase(p.dir, shadow)
	})
	return p.base.dir, p.base.shadow
}

// makeEtcBase makes (or finds) under parent the base directory with the
// hostname and sanitized copies of the host's shadow files (absolute
// paths; missing ones are skipped), and tells whether it holds them. Its
// name carries a hash of that content, so a changed host file gets a new
// directory and a directory never changes once made. A copy keeps its
// file's mode and owner but not its group: the sandbox's root has no
// capabilities and belongs to no "shadow" group, so tools that rewrite the
// file (useradd recreates it with the old file's owner and group) could
// not give it that group back.
func makeEtcBase(parent string, shadow []string) (string, bool) {
	type file struct {
		name string
		data []byte
		mode fs.FileMode
		uid  int
	}
	files := []file{{"hostname", []byte(hostname + "\n"), 0o644, -1}}
	if len(shadow) > 0 {
		for _, host := range shadow {
			fi, err := os.Lstat(host)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil || !fi.Mode().IsRegular() {
				return "", false
			}
			b, err := readFile(host)
			if err != nil {
				return "", false
			}
			uid := -1
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid = int(st.Uid)
			}
			files = append(files, file{filepath.Base(host), sanitized(b), fi.Mode().Perm(), uid})
		}
	}
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.name + "\x00" + f.mode.String() + "\x00" + strconv.Itoa(f.uid) + "\x00" + strconv.Itoa(len(f.data)) + "\x00"))
		h.Write(f.data)
	}
	final := filepath.Join(parent, etcBasePrefix+hex.EncodeToString(h.Sum(nil)[:8]))
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		return final, len(shadow) > 0
	}
	tmp, err := os.MkdirTemp(parent, "."+etcBasePrefix)
	if err != nil {
		return "", false
	}
	ok := os.Chmod(tmp, 0o755) == nil
	for _, f := range files {
		if !ok {
			break
		}
		name := filepath.Join(tmp, f.name)
		ok = os.WriteFile(name, f.data, f.mode) == nil && os.Chmod(name, f.mode) == nil
		if ok && f.uid >= 0 {
			ok = os.Chown(name, f.uid, 0) == nil
		}
	}
	if ok {
		err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
		// Another process may have made the same directory meanwhile.
		ok = err == nil || errors.Is(err, fs.ErrExist) || errors.Is(err, unix.ENOTEMPTY)
	}
	if _, err := os.Lstat(tmp); err == nil {
		_ = removeTree(tmp)
	}
	if !ok {
		return "", false
	}
	return final, len(shadow) > 0
}
