//go:build linux

package local

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter is a short deny list, hand-assembled as classic BPF
// with golang.org/x/net/bpf (which also runs it in the unit tests): the
// kernel surface a sandboxed command never needs and that has a history of
// escapes. Everything else is allowed; Landlock, the namespaces and the
// empty capability sets do the rest.

// Offsets into struct seccomp_data (native, little-endian on both arches).
const (
	seccompNrOff   = 0
	seccompArchOff = 4
	seccompArgOff  = 16 // args[i] at 16+8*i; the low 32 bits first
)

// Return values of the filter.
const (
	secAllow = unix.SECCOMP_RET_ALLOW
	secKill  = unix.SECCOMP_RET_KILL_PROCESS
	secEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	// clone3 passes its flags in memory the filter cannot read: ENOSYS
	// makes libc fall back to clone, whose flags it can.
	secENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// deniedSyscalls fail with EPERM in every sandbox.
var deniedSyscalls = []uintptr{
	// Reading or writing other processes' memory.
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	// Kernel keyrings (shared across namespaces).
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	// Kernel attack surface with a history of escapes.
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	// io_uring opens and connects sockets past any syscall filter.
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	// Joining namespaces.
	unix.SYS_SETNS,
	// The whole mount family: no remounting, unmasking or new trees.
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOVE_MOUNT,
	unix.SYS_OPEN_TREE, unix.SYS_FSOPEN, unix.SYS_FSMOUNT, unix.SYS_FSCONFIG,
	unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
}

// nsFlags are the clone and unshare flags that create namespaces.
// CLONE_NEWTIME shares its bit with the exit signal of clone, so it is only
// checked for unshare.
const (
	cloneNSFlags   = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP
	unshareNSFlags = cloneNSFlags | unix.CLONE_NEWTIME
)

// deniedIoctls are the terminal requests that inject input (TIOCSTI,
// CVE-2017-5226) or reach the console (TIOCLINUX). The kernel reads the
// request as a 32-bit value, so only the low half is compared
// (CVE-2019-10063).
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// seccompFilter assembles the filter for this build's architecture.
func seccompFilter() ([]bpf.RawInstruction, error) {
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArchOff, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: secKill},
		bpf.LoadAbsolute{Off: seccompNrOff, Size: 4},
	}
	if x32Bit != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32Bit, SkipFalse: 1},
			bpf.RetConstant{Val: secKill})
	}
	for _, nr := range deniedSyscalls {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: secEPERM})
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
		bpf.RetConstant{Val: secENOSYS})
	// Each argument check ends in its own allow: the accumulator no longer
	// holds the syscall number after it.
	flagCheck := func(nr uintptr, mask uint32) []bpf.Instruction {
		return []bpf.Instruction{
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 4},
			bpf.LoadAbsolute{Off: seccompArgOff, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: mask, SkipFalse: 1},
			bpf.RetConstant{Val: secEPERM},
			bpf.RetConstant{Val: secAllow},
		}
	}
	prog = append(prog, flagCheck(unix.SYS_CLONE, cloneNSFlags)...)
	prog = append(prog, flagCheck(unix.SYS_UNSHARE, unshareNSFlags)...)
	// Signals with a code other than kill(2)'s reach the machine's init
	// (PID 1, a Go program) as faults of its own: a queued SIGSEGV,
	// SIGBUS, SIGFPE, SIGILL, SIGTRAP or SIGSYS crashes it. No command
	// may queue one to PID 1 (to the process or one of its threads),
	// send one through a pidfd, or have the kernel send one for I/O
	// (F_SETSIG; without it that signal is SIGIO, which the init
	// ignores). Only the low half of each argument counts: the kernel
	// reads pids and fcntl commands as ints.
	argEquals := func(nr uintptr, arg int, val uint32) []bpf.Instruction {
		return []bpf.Instruction{
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 4},
			bpf.LoadAbsolute{Off: uint32(seccompArgOff + 8*arg), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: val, SkipFalse: 1},
			bpf.RetConstant{Val: secEPERM},
			bpf.RetConstant{Val: secAllow},
		}
	}
	prog = append(prog, argEquals(unix.SYS_RT_SIGQUEUEINFO, 0, 1)...)
	prog = append(prog, argEquals(unix.SYS_RT_TGSIGQUEUEINFO, 0, 1)...)
	prog = append(prog, argEquals(unix.SYS_FCNTL, 1, unix.F_SETSIG)...)
	// pidfd_send_signal with a siginfo (its third argument, a pointer).
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PIDFD_SEND_SIGNAL, SkipFalse: 6},
		bpf.LoadAbsolute{Off: seccompArgOff + 16, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: seccompArgOff + 20, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		bpf.RetConstant{Val: secAllow},
		bpf.RetConstant{Val: secEPERM})
	ioctl := []bpf.Instruction{
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IOCTL, SkipFalse: uint8(2 + 2*len(deniedIoctls))},
		bpf.LoadAbsolute{Off: seccompArgOff + 8, Size: 4},
	}
	for _, req := range deniedIoctls {
		ioctl = append(ioctl,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: req, SkipFalse: 1},
			bpf.RetConstant{Val: secEPERM})
	}
	ioctl = append(ioctl, bpf.RetConstant{Val: secAllow})
	prog = append(prog, ioctl...)
	prog = append(prog, bpf.RetConstant{Val: secAllow})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assemble the seccomp filter: %w", err)
	}
	return raw, nil
}

// installSeccomp loads the filter on every thread of the init (TSYNC), after
// the sandbox is built and privileges are dropped, right before the user's
// command starts or the file operation runs; the command inherits it.
// no_new_privs is already set.
func installSeccomp(cfg *initConfig) error {
	raw, err := seccompFilter()
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if e != 0 {
		return fmt.Errorf("install the seccomp filter: %w", e)
	}
	return nil
}
