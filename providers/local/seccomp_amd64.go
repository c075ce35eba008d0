//go:build linux

package local

import "golang.org/x/sys/unix"

// auditArch is the seccomp architecture of this build; any other (the i386
// ABI through int 0x80 on x86_64) is killed by the filter.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks syscalls of the x32 ABI, which share the x86_64 architecture
// value: the filter kills them, since their numbers differ from the ones it
// checks.
const x32Bit = 0x40000000
