//go:build linux

package local

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"github.com/agentbox/sandbox/providers"
)

// The host and the init talk over three channels besides stdio:
//
//   - fd 3, control (host → init): initConfig, one frame (see wire.go); a
//     gated exec then waits for a start byte; for operations that stream
//     data in (write, upload), a single commit byte
//     follows once the host has delivered every byte on stdin. EOF without
//     it means "abort": the init discards what it received.
//   - fd 4, status (init → host): statusMsg frames.
//   - stdin/stdout/stderr: the command's streams, or the data of a file
//     operation.
const (
	ctlFD    = 3
	statusFD = 4
	// commitByte confirms that the input stream is complete.
	commitByte = 'C'
	// startByte lets a gated cold init start its command (see
	// initConfig.Gated), and a machine's init start processes (it is in
	// the sandbox's cgroups, see runMachine).
	startByte = 'S'
)

// Init modes: exec and file are one operation each (run by a runner of
// the sandbox's machine, or by a weak-mode init); machine is a sandbox's
// long-lived init (see machine.go); spare is the configuration the
// machine sends to each runner it prepares.
const (
	modeExec    = "exec"
	modeFile    = "file"
	modeMachine = "machine"
	modeSpare   = "spare"
	// modeStandby is an init started ahead of need (see standby.go).
	modeStandby = "standby"
)

// initConfig is everything the init needs; it travels over the control pipe
// and never through argv or the environment.
type initConfig struct {
	Mode string
	// Root is the host directory the new root is mounted on: an
	// overlay of RootLayer (Upper and Work; Skel, an empty directory,
	// is its lower layer), so that every path of the sandbox is
	// writable and persists across stops.
	Root      string
	Skel      string
	RootLayer mountLayer
	// Layers are overlaid at /<Name>: Lower from the host, Upper and
	// Work in the sandbox's state directory.
	Layers []mountLayer
	// Trash is where the work directories of the layers' previous mounts
	// go before the layers are mounted, and Spread says that each layer
	// gets a new work directory each time (see retireWork).
	Trash  string
	Spread bool
	Links  []link
	// Workspace and HomeSrc are host directories bound at /workspace
	// and at Home.
	Workspace string
	HomeSrc   string
	Home      string
	// SharedNet keeps the host's network namespace.
	SharedNet bool
	// Masks are the host paths hidden in the sandbox (see maskedFiles
	// and hostMasks).
	Masks []string
	// Limits are the command's rlimits and the sizes of its tmpfs mounts.
	Limits limits
	// Weak runs without namespaces (see weak.go); TmpSrc is then the
	// host directory standing in for /tmp.
	Weak   bool
	TmpSrc string
	// WeakHidden are host paths inside the system directories that the
	// weak mode's Landlock rules leave out: the tool's state directory
	// (every sandbox's files) and /var/tmp (see roExcept).
	WeakHidden []string
	// stop is closed when the weak-mode init is asked to end (init only).
	stop chan struct{}
	// Resources are the sandbox's requested limits; the host turns them
	// into Limits and cgroups, the init never sees them.
	Resources providers.Resources
	// Gated: the init builds and hardens the sandbox at once but starts
	// the command only after a startByte on the control pipe. The host
	// sends the configuration first and places the init in its cgroups
	// while the init builds its root: moving a process between cgroups
	// can wait for an RCU grace period (milliseconds on cgroup v1), which
	// then overlaps the mounts instead of preceding them.
	Gated bool

	// Exec mode. Background detaches the command (see runBackground).
	Argv       []string
	Env        []string
	Cwd        string
	Background bool
	// TTY runs the command on the terminal its stdin is (see pty.go).
	TTY bool
	// User runs the operation (a command or a file operation) as this
	// user of the sandbox, a name or a uid; empty is the runner's own.
	// KeepHome says that the caller set HOME itself.
	User     string
	KeepHome bool
	// SetID (runners of a sandbox with a range of ids) keeps CAP_SETUID
	// and CAP_SETGID through hardening, for becomeUser.
	SetID bool
	// DefaultUser (machine) is the sandbox's default user, made at
	// start when its /etc/passwd does not have it (see ensureUser).
	DefaultUser string

	// File mode.
	File *fileRequest

	// Machine mode: how long the machine stays without operations
	// before it stops (0: until stopped), and its pid and start time as
	// the host sees them (its record, machinePidFile, which it writes
	// itself).
	IdleNS    int64
	HostPID   int
	HostStart uint64

	// Machine and standby modes: the limit files of the machine's
	// cgroupWork cgroups, their directories relative to the cgroup root
	// CgroupRoot, which the init moves its process starters into once it
	// is in its own cgroups, making them again if they went meanwhile
	// (see machine.joinWork). None for a claimed standby, which joined
	// its own.
	CgroupRoot  string
	WorkCgroups []cgroupPath

	// Standby mode: the cgroups the init makes and moves itself into
	// (IdleNS is how long it waits to be claimed), and whether it yields
	// the CPUs until a claim.
	Cgroups []cgroupPath
	// Nice starts a standby init at standbyNice; SettleNS is how long it
	// waits before it moves into its cgroups; Socket is its socket's
	// name in its directory, which it renames once ready.
	Nice     bool
	SettleNS int64
	Socket   string

	// exeFD is the init's binary, kept for the runners (machine only).
	exeFD int
	// maskSrc is the empty file bound over masked files, kept by a
	// machine's init until its late masks are in place (see
	// machineGate).
	maskSrc string
}

// machineGate is what the host sends a machine's init after its
// configuration and the start byte: the init restricts itself, and lets
// its first runner go on, only once it has it. Masks are the host's
// secrets that the configuration's masks, read from a cache, lacked (see
// Provider.lateMasks): the init hides them before it restricts itself.
type machineGate struct {
	Masks []string
}

// mountLayer is one overlay mount of the new root.
type mountLayer struct {
	Name  string
	Lower string
	// Base, when set, is laid over Lower (see etcBase).
	Base  string
	Upper string
	Work  string
	// Volatile mounts the layer with overlayfs's volatile option (see
	// mountRootLayer; the system layers always are).
	Volatile bool
}

// File operations of the init's file mode.
const (
	opRead     = "read"
	opWrite    = "write"
	opStat     = "stat"
	opList     = "list"
	opMkdir    = "mkdir"
	opRemove   = "remove"
	opRename   = "rename"
	opUpload   = "upload"
	opDownload = "download"
	opGrep     = "grep"
	// opResolve answers with Info.Path, the request's path with every
	// symlink resolved inside the sandbox (see resolvePath).
	opResolve = "resolve"
)

// fileRequest is one file operation, with paths inside the sandbox.
type fileRequest struct {
	Op        string
	Path      string
	To        string
	Mode      fs.FileMode
	Depth     int
	Recursive bool
	Grep      *providers.GrepRequest
	// Direct marks a write whose input is a regular host file, copied
	// to its end (see UploadFile): the host commits nothing, and closes
	// the control pipe only to abort. MTime (Unix nanoseconds, when not
	// zero) is the written file's modification time.
	Direct bool
	MTime  int64
	// NoFollow asks that no symlink be followed in the paths, which were
	// resolved and approved already (see providers.WithNoFollow).
	NoFollow bool
}

// statusMsg is one message on the status pipe.
type statusMsg struct {
	// Exit is the command's status (exec mode): the command ran.
	Exit *int
	// PID is a background command's, once it started.
	PID int
	// Open says that a streaming file operation started and its data
	// follows on stdout.
	Open bool
	// Done ends a file operation successfully; from a holder or a spare
	// it says that it is ready.
	Done bool
	// Err describes a failure; Setup marks one of building the sandbox
	// rather than of the operation, Kind and Errno classify it.
	Err   string
	Setup bool
	Kind  string
	Errno int
	// Landlock is the Landlock ABI version enforced (0: none).
	Landlock int
	// Forked, from a machine's init, says that it started its first
	// runner, which the host is to move into the sandbox's cgroups with
	// it (see runMachine).
	Forked bool

	Info    *providers.FileInfo
	Infos   []providers.FileInfo
	Matches []providers.GrepMatch
}

// Error kinds on the wire.
const (
	kindNotFound    = "notfound"
	kindExists      = "exists"
	kindInvalid     = "invalid"
	kindQuota       = "quota"
	kindUnavailable = "unavailable"
)

// kindOfErrno classifies a system error for the host.
func kindOfErrno(err error) (string, int) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return kindNotFound, 0
		case errors.Is(err, fs.ErrExist):
			return kindExists, 0
		case errors.Is(err, fs.ErrInvalid):
			return kindInvalid, 0
		}
		return "", 0
	}
	switch errno {
	case syscall.ENOENT:
		return kindNotFound, int(errno)
	case syscall.EEXIST:
		return kindExists, int(errno)
	case syscall.EINVAL, syscall.EISDIR, syscall.ENOTDIR, syscall.ENOTEMPTY, syscall.ELOOP,
		syscall.ENAMETOOLONG, syscall.EXDEV, syscall.EBUSY:
		return kindInvalid, int(errno)
	case syscall.ENOSPC, syscall.EDQUOT:
		return kindQuota, int(errno)
	}
	return "", int(errno)
}

// sentinel maps a wire kind to the shared error.
func sentinel(kind string) error {
	switch kind {
	case kindNotFound:
		return providers.ErrNotFound
	case kindExists:
		return providers.ErrExists
	case kindInvalid:
		return providers.ErrInvalid
	case kindQuota:
		return providers.ErrQuota
	case kindUnavailable:
		return providers.ErrUnavailable
	}
	return nil
}

// errorOf turns a failure reported by the init into a provider error named
// after op.
func errorOf(op string, m statusMsg) error {
	msg := m.Err
	if i := strings.LastIndexByte(op, ' '); i >= 0 {
		// "read /w/x" and "/w/x: no such file…": the path once.
		msg = strings.TrimPrefix(msg, op[i+1:]+": ")
	}
	e := &providers.Error{Kind: sentinel(m.Kind), Provider: Name, Op: op, Msg: msg}
	if m.Errno != 0 {
		e.Err = syscall.Errno(m.Errno)
	}
	return e
}
