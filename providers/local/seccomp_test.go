//go:build linux

package local

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData encodes struct seccomp_data for x/net/bpf's VM, which loads
// words in network byte order: each 32-bit field is written big-endian at
// the offset the kernel would use, so the filter reads the same values.
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[seccompNrOff:], nr)
	binary.BigEndian.PutUint32(b[seccompArchOff:], arch)
	for i, a := range args {
		off := seccompArgOff + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))       // low half first, as on a little-endian kernel
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32)) // high half
	}
	return b
}

func TestSeccompFilter(t *testing.T) {
	t.Parallel()
	raw, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 255 {
		t.Fatalf("filter has %d instructions; jumps are 8-bit", len(raw))
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	tests := []struct {
		name string
		arch uint32
		nr   uintptr
		args []uint64
		want uint32
	}{
		{"getpid", auditArch, unix.SYS_GETPID, nil, secAllow},
		{"openat", auditArch, unix.SYS_OPENAT, nil, secAllow},
		{"ptrace", auditArch, unix.SYS_PTRACE, nil, secEPERM},
		{"process_vm_readv", auditArch, unix.SYS_PROCESS_VM_READV, nil, secEPERM},
		{"process_vm_writev", auditArch, unix.SYS_PROCESS_VM_WRITEV, nil, secEPERM},
		{"keyctl", auditArch, unix.SYS_KEYCTL, nil, secEPERM},
		{"bpf", auditArch, unix.SYS_BPF, nil, secEPERM},
		{"perf_event_open", auditArch, unix.SYS_PERF_EVENT_OPEN, nil, secEPERM},
		{"userfaultfd", auditArch, unix.SYS_USERFAULTFD, nil, secEPERM},
		{"io_uring_setup", auditArch, unix.SYS_IO_URING_SETUP, nil, secEPERM},
		{"setns", auditArch, unix.SYS_SETNS, nil, secEPERM},
		{"mount", auditArch, unix.SYS_MOUNT, nil, secEPERM},
		{"mount_setattr", auditArch, unix.SYS_MOUNT_SETATTR, nil, secEPERM},
		{"clone-fork", auditArch, unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, secAllow},
		{"clone-thread", auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM}, secAllow},
		{"clone-newuser", auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, secEPERM},
		{"clone-newnet", auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, secEPERM},
		{"clone3", auditArch, unix.SYS_CLONE3, nil, secENOSYS},
		{"unshare-files", auditArch, unix.SYS_UNSHARE, []uint64{unix.CLONE_FILES}, secAllow},
		{"unshare-newns", auditArch, unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS}, secEPERM},
		{"unshare-newtime", auditArch, unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWTIME}, secEPERM},
		{"ioctl-tiocsti", auditArch, unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, secEPERM},
		{"ioctl-tiocsti-high-bits", auditArch, unix.SYS_IOCTL, []uint64{0, 0xffffffff00000000 | unix.TIOCSTI}, secEPERM},
		{"ioctl-tioclinux", auditArch, unix.SYS_IOCTL, []uint64{0, unix.TIOCLINUX}, secEPERM},
		{"ioctl-tiocgwinsz", auditArch, unix.SYS_IOCTL, []uint64{0, unix.TIOCGWINSZ}, secAllow},
		{"foreign-arch", unix.AUDIT_ARCH_I386, unix.SYS_GETPID, nil, secKill},
	}
	if x32Bit != 0 {
		tests = append(tests, struct {
			name string
			arch uint32
			nr   uintptr
			args []uint64
			want uint32
		}{"x32", auditArch, x32Bit | unix.SYS_GETPID, nil, secKill})
	}
	for _, tc := range tests {
		got, err := vm.Run(seccompData(tc.arch, uint32(tc.nr), tc.args...))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if uint32(got) != tc.want {
			t.Errorf("%s: filter returns %#x, want %#x", tc.name, uint32(got), tc.want)
		}
	}
}
