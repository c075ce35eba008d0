package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"

	"github.com/agentbox/sandbox/providers"
)

// The ids of a sandbox. As host root, root inside is root outside (the
// sandbox's files on the host belong to the invoking user, as they always
// did), and the ids 1 to idRangeSize-1 inside map to a range of host ids
// that belong to no host user: root's range in /etc/subuid (/etc/subgid)
// when it has one, else one starting at defaultIDBase. Other users are
// mapped to themselves only: one id, so --user can name no other.
const (
	idRangeSize   = 65536
	defaultIDBase = 1 << 30
)

// idMapping is how a sandbox's ids map to the host's.
type idMapping struct {
	// id is the invoking user's (or group's) id, mapped to itself.
	id int
	// base is the host id of id 0 of the range of ids 1..idRangeSize-1
	// inside (base+1 is inside id 1); zero when only id is mapped.
	base int
}

// maps are the kernel's mappings.
func (m idMapping) maps() []syscall.SysProcIDMap {
	out := []syscall.SysProcIDMap{{ContainerID: m.id, HostID: m.id, Size: 1}}
	if m.base != 0 {
		out = append(out, syscall.SysProcIDMap{ContainerID: 1, HostID: m.base + 1, Size: idRangeSize - 1})
	}
	return out
}

// ranged says whether the sandbox has more ids than the invoking user's.
func (m idMapping) ranged() bool { return m.base != 0 }

// hostIDMappings are the uid and gid mappings of this provider's
// sandboxes: ranges as root, the invoking ids alone otherwise.
func hostIDMappings(uid, gid int) (idMapping, idMapping) {
	u, g := idMapping{id: uid}, idMapping{id: gid}
	if uid == 0 {
		u.base = subordinateBase("/etc/subuid", defaultIDBase)
		g.base = subordinateBase("/etc/subgid", defaultIDBase)
	}
	return u, g
}

// subordinateBase is the start, minus one, of root's range in a
// subordinate id file ("root:start:count" or "0:start:count") when it is
// at least idRangeSize long, else fallback.
func subordinateBase(file string, fallback int) int {
	f, err := os.Open(file)
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 || (fields[0] != "root" && fields[0] != "0") {
			continue
		}
		start, err1 := strconv.Atoi(fields[1])
		count, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && start > 0 && count >= idRangeSize {
			return start - 1
		}
	}
	return fallback
}

// sandboxUser is a user of a sandbox's /etc/passwd.
type sandboxUser struct {
	name     string
	uid, gid int
	home     string
	groups   []int
}

// errNoUser marks a user that the sandbox's /etc/passwd does not have.
var errNoUser = errors.New("no such user")

// lookupUser finds spec (a name or a numeric uid) in the passwd and group
// files of the sandbox's root. A numeric uid that has no entry is still a
// user, with the group of the same number and / as its home, as in
// `docker exec --user`. The files are parsed here rather than through the
// C library, whose name-service modules would come from the sandbox.
func lookupUser(root, spec string) (sandboxUser, error) {
	if spec == "" {
		return sandboxUser{}, errors.New("empty user name")
	}
	entries, err := readColonFile(filepath.Join(root, "etc/passwd"), 7)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return sandboxUser{}, fmt.Errorf("read /etc/passwd: %w", err)
	}
	numeric, numErr := strconv.Atoi(spec)
	var u sandboxUser
	found := false
	for _, e := range entries {
		uid, err1 := strconv.Atoi(e[2])
		gid, err2 := strconv.Atoi(e[3])
		if err1 != nil || err2 != nil {
			continue
		}
		if e[0] == spec || (numErr == nil && uid == numeric) {
			u = sandboxUser{name: e[0], uid: uid, gid: gid, home: e[5]}
			found = true
			break
		}
	}
	if !found {
		if numErr != nil || numeric < 0 {
			return sandboxUser{}, fmt.Errorf("user %q: %w in the sandbox's /etc/passwd", spec, errNoUser)
		}
		u = sandboxUser{uid: numeric, gid: numeric, home: "/"}
	}
	if u.home == "" {
		u.home = "/"
	}
	u.groups = []int{u.gid}
	if u.name != "" {
		groups, _ := readColonFile(filepath.Join(root, "etc/group"), 4)
		for _, g := range groups {
			gid, err := strconv.Atoi(g[2])
			if err == nil && slices.Contains(strings.Split(g[3], ","), u.name) && !slices.Contains(u.groups, gid) {
				u.groups = append(u.groups, gid)
			}
		}
	}
	return u, nil
}

// readColonFile reads a passwd-style file into entries of n fields,
// skipping comments and malformed lines.
func readColonFile(path string, n int) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Split(line, ":"); len(f) == n {
			out = append(out, f)
		}
	}
	return out, nil
}

// userEnv sets HOME, USER and LOGNAME for u in env unless keepHome (the
// caller set HOME itself); other variables stay.
func userEnv(env []string, u sandboxUser, keepHome bool) []string {
	set := map[string]string{"HOME": u.home}
	if keepHome {
		delete(set, "HOME")
	}
	if u.name != "" {
		set["USER"], set["LOGNAME"] = u.name, u.name
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"HOME", "LOGNAME", "USER"} {
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// becomeUser switches every thread of a runner to the operation's user
// and then drops the capabilities it kept for that (CAP_SETUID and
// CAP_SETGID, see runnerCaps): the command and the file operation run with
// none. An empty name keeps the runner's own user. A uid the sandbox does
// not map is refused with a note on why.
func becomeUser(name string) (*sandboxUser, error) {
	var target *sandboxUser
	if name != "" {
		u, err := lookupUser("/", name)
		if err != nil {
			return nil, err
		}
		target = &u
		if err := setIDs(u); err != nil {
			if errors.Is(err, unix.EINVAL) {
				return nil, fmt.Errorf("user %q (uid %d): this sandbox maps only its own user's id (%d); run the sandbox as root to use other users: %w", name, u.uid, os.Getuid(), errNoUser)
			}
			return nil, fmt.Errorf("become user %q: %w", name, err)
		}
	}
	if err := clearCaps(); err != nil {
		return nil, err
	}
	return target, nil
}

// setIDs sets the groups, gid and uid of every thread to u's.
func setIDs(u sandboxUser) error {
	if u.uid == os.Getuid() && u.gid == os.Getgid() {
		// Already that user (root, or the invoking user's own id):
		// the groups may stay as the sandbox set them.
		return nil
	}
	if err := syscall.Setgroups(u.groups); err != nil {
		return err
	}
	if err := syscall.Setresgid(u.gid, u.gid, u.gid); err != nil {
		return err
	}
	return syscall.Setresuid(u.uid, u.uid, u.uid)
}

// clearCaps drops every capability of every thread.
func clearCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	_, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	if e != 0 {
		return fmt.Errorf("clear capabilities: %w", e)
	}
	return nil
}

// checkUser refuses a user name that no passwd file could hold, and any
// user in the weak mode, which has no ids of its own to switch between.
func (p *Provider) checkUser(op, name string) error {
	if name == "" {
		return nil
	}
	if p.weak {
		return providers.Errorf(providers.ErrUnsupported, Name, op, "--user needs the sandbox's own user namespace, which the weak mode (%s=1) does not have", weakEnvVar)
	}
	if _, err := strconv.Atoi(name); err == nil {
		return nil
	}
	if len(name) > 32 || name[0] == '-' || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) >= 0 {
		return providers.Errorf(providers.ErrInvalid, Name, op, "user %q: a user is a name of letters, digits, '_', '-' and '.' (at most 32, not starting with '-') or a numeric uid", name)
	}
	return nil
}

// firstUserID is where ensureUser starts looking for a free id.
const firstUserID = 1000

// ensureUser gives the sandbox its default user, from the init once the
// root is built (it still has its capabilities there): a name missing
// from /etc/passwd is added with the first free id from 1000, a group of
// the same name and id, and a home /home/NAME it owns; /workspace, while
// root still owns it, becomes the user's. A numeric uid needs no entry.
func ensureUser(name string) error {
	u, err := lookupUser("/", name)
	if errors.Is(err, errNoUser) {
		u, err = addUser(name)
	}
	if err != nil {
		return err
	}
	if u.uid == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(providers.DefaultWorkdir, &st); err == nil && st.Uid == 0 {
		if err := unix.Chown(providers.DefaultWorkdir, u.uid, u.gid); err != nil {
			return fmt.Errorf("give %s to user %s: %w", providers.DefaultWorkdir, name, err)
		}
	}
	return nil
}

// addUser adds user name to the sandbox's /etc/passwd and /etc/group and
// makes its home.
func addUser(name string) (sandboxUser, error) {
	used := map[int]bool{}
	for _, file := range []string{"/etc/passwd", "/etc/group"} {
		entries, err := readColonFile(file, map[string]int{"/etc/passwd": 7, "/etc/group": 4}[file])
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return sandboxUser{}, fmt.Errorf("read %s: %w", file, err)
		}
		for _, e := range entries {
			if id, err := strconv.Atoi(e[2]); err == nil {
				used[id] = true
			}
		}
	}
	id := firstUserID
	for used[id] {
		id++
	}
	if id >= idRangeSize {
		return sandboxUser{}, fmt.Errorf("add user %s: no free id below %d", name, idRangeSize)
	}
	shell := "/bin/sh"
	if _, err := os.Stat("/bin/bash"); err == nil {
		shell = "/bin/bash"
	}
	u := sandboxUser{name: name, uid: id, gid: id, home: "/home/" + name, groups: []int{id}}
	if err := appendLine("/etc/group", fmt.Sprintf("%s:x:%d:", name, id)); err != nil {
		return sandboxUser{}, err
	}
	if err := appendLine("/etc/passwd", fmt.Sprintf("%s:x:%d:%d::%s:%s", name, id, id, u.home, shell)); err != nil {
		return sandboxUser{}, err
	}
	if err := os.MkdirAll(u.home, 0o755); err != nil {
		return sandboxUser{}, fmt.Errorf("make the home of user %s: %w", name, err)
	}
	if err := os.Chown(u.home, id, id); err != nil {
		return sandboxUser{}, fmt.Errorf("give user %s its home: %w", name, err)
	}
	return u, nil
}

// appendLine adds line to a file, on a line of its own.
func appendLine(path, line string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		line = "\n" + line
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
