//go:build linux

package local

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// setupNetwork names the UTS namespace and, in a private network namespace,
// brings up loopback so that 127.0.0.1 works inside.
func setupNetwork(cfg *initConfig) error {
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if cfg.SharedNet {
		return nil
	}
	return loopbackUp()
}

// loopbackUp brings up loopback in the calling thread's network
// namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	return nil
}

// landlockRules lists what the sandbox may touch, once its root is built:
// every path of its own root (the whole root is the sandbox's writable
// layer; what must not change is a read-only mount), the ioctls of its
// few device files, and, for the machine's init alone, its binary (to
// start runners) and the sandbox's state directory (its lock and the
// logs), which it holds open and nothing inside can name.
func landlockRules(cfg *initConfig) []landlock.Rule {
	devs := []string{"/dev/ptmx"}
	for _, n := range devNodes {
		devs = append(devs, "/dev/"+n)
	}
	rules := []landlock.Rule{
		landlock.RWDirs("/").WithRefer().WithResolveUnix(),
		landlock.RWDirs("/dev/pts").WithIoctlDev(),
		landlock.RWFiles(devs...).WithIoctlDev(),
	}
	if cfg.Mode == modeMachine {
		rules = append(rules,
			landlock.ROFiles("/proc/self/fd/"+strconv.Itoa(cfg.exeFD)),
			landlock.RWDirs("/proc/self/fd/"+strconv.Itoa(machineDirFD)),
		)
	}
	return rules
}

// applyLandlock restricts the calling process (an init, or a machine's
// runner) and everything it starts, on every thread, and returns the ABI
// version in force (0: the kernel has no Landlock, nothing was enforced).
// Either way it sets no_new_privs.
func applyLandlock(cfg *initConfig) (int, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	c := landlock.Config{
		HandledAccessFS: landlock.V11.HandledAccessFS,
		Scoped:          landlock.V11.Scoped,
	}
	switch cfg.Mode {
	case modeMachine:
		// A machine's runners restrict themselves, each with a domain
		// of its own (one may start before the init restricts itself,
		// see runMachine); the init's scopes would reach across them.
		// Signals need no scope: the sandbox's PID namespace keeps
		// them among its own processes.
		c.Scoped = 0
	case modeSpare:
		// Scopes stop at a runner's domain: a command of one runner
		// could not reach the abstract sockets of another's. In the
		// sandbox's own network namespace, which holds only the
		// sandbox's abstract sockets, none is needed; in the host's,
		// the abstract-socket scope keeps the host's out of reach.
		c.Scoped = 0
		if cfg.SharedNet {
			c.Scoped = landlock.ScopedSet(llsys.ScopeAbstractUnixSocket)
		}
	}
	rules := landlockRules(cfg)
	if cfg.Weak {
		if abi < 1 {
			return 0, errors.New("the weak mode needs Landlock (Linux 5.13 or newer with the landlock LSM enabled)")
		}
		rules = weakLandlockRules(cfg)
		if !cfg.SharedNet {
			// No network namespace: refuse TCP instead (UDP too
			// where the kernel's Landlock handles it).
			c.HandledAccessNet = landlock.V11.HandledAccessNet
		}
	}
	if abi < 1 {
		// No Landlock: no_new_privs still has to be set, on every thread.
		if _, _, e := psx.Syscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
			return 0, fmt.Errorf("no_new_privs: %w", e)
		}
		return 0, nil
	}
	// Restrict sets no_new_privs on every thread before enforcing.
	if err := c.BestEffort().Restrict(rules...); err != nil {
		return 0, fmt.Errorf("landlock: %w", err)
	}
	return abi, nil
}

// dropPrivileges empties the bounding set and clears every capability on
// every thread (which clears the ambient sets too: an ambient capability
// must stay permitted), so that whichever thread forks the command, it is
// born with none, and makes the process non-dumpable, so that /proc/1 of
// the sandbox cannot be opened. no_new_privs is already set on every
// thread by applyLandlock.
func dropPrivileges(cfg *initConfig) error {
	for c := 0; c <= unix.CAP_LAST_CAP+8; c++ {
		_, _, err := psx.Syscall3(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0)
		if err == unix.EINVAL {
			break
		}
		if err == unix.EPERM && cfg.Weak {
			// An unprivileged process without a user namespace
			// cannot touch its bounding set; with no_new_privs and
			// no capabilities it cannot gain any either.
			break
		}
		if err != 0 {
			return fmt.Errorf("drop bounding capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if cfg.SetID {
		// A runner becomes its operation's user later (becomeUser),
		// which drops these too.
		keep := uint32(1)<<unix.CAP_SETUID | uint32(1)<<unix.CAP_SETGID
		data[0].Effective, data[0].Permitted = keep, keep
	}
	_, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	if e != 0 {
		return fmt.Errorf("clear capabilities: %w", e)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("non-dumpable: %w", err)
	}
	return nil
}

// harden applies every restriction, in the only order that works: Landlock
// needs no_new_privs (it sets it), the bounding set needs CAP_SETPCAP, and
// seccomp comes last so that it may deny what the steps before it use.
func harden(cfg *initConfig) (int, error) {
	abi, err := applyLandlock(cfg)
	if err != nil {
		return 0, err
	}
	if err := dropPrivileges(cfg); err != nil {
		return 0, err
	}
	if err := applyResourceLimits(cfg); err != nil {
		return 0, err
	}
	if err := installSeccomp(cfg); err != nil {
		return 0, err
	}
	return abi, nil
}
