// Package local is the embedded sandbox provider: it isolates commands on the
// user's own Linux machine with nothing but the kernel and this binary.
//
// Each sandbox is a directory under StateDir/local/<id> holding its metadata,
// its workspace, its home directory and a persistent writable layer. Every
// command and every file operation runs in a fresh init process: the binary
// re-executes itself (see MaybeRunInit) in new user, mount, PID, IPC, UTS,
// cgroup and (unless the network is on) network namespaces. The init then
//
//   - builds a new root on a tmpfs: the host's system directories (/usr,
//     /etc, /opt, /var and the lib/bin directories) read-only as the lower
//     layer of a (volatile) overlayfs whose upper layer lives in the
//     sandbox's state directory, so installs persist across commands while
//     the host never changes; /workspace and HOME bound from the state directory; a private
//     /tmp and /run; a fresh /proc; a minimal /dev; no host /sys, /home,
//     /root or /run, and /etc/shadow and /etc/gshadow masked (for root:
//     replaced by copies without password hashes, in a base layer over /etc
//     shared by the sandboxes, etcbase.go);
//   - pivots into it, sets the hostname and brings up loopback;
//   - hides the host's secrets that the system directories would show
//     (masks.go), applies Landlock (read-only everywhere, writable only where
//     the sandbox may write), drops every capability, sets no_new_privs,
//     makes itself non-dumpable, sets the resource limits (limits.go: rlimits
//     always, a cgroup per command where this user may manage one) and
//     installs the seccomp filter (seccomp.go);
//   - runs the command in a new session, reaps every child, and exits with
//     the command's status, which tears down the PID namespace and kills
//     whatever the command left behind.
//
// File operations run inside the same view (the init's "file" mode), so a
// symlink planted by sandboxed code resolves inside the sandbox and can never
// make the host read or write its own files. Uploads and downloads splice
// file contents between files and pipes (see archive.Writer and
// archive.Reader): an upload's tar stream is a pipe the init reads itself.
//
// A sandbox's directory holds its workspace, HOME and upper layers; the
// overlays' work directories are slots shared by the provider's sandboxes
// (layout.go). A sandbox used again keeps a holder (holder.go) whose
// prepared inits take its next operations; a new sandbox's first
// operation takes a pooled init (pool.go), started ahead of it in fresh
// namespaces, when one waits. Delete renames the sandbox's directory into
// a trash that a detached reaper empties (remove.go); the reaper also
// starts the next pooled init.
//
// Hosts without usable unprivileged user namespaces get an error that says how
// to enable them; SANDBOX_LOCAL_WEAK=1 opts into a labelled, much weaker mode
// without namespaces (weak.go).
package local
