package approval

import (
	"testing"
)

// TestDenyThroughWrappers checks that a deny rule sees the command that a
// wrapper, a shell or a builtin runs, however the wrapper's own options
// are written, and a command word given as a path or a glob.
func TestDenyThroughWrappers(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{
		// env
		"env rm x", "env -i rm x", "env - rm x", "env -u HOME rm x", "env --unset=HOME rm x", "env -C /tmp rm x",
		"env A=1 B=2 rm x", "env -- rm x", "env -S 'rm x'", "env -S'rm x'", "env -iS 'rm x'", "env --split-string='rm x'",
		"env --split-string 'A=1 rm x'", "env -S '-i rm x'", "env -vS 'rm x'", "/usr/bin/env -S 'rm -rf /'",
		// shells
		"sh -c 'rm x'", "bash -c -- 'rm x'", "bash -lc 'cd / && rm x'", "bash -o pipefail -c 'rm x'", "bash -O extglob -c 'rm x'",
		"bash --norc -c 'rm x'", "dash -ec 'rm x'", "zsh -c 'rm x'", "fish --command='rm x'", "fish -c 'rm x'", "sh -c 'sh -c \"rm x\"'",
		"busybox rm x", "busybox sh -c 'rm x'", "toybox rm x",
		// builtins
		"command rm x", "command -p rm x", "exec rm x", "exec -a foo rm x", "builtin rm x", "eval 'rm x'", "eval rm x",
		"trap 'rm x' EXIT", "alias x=rm; x y", "alias x='rm -rf'\nx /", "hash -p /bin/rm ls; ls x",
		// privilege and scheduling wrappers
		"sudo rm x", "sudo -u root rm x", "sudo -u root -g wheel -E rm x", "sudo --user=root rm x", "sudo -- rm x",
		"sudo VAR=1 rm x", "sudo -i rm x", "doas rm x", "doas -u root rm x", "pkexec rm x", "pkexec --user root rm x",
		"su -c 'rm x'", "su root -c 'rm x'", "su - root -c 'rm x'", "su -lc 'rm x' root", "su root -- -c 'rm x'",
		"runuser -u nobody -- rm x", "runuser -l nobody -c 'rm x'", "sg wheel 'rm x'", "sg wheel -c 'rm x'",
		"nice rm x", "nice -n 5 rm x", "nice -n5 rm x", "nice -5 rm x", "nice --adjustment=5 rm x",
		"nohup rm x", "nohup -- rm x", "setsid rm x", "setsid -f rm x",
		"timeout 5 rm x", "timeout -s KILL 5 rm x", "timeout --signal=KILL -k 1 5s rm x", "timeout -k5 5 rm x", "timeout --kill-after 1 5 rm x",
		"stdbuf -oL rm x", "stdbuf -o L -e 0 rm x", "stdbuf --output=L rm x",
		"ionice -c3 rm x", "ionice -c 2 -n 7 rm x", "ionice -t rm x",
		"taskset 1 rm x", "taskset -c 0 rm x", "taskset -c 0-3 rm x", "taskset --cpu-list 0 rm x",
		"chrt -f 1 rm x", "chrt --rr 1 rm x", "chrt -o 0 rm x", "chrt -b 0 rm x",
		"flock /tmp/l rm x", "flock -n /tmp/l rm x", "flock -w 5 /tmp/l rm x", "flock -c 'rm x' /tmp/l", "flock /tmp/l -c 'rm x'",
		"flock --command='rm x' /tmp/l", "flock -x /tmp/l --command 'rm x'",
		"setpriv --reuid 1 rm x", "setpriv --reuid=1 --regid=1 --init-groups rm x", "setpriv --no-new-privs rm x",
		"script -qc 'rm x' /dev/null", "script -c 'rm x'", "script /dev/null -qc 'rm x'", "script --command='rm x' -q",
		"time rm x", "time -p rm x", "/usr/bin/time -f %e rm x", "/usr/bin/time -o out rm x",
		"chroot / rm x", "chroot --userspec=1:1 / rm x", "unshare -r rm x", "unshare --map-root-user --net rm x", "unshare -m -u rm x",
		"nsenter -t 1 -m rm x", "nsenter --target=1 --mount rm x",
		"strace rm x", "strace -f -o /dev/null rm x", "strace -e trace=open rm x", "ltrace rm x", "valgrind --tool=none rm x",
		"gdb --args rm x", "firejail --noprofile rm x", "bwrap --ro-bind / / --dev /dev rm x", "bwrap --unshare-all -- rm x",
		"systemd-run --scope rm x", "systemd-run -p CPUQuota=10% rm x", "fakeroot rm x", "fakeroot -- rm x", "faketime '2020-01-01' rm x",
		"proxychains4 -q rm x", "torsocks rm x", "numactl -N 0 rm x", "numactl --cpunodebind=0 rm x", "cgexec -g cpu:x rm x",
		"prlimit --nofile=10 rm x", "prlimit -n10 rm x", "dbus-run-session -- rm x", "xvfb-run -a rm x", "unbuffer rm x", "catchsegv rm x",
		// commands that run commands
		"xargs rm", "find . | xargs rm", "xargs -0 rm", "xargs -n1 rm", "xargs -n 1 -P 4 rm", "xargs -I{} rm {}",
		"xargs -I % sh -c 'rm %'", "xargs -I{} {} -rf /", "xargs --replace rm {}", "xargs -0 -r -- rm",
		"watch rm x", "watch -n 1 'rm x'", "watch -x rm x", "watch -d -n1 rm x",
		"find . -exec rm {} \\;", "find . -execdir rm {} +", "find . -ok rm {} \\;", "find . -name x -exec sh -c 'rm \"$1\"' _ {} \\;",
		"find / -name rm -exec {} -rf x \\;", "parallel rm ::: x y", "sem rm x", "perf stat rm x",
		// nesting
		"sudo env -i nice -n 5 timeout 5 ionice -c3 rm x", "nohup sudo sh -c 'timeout 5 rm x' &", "env -S 'sh -c \"rm x\"'",
		// command words given as a path or a glob
		"/bin/rm x", "/usr/bin/rm x", "./rm x", "/usr/bin/r[m] x", "r? x", "/bin/r* x", "/*/rm x", "r[a-z] x", "/bin/r[!x] x",
		"/???/?? x", "sudo /bin/r? x", "env /bin/r* x", "\\/bin/rm x", "'/bin/rm' x", "/bin/rm\\\n x",
		// wrappers whose command word is computed
		"e?v rm x", "$W rm x", "${W} -c 'rm x'", "\"$SHELL\" -c 'rm x'",
	} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			if got := decide(t, []string{"exec"}, []string{"exec:rm *"}, cmd); got != Deny {
				t.Errorf("deny exec:rm * does not deny %q (%s); segments %+v", cmd, got, SplitShell(cmd))
			}
		})
	}
}

// TestDenyRulePaths checks deny rules whose command word is a path, and
// deny rules with more than one word.
func TestDenyRulePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		deny, cmd string
		want      bool
	}{
		{"exec:/bin/rm *", "rm x", true},
		{"exec:/bin/rm *", "/usr/bin/rm x", true},
		{"exec:/bin/rm *", "sudo rm x", true},
		{"exec:git push *", "git push origin", true},
		{"exec:git push *", "git p?sh origin", true},
		{"exec:git push *", "git $SUB origin", true},
		{"exec:git push *", "sudo -u me git push", true},
		{"exec:git push *", "git status", false},
		{"exec:git push *", "git pull", false},
		{"exec:git push", "git push", true},
		{"exec:git push", "git push x", false},
		{"exec:git push", "git push $EMPTY", true},
	}
	for _, tt := range tests {
		t.Run(tt.deny+" "+tt.cmd, func(t *testing.T) {
			t.Parallel()
			got := decide(t, []string{"exec"}, []string{tt.deny}, tt.cmd) == Deny
			if got != tt.want {
				t.Errorf("deny %q on %q = %v, want %v; segments %+v", tt.deny, tt.cmd, got, tt.want, SplitShell(tt.cmd))
			}
		})
	}
}

// TestWrapperComplexity checks that a wrapper whose options are not
// understood, and builtins that change how later commands are read, need
// the bare exec rule, while understood wrappers stay simple.
func TestWrapperComplexity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd     string
		complex bool
	}{
		{"sudo --frobnicate rm x", true},
		{"sudo -Z rm x", true},
		{"timeout --bogus 5 ls", true},
		{"env --frob ls", true},
		{"nice -q ls", true},
		{"bash -c9 ls", true},
		{"bwrap --args 3 ls", true},
		{"parallel ls ::: a", true},
		{"alias ll='ls -l'", true},
		{"alias", true},
		{"trap 'ls' EXIT", true},
		{"hash -p /bin/ls ll", true},
		{"enable -f x y", true},
		{"export A=1", true},
		{"sudo alias x=y", true},
		{"nice env --frob ls", true},
		{"sudo -u root ls", false},
		{"timeout -s KILL 5 ls", false},
		{"env -i A=1 ls", false},
		{"nice -n 5 ls", false},
		{"bash -lc 'ls'", false},
		{"xargs -0 ls", false},
		{"find . -exec ls {} \\;", false},
		{"find . -exec ls {} +", false},
		{"git status", false},
		{"ls -la", false},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			t.Parallel()
			segs := SplitShell(tt.cmd)
			if len(segs) != 1 || segs[0].Complex != tt.complex {
				t.Fatalf("SplitShell(%q) = %+v, want one segment with complex %v", tt.cmd, segs, tt.complex)
			}
			first := segs[0].Words[0]
			allowed := decide(t, []string{"exec:" + first + " *"}, nil, tt.cmd) == Allow
			if allowed == tt.complex {
				t.Fatalf("exec:%s * allows %q: %v", first, tt.cmd, allowed)
			}
		})
	}
}
