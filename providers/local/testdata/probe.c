/* probe: tries one kernel operation and prints what happened, for the
 * escape tests. "ok" means the attempt succeeded; "denied <ERRNO>" that it
 * failed with that errno. Built by the tests with gcc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <termios.h>
#include <unistd.h>

static const char *ename(int e) {
	switch (e) {
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOSYS: return "ENOSYS";
	case EINVAL: return "EINVAL";
	case ENOENT: return "ENOENT";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ENETUNREACH: return "ENETUNREACH";
	case ESRCH: return "ESRCH";
	case ENOTTY: return "ENOTTY";
	case EBADF: return "EBADF";
	case ENOMEM: return "ENOMEM";
	case EAGAIN: return "EAGAIN";
	case EROFS: return "EROFS";
	case EFAULT: return "EFAULT";
	case ENXIO: return "ENXIO";
	}
	static char buf[32];
	snprintf(buf, sizeof buf, "E%d", e);
	return buf;
}

static int report(long r) {
	if (r < 0) {
		printf("denied %s\n", ename(errno));
	} else {
		printf("ok\n");
	}
	return 0;
}

/* child: a process to attack, stopped until killed. */
static pid_t child(void) {
	pid_t pid = fork();
	if (pid == 0) {
		for (;;) pause();
	}
	return pid;
}

static int ioctl_tty(unsigned long req) {
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0) { printf("noptmx %s\n", ename(errno)); return 0; }
	grantpt(m); unlockpt(m);
	int s = open(ptsname(m), O_RDWR | O_NOCTTY);
	if (s < 0) { printf("nopts %s\n", ename(errno)); return 0; }
	char c = 'x';
	return report(syscall(SYS_ioctl, s, req, &c));
}

int main(int argc, char **argv) {
	if (argc < 2) { fprintf(stderr, "usage: probe OP [ARG]\n"); return 2; }
	const char *op = argv[1];
	const char *arg = argc > 2 ? argv[2] : "";
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(op, "ptrace-child")) {
		pid_t pid = child();
		long r = ptrace(PTRACE_ATTACH, pid, 0, 0);
		int e = errno; kill(pid, SIGKILL); waitpid(pid, 0, 0); errno = e;
		return report(r);
	}
	if (!strcmp(op, "ptrace-init")) return report(ptrace(PTRACE_ATTACH, 1, 0, 0));
	if (!strcmp(op, "ptrace-traceme")) return report(ptrace(PTRACE_TRACEME, 0, 0, 0));
	if (!strcmp(op, "vm-readv") || !strcmp(op, "vm-writev")) {
		pid_t pid = child();
		char buf[8] = {0};
		static char target[8];
		struct iovec l = {buf, sizeof buf}, r = {target, sizeof target};
		long res = op[3] == 'r' ? syscall(SYS_process_vm_readv, pid, &l, 1, &r, 1, 0)
					: syscall(SYS_process_vm_writev, pid, &l, 1, &r, 1, 0);
		int e = errno; kill(pid, SIGKILL); waitpid(pid, 0, 0); errno = e;
		return report(res);
	}
	if (!strcmp(op, "keyctl")) return report(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1));
	if (!strcmp(op, "add_key")) return report(syscall(SYS_add_key, "user", "sandbox-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
	if (!strcmp(op, "request_key")) return report(syscall(SYS_request_key, "user", "sandbox-probe", NULL, 0));
	/* bpf(BPF_MAP_CREATE) and perf_event_open with zeroed attributes:
	 * without the filter these fail with EINVAL/E2BIG/EACCES, never EPERM
	 * from our side. */
	if (!strcmp(op, "bpf")) { char attr[128] = {0}; return report(syscall(SYS_bpf, 0, attr, sizeof attr)); }
	if (!strcmp(op, "perf_event_open")) { char attr[128] = {0}; return report(syscall(SYS_perf_event_open, attr, 0, -1, -1, 0)); }
	if (!strcmp(op, "userfaultfd")) return report(syscall(SYS_userfaultfd, 0));
	if (!strcmp(op, "io_uring_setup")) { char p[120] = {0}; return report(syscall(SYS_io_uring_setup, 4, p)); }
	if (!strcmp(op, "io_uring_enter")) return report(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
	if (!strcmp(op, "io_uring_register")) return report(syscall(SYS_io_uring_register, -1, 0, NULL, 0));
	if (!strcmp(op, "unshare-user")) return report(unshare(CLONE_NEWUSER));
	if (!strcmp(op, "unshare-ns")) return report(unshare(CLONE_NEWNS));
	if (!strcmp(op, "unshare-net")) return report(unshare(CLONE_NEWNET));
	if (!strcmp(op, "unshare-files")) return report(unshare(CLONE_FILES));
	if (!strcmp(op, "clone-user")) {
		long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
		if (r == 0) _exit(0);
		if (r > 0) waitpid(r, 0, 0);
		return report(r);
	}
	if (!strcmp(op, "clone-plain")) {
		long r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (r == 0) _exit(0);
		if (r > 0) waitpid(r, 0, 0);
		return report(r);
	}
	if (!strcmp(op, "clone3")) { uint64_t args[11] = {0}; args[4] = SIGCHLD; long r = syscall(SYS_clone3, args, sizeof args); if (r == 0) _exit(0); if (r > 0) waitpid(r, 0, 0); return report(r); }
	if (!strcmp(op, "fork")) { pid_t p = fork(); if (p == 0) _exit(0); if (p > 0) waitpid(p, 0, 0); return report(p); }
	if (!strcmp(op, "setns")) {
		int fd = open("/proc/self/ns/user", O_RDONLY);
		if (fd < 0) { printf("open %s\n", ename(errno)); return 0; }
		return report(syscall(SYS_setns, fd, 0));
	}
	if (!strcmp(op, "mount")) return report(mount("none", "/tmp", "tmpfs", 0, ""));
	if (!strcmp(op, "umount2")) return report(umount2("/etc/shadow", MNT_DETACH));
	if (!strcmp(op, "pivot_root")) return report(syscall(SYS_pivot_root, "/tmp", "/tmp"));
	if (!strcmp(op, "move_mount")) return report(syscall(SYS_move_mount, -1, "", -1, "", 0));
	if (!strcmp(op, "open_tree")) return report(syscall(SYS_open_tree, AT_FDCWD, "/workspace", 1 /* OPEN_TREE_CLONE */));
	if (!strcmp(op, "fsopen")) return report(syscall(SYS_fsopen, "tmpfs", 0));
	if (!strcmp(op, "fsmount")) return report(syscall(SYS_fsmount, -1, 0, 0));
	if (!strcmp(op, "fsconfig")) return report(syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0));
	if (!strcmp(op, "fspick")) return report(syscall(SYS_fspick, AT_FDCWD, "/", 0));
	if (!strcmp(op, "mount_setattr")) { uint64_t a[4] = {0}; return report(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, a, sizeof a)); }
	if (!strcmp(op, "tiocsti")) return ioctl_tty(TIOCSTI);
	if (!strcmp(op, "tiocsti-high")) return ioctl_tty(0xffffffff00000000UL | TIOCSTI);
	if (!strcmp(op, "tioclinux")) return ioctl_tty(TIOCLINUX);
	if (!strcmp(op, "tiocgwinsz")) { struct winsize w; int m = posix_openpt(O_RDWR|O_NOCTTY); grantpt(m); unlockpt(m); int s = open(ptsname(m), O_RDWR|O_NOCTTY); return report(ioctl(s, TIOCGWINSZ, &w)); }
	if (!strcmp(op, "x32")) { report(syscall(0x40000000 | SYS_getpid)); return 0; }
	if (!strcmp(op, "int80")) {
		/* getpid through the i386 entry point: a foreign architecture. */
		long r;
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
		printf("ok %ld\n", r);
		return 0;
	}
	if (!strcmp(op, "fds")) {
		for (int fd = 0; fd < 4096; fd++)
			if (fcntl(fd, F_GETFD) >= 0) printf("%d ", fd);
		printf("\n");
		return 0;
	}
	if (!strcmp(op, "listen-unix")) { /* abstract (@name): accepts one connection */
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		strncpy(a.sun_path + 1, arg + 1, sizeof a.sun_path - 2);
		socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(arg + 1);
		if (bind(s, (struct sockaddr *)&a, len) || listen(s, 1)) return report(-1);
		printf("listening\n");
		fflush(stdout);
		return report(accept(s, NULL, NULL) < 0 ? -1 : 0);
	}
	if (!strcmp(op, "connect-unix")) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		socklen_t len;
		if (arg[0] == '@') { /* abstract */
			strncpy(a.sun_path + 1, arg + 1, sizeof a.sun_path - 2);
			len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(arg + 1);
		} else {
			strncpy(a.sun_path, arg, sizeof a.sun_path - 1);
			len = sizeof a;
		}
		return report(connect(s, (struct sockaddr *)&a, len));
	}
	if (!strcmp(op, "connect-tcp")) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET};
		char host[64]; int port;
		if (sscanf(arg, "%63[^:]:%d", host, &port) != 2) return 2;
		a.sin_port = htons(port);
		inet_pton(AF_INET, host, &a.sin_addr);
		return report(connect(s, (struct sockaddr *)&a, sizeof a));
	}
	if (!strcmp(op, "malloc")) {
		/* malloc(ARG MiB) without touching it: RLIMIT_DATA refuses at once. */
		size_t mb = strtoull(arg, 0, 10);
		void *p = malloc(mb << 20);
		printf(p ? "ok\n" : "denied ENOMEM\n");
		return 0;
	}
	if (!strcmp(op, "hog")) {
		/* touch memory 64 MiB at a time until refused or killed. */
		size_t total = 0;
		for (;;) {
			char *p = malloc(64 << 20);
			if (!p) { printf("denied ENOMEM after %zu MiB\n", total >> 20); return 0; }
			memset(p, 1, 64 << 20);
			total += 64 << 20;
			if (total >= ((size_t)strtoull(arg, 0, 10) << 20)) { printf("ok %zu MiB\n", total >> 20); return 0; }
		}
	}
	if (!strcmp(op, "procs")) {
		/* fork ARG children that wait; report how many started. */
		int n = atoi(arg), got = 0;
		pid_t *pids = calloc(n, sizeof *pids);
		for (int i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0) { pause(); _exit(0); }
			if (p < 0) break;
			pids[got++] = p;
		}
		printf("%d\n", got);
		for (int i = 0; i < got; i++) { kill(pids[i], SIGKILL); waitpid(pids[i], 0, 0); }
		return 0;
	}
	if (!strcmp(op, "nouserns") && argc > 2) {
		/* Run ARGS with user namespaces turned off: in a user namespace
		 * of its own (mapping the caller's ids to themselves), set that
		 * namespace's user.max_user_namespaces to 0, then exec. The
		 * limit binds everything inside, and the machine's own setting
		 * never changes. */
		uid_t uid = getuid();
		gid_t gid = getgid();
		char map[64];
		if (unshare(CLONE_NEWUSER) < 0) { perror("unshare"); return 1; }
		int fd = open("/proc/self/setgroups", O_WRONLY);
		if (fd >= 0) { write(fd, "deny", 4); close(fd); }
		snprintf(map, sizeof map, "%d %d 1", uid, uid);
		fd = open("/proc/self/uid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0) { perror("uid_map"); return 1; }
		close(fd);
		snprintf(map, sizeof map, "%d %d 1", gid, gid);
		fd = open("/proc/self/gid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0) { perror("gid_map"); return 1; }
		close(fd);
		fd = open("/proc/sys/user/max_user_namespaces", O_WRONLY);
		if (fd < 0 || write(fd, "0", 1) < 0) { perror("max_user_namespaces"); return 1; }
		close(fd);
		execvp(argv[2], argv + 2);
		perror("exec");
		return 127;
	}
	fprintf(stderr, "probe: unknown op %s\n", op);
	return 2;
}
