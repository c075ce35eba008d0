//go:build linux

// Package local is the embedded sandbox provider: it isolates commands on the
// user's own Linux machine with nothing but the kernel and this binary.
//
// Each sandbox is a directory under StateDir/local/<id> holding its metadata,
// its workspace, its home directory and its writable layers. A running
// sandbox is a machine (machine.go): one long-lived init, this binary
// re-executed (see MaybeRunInit) in new user, mount, PID, IPC, UTS and
// cgroup namespaces, in the sandbox's cgroups (on cgroup v1 above the work
// cgroups that hold the pids and memory limits and every other process of
// the sandbox, see cgroupWork). The init
//
//   - builds the sandbox's root: an overlay whose upper layer is the
//     sandbox's own (so every path is writable and persists), the host's
//     system directories (/usr, /etc, /opt, /var and the lib/bin
//     directories) as lower layers of overlays on top of it, whose upper
//     layers are the sandbox's too (so installs persist while the host
//     never changes); /workspace and HOME bound from the state directory;
//     a private /tmp and /run (cleared at every start, like a reboot); a
//     fresh /proc; a minimal /dev; no host /sys, /home, /root or /run, and
//     /etc/shadow and /etc/gshadow masked (for root: replaced by copies
//     without password hashes, in a base layer over /etc shared by the
//     sandboxes, etcbase.go);
//   - pivots into it, sets the hostname, hides the host's secrets that the
//     system directories would show (masks.go), makes the sandbox's own
//     network namespace (loopback only) beside the host's, and restricts
//     itself with Landlock;
//   - starts runners (machineinit.go, runner.go): processes of the
//     sandbox that restrict themselves with Landlock, drop every
//     capability, set their resource limits
//     (limits.go) and the seccomp filter (seccomp.go), and then run one
//     operation each, a command or a file operation, in the network the
//     operation asks for. A command runs in a session of its own; what it
//     leaves running lives on until it ends or the machine stops.
//
// File operations run inside the sandbox's view (fileserver.go), so a
// symlink planted by sandboxed code resolves inside the sandbox and can
// never make the host read or write its own files. Uploads and downloads
// splice file contents between files and pipes (see archive.Writer and
// archive.Reader).
//
// A machine stops when asked (Stop), after its auto-stop interval without
// operations, or when deleted; the next operation starts it again. Delete
// kills the machine, renames the sandbox's directory into a trash and lets
// a detached reaper empty it (remove.go).
//
// Hosts without usable unprivileged user namespaces get an error that says how
// to enable them; SANDBOX_LOCAL_WEAK=1 opts into a labelled, much weaker mode
// without namespaces (weak.go), in which every operation is a process of
// its own and nothing outlives it.
package local
