//go:build linux

package local

import "golang.org/x/sys/unix"

// auditArch is the seccomp architecture of this build; any other (32-bit
// compat syscalls) is killed by the filter.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is zero: arm64 has no second ABI sharing its architecture value.
const x32Bit = 0
