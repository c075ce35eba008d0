//go:build linux

package local

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// devNodes are the host device nodes bound into the sandbox's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// maskedFiles hold the host's password hashes: a root sandbox gets
// sanitized copies from its base layer (see etcBase), every other one an
// empty, unreadable file bound over each that exists. The provider sends
// them, with the other secrets it finds (see hostMasks), in
// initConfig.Masks.
var maskedFiles = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}

// maskSource prefixes the empty file bound over masked files; it is created
// in the new root and unlinked once every mask is in place.
const maskSource = "/.sandbox-mask"

// setupError marks a failure to build the sandbox, as opposed to a failure
// of the command or file operation run in it. Unavailable says that the
// kernel refused namespaces or mounts outright.
type setupError struct {
	err         error
	unavailable bool
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// mountErr wraps a mount failure with what was being mounted.
func mountErr(what string, err error) error {
	return fmt.Errorf("mount %s: %w", what, err)
}

// buildRoot assembles the sandbox's filesystem and pivots into it. It runs
// in the init, inside fresh user and mount namespaces, with the host's view
// still in place.
func buildRoot(cfg *initConfig) error {
	if err := buildTree(cfg); err != nil {
		return err
	}
	return enterRoot(cfg)
}

// buildTree builds the part of the new root under cfg.Root that lives as
// long as its mount namespace: the tmpfs, the overlays, the links and the
// binds. A cold init builds it for one operation; a sandbox's holder once
// for its life, and each of its operation inits (spares) then only runs
// enterRoot in its own copy of the holder's mount namespace, so that there
// is one overlay mount of the sandbox's layers at a time.
func buildTree(cfg *initConfig) error {
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &setupError{err: mountErr("make / private", err), unavailable: errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)}
	}
	root := cfg.Root
	// The overlays' layers are named relative to the provider's
	// directory (Root's parent), its working directory meanwhile:
	// /proc/self/mountinfo in the sandbox shows their options as given,
	// and absolute paths would tell it where the host keeps the state
	// directory (often the user's HOME, with the user's name).
	if err := unix.Chdir(filepath.Dir(root)); err != nil {
		return fmt.Errorf("enter the state directory: %w", err)
	}
	if err := mountRootLayer(root, cfg); err != nil {
		return err
	}
	if err := mountLayers(root, cfg); err != nil {
		return err
	}
	for _, l := range cfg.Links {
		// Made at the first start; the sandbox may have changed it
		// since, which is its own business.
		if err := os.Symlink(l.Target, filepath.Join(root, l.Name)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	// /workspace and HOME are directories of the root layer (see
	// workspacePath). nosuid and nodev everywhere, before /dev exists.
	if err := unix.MountSetattr(unix.AT_FDCWD, root, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		return mountErr("nosuid,nodev", err)
	}
	return nil
}

// enterRoot gives the tree built by buildTree the machine's own mounts (a
// private /tmp, /run, /dev and a fresh /proc for its PID namespace, sized
// by cfg.Limits), pivots into it and masks secrets. Their mount points
// persist in the root layer from one start to the next.
func enterRoot(cfg *initConfig) error {
	root := cfg.Root
	tmpfses := []struct{ dst, opts string }{
		{"/tmp", tmpfsOpts("mode=1777", cfg.Limits.TmpSize)},
		{"/run", tmpfsOpts("mode=0755", cfg.Limits.RunSize)},
	}
	for _, t := range tmpfses {
		target := root + t.dst
		if err := mkdirExist(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, t.opts); err != nil {
			return mountErr(t.dst, err)
		}
	}
	// A fresh procfs for the new PID namespace, mounted before the pivot:
	// the inherited /proc is locked and cannot be unmounted.
	if err := mkdirExist(root+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return &setupError{err: mountErr("/proc", err), unavailable: errors.Is(err, unix.EPERM)}
	}
	if err := buildDev(root+"/dev", cfg.Limits.ShmSize); err != nil {
		return err
	}
	// Landlock lets the sandbox write anywhere in its root: /proc (its
	// sysctls, other processes' files) and /dev itself (not its shm and
	// pts, nor writing to its devices) are read-only mounts instead.
	for _, d := range []string{"/proc", "/dev"} {
		if err := unix.MountSetattr(unix.AT_FDCWD, root+d, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return mountErr("read-only "+d, err)
		}
	}
	mask := maskSource + "-" + rand.Text()
	if err := os.WriteFile(root+mask, nil, 0); err != nil {
		return err
	}
	// The host's resolver configuration, for the commands run in the
	// host's network: a detached copy of the host's file, taken before
	// the pivot and attached inside after it.
	resolv := -1
	if fd, err := unix.OpenTree(unix.AT_FDCWD, "/etc/resolv.conf", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
		resolv = fd
	}
	if err := pivot(root); err != nil {
		return err
	}
	if resolv >= 0 {
		err := attachResolvConf(resolv)
		unix.Close(resolv)
		if err != nil {
			return err
		}
	}
	if err := applyMasks(mask, cfg.Masks); err != nil {
		return err
	}
	if cfg.Mode == modeMachine {
		cfg.maskSrc = mask // for the late masks (see machineGate)
		return nil
	}
	return os.Remove(mask)
}

// mountRootLayer mounts the sandbox's root: an overlay whose lower layer
// is an empty directory and whose upper layer is the sandbox's, so that
// anything made outside the system directories (/srv, /home/user, /data)
// is the sandbox's own and lasts, like the rest of its files, until it is
// deleted.
func mountRootLayer(root string, cfg *initConfig) error {
	l := cfg.RootLayer
	if err := os.MkdirAll(l.Upper, 0o755); err != nil {
		return err
	}
	retireWork(l.Work, cfg.Trash, cfg.Spread)
	// Not volatile, unlike the system layers: /workspace, HOME and what
	// is made outside the system directories (/srv, /data) live here,
	// and a volatile overlay ignores fsync. Its cost, a syncfs of the state directory's
	// file system when the mount goes (2 ms and more), is paid once,
	// when the machine stops. A sandbox made for one run (Transient) is
	// deleted when its machine stops: its first machine mounts the root
	// volatile, and its delete does not wait for that sync.
	opts := "lowerdir=" + layerOpt(root, cfg.Skel) + ",upperdir=" + layerOpt(root, l.Upper) +
		",workdir=" + layerOpt(root, l.Work) + ",userxattr"
	if l.Volatile {
		opts += ",volatile"
	}
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return &setupError{err: fmt.Errorf("the sandbox's root overlay: %w; the sandbox needs overlayfs in a user namespace (Linux 5.11 or newer) and a state directory on a filesystem with user extended attributes", err),
			unavailable: errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)}
	}
	openWork(l.Work)
	return unix.Chmod(root, 0o755)
}

// mountLayers mounts the overlays of the new root.
//
// The overlays are volatile: overlayfs then skips the syncfs of the whole
// upper filesystem it would otherwise run when the mount namespace dies,
// a flush of the state disk's journal that cost a cold command 1.5 to 5 ms.
// The price: a sandbox's system layer (/usr, /etc, /opt, /var) may lose
// its most recent writes if the host crashes; the root layer, which holds
// the workspace and HOME, is not volatile and keeps the host's durability. Overlayfs marks a volatile
// work directory as dirty and refuses to mount it again, so what a
// previous mount left goes first (retireWork); the slot lock, which a cold
// init and a holder each hold for their mounts' lives, guarantees that no
// live mount uses it.
func mountLayers(root string, cfg *initConfig) error {
	for _, l := range cfg.Layers {
		if err := mountOverlay(root, l, cfg); err != nil {
			return err
		}
	}
	return nil
}

// mountOverlay mounts one overlay of the new root.
func mountOverlay(root string, l mountLayer, cfg *initConfig) error {
	target := filepath.Join(root, l.Name)
	if err := mkdirExist(target, 0o755); err != nil {
		return err
	}
	retireWork(l.Work, cfg.Trash, cfg.Spread)
	if l.Name == "var" {
		if err := privateVarTmp(l.Upper); err != nil {
			return fmt.Errorf("the sandbox's /var/tmp: %w", err)
		}
	}
	lower := layerOpt(root, l.Lower)
	if l.Base != "" {
		lower = layerOpt(root, l.Base) + ":" + lower // the leftmost is on top
	}
	opts := "lowerdir=" + lower + ",upperdir=" + layerOpt(root, l.Upper) +
		",workdir=" + layerOpt(root, l.Work) + ",userxattr,volatile"
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("overlay of the host's /%s (upper layer %s): %w; the sandbox needs overlayfs in a user namespace (Linux 5.11 or newer) and a state directory on a filesystem with user extended attributes", l.Name, l.Upper, err)
	}
	openWork(l.Work)
	return nil
}

// openWork gives the directories overlayfs made in the work directory
// work (mode 000: work, and incompat/volatile for a volatile mount) to
// their owner, who can then list and remove them: otherwise an
// unprivileged user's `rm -rf` of the state directory fails on them.
// overlayfs works in them with its mounter's credentials, whatever their
// mode.
func openWork(work string) {
	for _, d := range []string{"work", "work/incompat", "work/incompat/volatile"} {
		_ = unix.Chmod(filepath.Join(work, d), 0o700)
	}
}

// retireWork clears the way for a new mount in the work directory work.
// What a previous mount made in it (its work/work directory, with its
// dirty marker) goes into trash, whose reaper removes it in the
// background: removing it here would cost the command a few hundred
// microseconds per layer on a disk mounted with online discard, where each
// removed directory waits for the discard of its block. With spread, the
// whole of work goes, and a new one made under another name (which places
// it in another block group, see spreadChildren) takes its place: the
// inodes the mount makes and frees then land in a group nobody churned
// lately; a work directory a reaper made fresh already (prepareAhead) is
// used as it is. Where the renames fail (no trash), the marker is removed
// in place and overlayfs removes the rest.
func retireWork(work, trash string, spread bool) {
	if trash != "" {
		if spread && (freshWork(work) || replaceWork(work, trash)) {
			return
		}
		if err := unix.Rename(work+"/work", retiredName(work, trash, stamp())); err == nil || err == unix.ENOENT {
			return
		}
	}
	dir := work + "/work/incompat/volatile"
	if unix.Unlink(dir+"/dirty") != nil {
		return // a fresh work directory
	}
	_ = unix.Rmdir(dir)
	_ = unix.Rmdir(work + "/work/incompat")
}

// replaceWork moves the work directory work into trash and makes a fresh
// one in its place; false means work is as it was. The caller holds the
// slot's lock.
func replaceWork(work, trash string) bool {
	s := stamp()
	return replaceDir(work, work+"."+s, retiredName(work, trash, s))
}

// retiredName is where the work directory work (or what a mount made in
// it) goes in trash. The slot lock makes the slot's number and the
// layer's name unique among the processes renaming now; the stamp, over
// time.
func retiredName(work, trash, stamp string) string {
	return filepath.Join(trash, "work-"+filepath.Base(filepath.Dir(work))+"-"+filepath.Base(work)+"-"+stamp)
}

// stamp is the time, short.
func stamp() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// layerOpt is the path p of an overlay's layer as its mount option: relative
// to the provider's directory (root's parent, which buildTree made the
// working directory) when it lies there, and escaped.
func layerOpt(root, p string) string {
	if rel, ok := strings.CutPrefix(p, filepath.Dir(root)+"/"); ok && rel != "" {
		p = rel
	}
	return overlayEscape(p)
}

// opaqueXattr marks an overlay's upper directory as hiding the lower
// layers' (with the userxattr option the overlays are mounted with).
const opaqueXattr = "user.overlay.opaque"

// privateVarTmp makes the sandbox's /var/tmp its own: the directory tmp of
// its /var layer's upper directory, marked opaque, so that the overlay
// shows nothing of the host's /var/tmp, where any host user may leave
// files (and where XDG_STATE_HOME=/var/tmp/x would put the state of every
// sandbox). Like the rest of the layer it persists until the sandbox is
// deleted. A sandbox made before keeps what it wrote there; one that made
// /var/tmp something else (a link to /tmp) keeps that, which shows nothing
// of the host's either.
func privateVarTmp(upper string) error {
	dir := filepath.Join(upper, "tmp")
	var st unix.Stat_t
	switch err := unix.Lstat(dir, &st); {
	case err == unix.ENOENT:
		if err := unix.Mkdir(dir, 0o1777); err != nil {
			return err
		}
		if err := unix.Chmod(dir, 0o1777); err != nil { // past the umask
			return err
		}
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil
	}
	buf := make([]byte, 1)
	if n, err := unix.Lgetxattr(dir, opaqueXattr, buf); err == nil && n == 1 && buf[0] == 'y' {
		return nil
	}
	return unix.Lsetxattr(dir, opaqueXattr, []byte("y"), 0)
}

// replaceDir makes the directory fresh, moves dir to gone and fresh to
// dir; false means dir is as it was.
func replaceDir(dir, fresh, gone string) bool {
	if unix.Mkdir(fresh, 0o700) != nil {
		return false
	}
	if err := unix.Rename(dir, gone); err != nil && err != unix.ENOENT {
		_ = unix.Rmdir(fresh)
		return false
	}
	return unix.Rename(fresh, dir) == nil
}

// overlayEscape escapes the characters the overlay option parser treats
// specially in a path.
func overlayEscape(p string) string {
	if !strings.ContainsAny(p, `\,:`) {
		return p
	}
	var b strings.Builder
	for _, c := range p {
		if c == '\\' || c == ',' || c == ':' {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// buildDev creates a minimal /dev: a few host device nodes, a private devpts,
// a /dev/shm tmpfs and the usual symlinks.
func buildDev(dev string, shmSize uint64) error {
	if err := mkdirExist(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return mountErr("/dev", err)
	}
	for _, n := range devNodes {
		target := dev + "/" + n
		if err := os.WriteFile(target, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, target, "", unix.MS_BIND, ""); err != nil {
			return mountErr("/dev/"+n, err)
		}
	}
	if err := os.Mkdir(dev+"/pts", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return mountErr("/dev/pts", err)
	}
	if err := os.Mkdir(dev+"/shm", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsOpts("mode=1777", shmSize)); err != nil {
		return mountErr("/dev/shm", err)
	}
	links := [][2]string{
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"},
		{"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], dev+"/"+l[1]); err != nil {
			return err
		}
	}
	return nil
}

// pivot makes root the new / and detaches the host's root.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

// applyMasks binds the empty file mask over every masked path that is a
// regular file, and an empty read-only tmpfs over every one that is a
// directory. It runs after the pivot, so a path the
// sandbox replaced with a symlink in its own layer is left alone: it no
// longer shows the host's entry.
func applyMasks(mask string, paths []string) error {
	for i, p := range paths {
		if slices.Contains(paths[:i], p) {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode().IsRegular():
			if err := unix.Mount(mask, p, "", unix.MS_BIND, ""); err != nil {
				return mountErr("mask over "+p, err)
			}
			if err := unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return mountErr("read-only mask over "+p, err)
			}
		case isMaskableDir(fi):
			if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, maskDirOpts); err != nil {
				return mountErr("mask over "+p, err)
			}
		}
	}
	return nil
}

// mkdirExist creates dir unless it exists.
func mkdirExist(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// attachResolvConf makes the host's resolver configuration visible when the
// sandbox shares the host's network. The sandbox's /etc/resolv.conf may be a
// symlink into /run (a fresh tmpfs here): its target is created first.
func attachResolvConf(tree int) error {
	const p = "/etc/resolv.conf"
	if _, err := os.Stat(p); err != nil {
		target, lerr := filepath.EvalSymlinks(filepath.Dir(p))
		if lerr != nil {
			return nil
		}
		dst, lerr := os.Readlink(p)
		if lerr != nil {
			return nil
		}
		if !filepath.IsAbs(dst) {
			dst = filepath.Join(target, dst)
		}
		if !strings.HasPrefix(dst, "/run/") {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil
		}
		if err := os.WriteFile(dst, nil, 0o644); err != nil {
			return nil
		}
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return mountErr(p, err)
	}
	return nil
}
