//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"

	"github.com/agentbox/sandbox/providers"
)

// The ids of a sandbox. As host root, root inside is root outside (the
// sandbox's files on the host belong to the invoking user, as they always
// did), and the ids 1 to idRangeSize-1 inside map to a range of host ids
// that belong to no host user: root's range in /etc/subuid (/etc/subgid)
// when it has one, else one starting at defaultIDBase. Another user is
// mapped to itself, and, when the host has newuidmap and newgidmap and
// gives the user a subordinate range in /etc/subuid and /etc/subgid, the
// other ids 0 to idRangeSize-1 inside are mapped onto that range, as many
// as it holds (see subordinateMaps); without them it has its one id, so
// --user can name no other.
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
	// sub are the mappings of the other ids of an unprivileged user's
	// sandbox onto the user's subordinate range (see subordinateMaps);
	// nil when it has none.
	sub []syscall.SysProcIDMap
	// tool is the setuid program (newuidmap or newgidmap) that writes
	// mappings with sub, which an unprivileged process may not write
	// itself (see writeIDMaps); "" when the Go runtime writes them.
	tool string
}

// maps are the kernel's mappings.
func (m idMapping) maps() []syscall.SysProcIDMap {
	out := []syscall.SysProcIDMap{{ContainerID: m.id, HostID: m.id, Size: 1}}
	if m.base != 0 {
		out = append(out, syscall.SysProcIDMap{ContainerID: 1, HostID: m.base + 1, Size: idRangeSize - 1})
	}
	return append(out, m.sub...)
}

// ranged says whether the sandbox has more ids than the invoking user's.
func (m idMapping) ranged() bool { return m.base != 0 || len(m.sub) > 0 }

// hostIDMappings are the uid and gid mappings of this provider's
// sandboxes: ranges as root; as another user, its subordinate ranges
// when the host provides them (see subordinateMappings), else the
// invoking ids alone.
func hostIDMappings(uid, gid int) (idMapping, idMapping) {
	u, g := idMapping{id: uid}, idMapping{id: gid}
	if uid == 0 {
		u.base = subordinateBase("/etc/subuid", defaultIDBase)
		g.base = subordinateBase("/etc/subgid", defaultIDBase)
		return u, g
	}
	// Under no_new_privs a setuid tool runs without its privileges.
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 0 {
		return u, g
	}
	name := ""
	if pw, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = pw.Username
	}
	if su, sg, ok := subordinateMappings(uid, gid, name, "/etc/subuid", "/etc/subgid", idTool); ok {
		return su, sg
	}
	return u, g
}

// subordinateMappings are the mappings of the sandboxes of the
// unprivileged user uid (named name, "" when unknown) with primary group
// gid: its own ids plus its ranges in the files uidFile and gidFile, to
// be written by the setuid tools that find locates. ok is false unless
// both tools and both ranges exist.
func subordinateMappings(uid, gid int, name, uidFile, gidFile string, find func(string) string) (u, g idMapping, ok bool) {
	uidTool, gidTool := find("newuidmap"), find("newgidmap")
	if uidTool == "" || gidTool == "" {
		return idMapping{}, idMapping{}, false
	}
	us, uc, uok := subordinateRange(uidFile, name, uid)
	gs, gc, gok := subordinateRange(gidFile, name, uid)
	if !uok || !gok {
		return idMapping{}, idMapping{}, false
	}
	u = idMapping{id: uid, sub: subordinateMaps(uid, us, uc), tool: uidTool}
	g = idMapping{id: gid, sub: subordinateMaps(gid, gs, gc), tool: gidTool}
	return u, g, len(u.sub) > 0 && len(g.sub) > 0
}

// idTool is the path of the setuid tool name (newuidmap, newgidmap): on
// PATH, else in /usr/bin; "" when there is none.
func idTool(name string) string {
	if p, err := exec.LookPath(name); err == nil && filepath.IsAbs(p) {
		return p
	}
	p := filepath.Join("/usr/bin", name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// subordinateRange is the largest range (first of equals) of the user
// named name or numbered uid in a subordinate id file
// ("owner:start:count" lines, the owner a name or a uid, as in
// subuid(5)). ok is false when the file gives the user none.
func subordinateRange(file, name string, uid int) (start, count int, ok bool) {
	b, err := readFile(file)
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Split(strings.TrimSpace(line), ":")
		if len(fields) != 3 || (fields[0] != strconv.Itoa(uid) && (name == "" || fields[0] != name)) {
			continue
		}
		s, err1 := strconv.Atoi(fields[1])
		c, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && s > 0 && c > count {
			start, count, ok = s, c, true
		}
	}
	return start, count, ok
}

// subordinateMaps maps the ids 0..idRangeSize-1 inside other than self
// (which stays itself) onto the host range of count ids from start, in
// order, as many as the range holds.
func subordinateMaps(self, start, count int) []syscall.SysProcIDMap {
	var out []syscall.SysProcIDMap
	inside, host, left := 0, start, count
	for left > 0 && inside < idRangeSize {
		if inside == self {
			inside++
			continue
		}
		end := idRangeSize
		if self > inside && self < end {
			end = self
		}
		n := min(end-inside, left)
		out = append(out, syscall.SysProcIDMap{ContainerID: inside, HostID: host, Size: n})
		inside, host, left = inside+n, host+n, left-n
	}
	return out
}

// idToolTimeout bounds a run of newuidmap or newgidmap.
const idToolTimeout = 30 * time.Second

// writeIDMaps has newuidmap and newgidmap write the mappings of the
// process pid, started in a new user namespace without them (see nsAttr),
// when its mappings need the tools; it does nothing otherwise. The process
// must not need its ids until then. The error names the tool's output.
// newgidmap leaves setgroups(2) allowed when the mapping holds a
// subordinate range, so that runners may give a command its user's
// groups.
func writeIDMaps(pid int, uids, gids idMapping) error {
	for _, m := range []idMapping{uids, gids} {
		if m.tool == "" {
			continue
		}
		args := []string{strconv.Itoa(pid)}
		for _, r := range m.maps() {
			args = append(args, strconv.Itoa(r.ContainerID), strconv.Itoa(r.HostID), strconv.Itoa(r.Size))
		}
		ctx, cancel := context.WithTimeout(context.Background(), idToolTimeout)
		out, err := exec.CommandContext(ctx, m.tool, args...).CombinedOutput()
		cancel()
		if err != nil {
			msg := strings.TrimSpace(string(out))
			if msg == "" {
				msg = "no output"
			}
			return fmt.Errorf("%s %s: %w (%s); the tool maps only the ranges /etc/subuid and /etc/subgid give the user, "+
				"for a process of the user's own uid and primary group; without those ranges a sandbox maps the user's id alone",
				m.tool, strings.Join(args, " "), err, msg)
		}
	}
	return nil
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
	b, err := readFile(path)
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
// not map is refused with a note on why, and, where the sandbox maps one
// id only, on how to get more.
func becomeUser(name string) (*sandboxUser, error) {
	var target *sandboxUser
	if name != "" {
		u, err := lookupUser("/", name)
		if err != nil {
			return nil, err
		}
		target = &u
		if err := setIDs(u); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
				return nil, unmappedUser(name, u, err)
			}
			return nil, fmt.Errorf("become user %q: %w", name, err)
		}
	}
	if err := clearCaps(); err != nil {
		return nil, err
	}
	return target, nil
}

// checkOwnUser refuses to make a sandbox for a user of its own (create
// --user) where the sandbox can map no other id than the invoking user's:
// only that user, by name or uid, can be the sandbox's user then.
func (p *Provider) checkOwnUser(name string) error {
	if name == "" || p.uid == 0 || p.weak || p.host().uids.ranged() {
		return nil
	}
	me := strconv.Itoa(p.uid)
	if name == me {
		return nil
	}
	if u, err := user.LookupId(me); err == nil && u.Username == name {
		return nil
	}
	return providers.Errorf(providers.ErrInvalid, Name, "create", "user %q: this host maps only your own user's id (%s) into sandboxes, so a sandbox's user can only be you; to give sandboxes users of their own, %s", name, me, subIDHint)
}

// subIDHint says how an unprivileged host user's sandboxes get more ids
// than the user's own.
const subIDHint = "install newuidmap and newgidmap (the uidmap package on Debian and Ubuntu) " +
	"and give your host user ranges in /etc/subuid and /etc/subgid " +
	"(`sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $(id -un)`), " +
	"then stop and start the sandbox; or run the sandbox as root"

// unmappedUser is the refusal of user name (u) that the runner could not
// become (err): its ids are outside the sandbox's mappings, which the
// runner reads from /proc/self/uid_map. With one id mapped, the note says
// how to get more.
func unmappedUser(name string, u sandboxUser, err error) error {
	maps, _ := readFile("/proc/self/uid_map")
	ranges := mappedRanges(string(maps))
	single := len(ranges) == 0 || len(ranges) == 1 && ranges[0] == strconv.Itoa(os.Getuid())
	if !single {
		return fmt.Errorf("user %q (uid %d, gid %d): this sandbox maps only the ids %s (%v): %w", name, u.uid, u.gid, strings.Join(ranges, ", "), err, errNoUser)
	}
	return fmt.Errorf("user %q (uid %d): this sandbox maps only its own user's id (%d); to use other users, %s: %w", name, u.uid, os.Getuid(), subIDHint, errNoUser)
}

// mappedRanges are the ids inside that a uid_map or gid_map (of
// /proc/PID) maps, as "first-last" (or "id") in order, adjacent ranges
// merged.
func mappedRanges(maps string) []string {
	type span struct{ first, size int }
	var spans []span
	for _, line := range strings.Split(maps, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		first, err1 := strconv.Atoi(f[0])
		size, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && size > 0 {
			spans = append(spans, span{first, size})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.first - b.first })
	var out []string
	for i := 0; i < len(spans); {
		first, end := spans[i].first, spans[i].first+spans[i].size
		for i++; i < len(spans) && spans[i].first <= end; i++ {
			end = max(end, spans[i].first+spans[i].size)
		}
		if end-first == 1 {
			out = append(out, strconv.Itoa(first))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", first, end-1))
		}
	}
	return out
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
	// /workspace is made by the host: root's inside when the host's root
	// made it, else the invoking user's, which is the init's own id.
	if err := unix.Stat(providers.DefaultWorkdir, &st); err == nil && (st.Uid == 0 || int(st.Uid) == os.Getuid()) {
		if err := unix.Chown(providers.DefaultWorkdir, u.uid, u.gid); err != nil {
			return fmt.Errorf("give %s to user %s: %w", providers.DefaultWorkdir, name, err)
		}
	}
	return nil
}

// rootOwnsAccounts gives the sandbox's root its /etc/passwd and
// /etc/group when they are the copies an unprivileged host user's
// sandbox starts with (see Provider.ownAccounts), which the init (that
// user) made: the sandbox's other users, that user included, may read
// them, not change them, as with the host's own files. It makes root's
// home, /root, too (the sandbox of the host's root has it as its
// user's home): commands run as root start there.
func rootOwnsAccounts(cfg *initConfig) error {
	if !cfg.SetID || os.Getuid() == 0 {
		return nil
	}
	switch err := unix.Mkdir("/root", 0o700); err {
	case nil:
		if err := unix.Lchown("/root", 0, 0); err != nil {
			return fmt.Errorf("give /root to the sandbox's root: %w", err)
		}
	case unix.EEXIST:
	default:
		return fmt.Errorf("the home of the sandbox's root: %w", err)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		var st unix.Stat_t
		if err := unix.Lstat(f, &st); err != nil || int(st.Uid) != os.Getuid() {
			continue
		}
		if err := unix.Lchown(f, 0, 0); err != nil {
			return fmt.Errorf("give %s to the sandbox's root: %w", f, err)
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
	b, err := readFile(path)
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
