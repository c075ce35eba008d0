package approval

import (
	"path"
	"regexp"
	"strings"
)

// This file knows the commands that run other commands: wrappers such as
// sudo, env, nice or timeout, shells given a command line (`sh -c`), and
// builtins that read text as commands later (eval, alias, trap). Deny and
// ask rules look through them (see matchLoose), and the splitter marks a
// segment complex when a wrapper's own options are not understood or when
// a builtin changes how later commands are read (commandRisk).

// cmdWords is a command's words together with what is known about each
// (see wordInfo); info is nil when every word is plain text.
type cmdWords struct {
	words []string
	info  []wordInfo
}

func segWords(seg Segment) cmdWords { return cmdWords{words: seg.Words, info: seg.info} }

func (c cmdWords) at(i int) wordInfo {
	if i < len(c.info) {
		return c.info[i]
	}
	return wordInfo{}
}

// from returns the words from index i on.
func (c cmdWords) from(i int) cmdWords {
	if i >= len(c.words) {
		return cmdWords{}
	}
	out := cmdWords{words: c.words[i:]}
	if i < len(c.info) {
		out.info = c.info[i:]
	}
	return out
}

// pick returns the words at the given indexes.
func (c cmdWords) pick(idx []int) cmdWords {
	out := cmdWords{words: make([]string, len(idx))}
	for k, i := range idx {
		out.words[k] = c.words[i]
		if wi := c.at(i); !wi.plain() {
			if out.info == nil {
				out.info = make([]wordInfo, len(idx))
			}
			out.info[k] = wi
		}
	}
	return out
}

// appendWords returns c with words (and their info, which may be nil)
// added.
func (c cmdWords) appendWords(words []string, info []wordInfo) cmdWords {
	hasInfo := c.info != nil
	for i := range words {
		if i < len(info) && !info[i].plain() {
			hasInfo = true
		}
	}
	out := cmdWords{words: append(append([]string(nil), c.words...), words...)}
	if hasInfo {
		out.info = make([]wordInfo, len(out.words))
		copy(out.info, c.info)
		for i := range words {
			if i < len(info) {
				out.info[len(c.words)+i] = info[i]
			}
		}
	}
	return out
}

// plainWords returns words as cmdWords with nothing unknown about them.
func plainWords(words ...string) cmdWords { return cmdWords{words: words} }

// unwrapped is what a wrapper command runs.
type unwrapped struct {
	// argvs are the commands it runs, given as words.
	argvs []cmdWords
	// scripts are command lines that a shell reads.
	scripts []string
	// unknown is set when the wrapper's arguments are not understood; it
	// names the wrapper.
	unknown string
	// risk is set for a builtin that changes how later commands are read
	// (alias, trap, hash, enable).
	risk string
}

// maxUnwrap bounds how deeply wrappers inside wrappers are looked into.
const maxUnwrap = 8

// unwrap returns what the command c runs when it is a wrapper, and false
// for any other command. A command word the shell computes (a glob or an
// expansion) could name any wrapper, so its arguments are not understood.
func unwrap(c cmdWords) (unwrapped, bool) {
	var u unwrapped
	if len(c.words) == 0 {
		return u, false
	}
	if !c.at(0).plain() {
		u.unknown = "a computed command word"
		return u, true
	}
	w := c.words
	name := path.Base(w[0])
	switch name {
	case "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "lksh", "pdksh", "oksh", "loksh",
		"yash", "posh", "fish", "csh", "tcsh":
		unwrapShell(name, c, &u)
	case "eval":
		u.scripts = append(u.scripts, strings.Join(w[1:], " "))
	case "alias":
		u.risk = "alias definition"
		for _, a := range w[1:] {
			if _, val, ok := strings.Cut(a, "="); ok {
				u.scripts = append(u.scripts, val)
			}
		}
	case "trap":
		u.risk = "trap (runs a command later)"
		args := w[1:]
		for len(args) > 0 && (args[0] == "-p" || args[0] == "-l" || args[0] == "--") {
			args = args[1:]
		}
		if len(args) > 0 {
			u.scripts = append(u.scripts, args[0])
		}
	case "hash":
		u.risk = "hash (changes which program a name runs)"
		for i := 1; i+1 < len(w); i++ {
			if strings.HasPrefix(w[i], "-") && strings.Contains(w[i], "p") {
				u.argvs = append(u.argvs, c.from(i+1))
			}
		}
	case "enable":
		u.risk = "enable (changes the builtins)"
	case "export", "readonly", "local", "declare", "typeset":
		// In sh these are plain commands that set variables such as PATH.
		u.risk = "declaration (" + name + ")"
	case "env":
		unwrapEnv(c, &u, 0)
	case "sudo":
		unwrapSpec(name, optSpec{
			flags: "ABbEeHiKklNnPSsVv", args: "aCcDgpRrTtUu", optional: "h",
			long: []string{"askpass", "background", "bell", "close-from=", "chdir=", "preserve-env?", "edit", "group=",
				"set-home", "help", "host=", "login", "remove-timestamp", "reset-timestamp", "list", "non-interactive",
				"preserve-groups", "prompt=", "chroot=", "role=", "stdin", "shell", "type=", "command-timeout=",
				"other-user=", "user=", "version", "validate", "login-class=", "auth-type="},
			assigns: true,
		}, c, &u)
	case "xargs":
		unwrapXargs(c, &u)
	case "find":
		unwrapFind(c, &u)
	case "watch":
		p := optSpec{flags: "bcCeghptrwxv", args: "nq", optional: "d",
			long: []string{"beep", "color", "no-color", "differences?", "errexit", "chgexit", "interval=", "precise",
				"equexit=", "no-rerun", "no-title", "no-wrap", "exec", "help", "version"}}.parse(c, 1)
		if !p.ok {
			u.unknown = name
		}
		if p.rest < len(w) {
			// watch runs its arguments with sh -c, unless -x.
			u.argvs = append(u.argvs, c.from(p.rest))
			u.scripts = append(u.scripts, strings.Join(w[p.rest:], " "))
		}
	case "busybox", "toybox":
		if len(w) > 1 && !strings.HasPrefix(w[1], "-") {
			u.argvs = append(u.argvs, c.from(1))
		}
	case "flock":
		unwrapFlock(c, &u)
	case "su", "runuser":
		unwrapSu(name, c, &u)
	case "sg":
		i := 1
		if i < len(w) && w[i] == "-" {
			i++
		}
		i++ // the group
		if i < len(w) && w[i] == "-c" {
			i++
		}
		if i < len(w) {
			u.scripts = append(u.scripts, strings.Join(w[i:], " "))
		}
	case "script":
		p := optSpec{flags: "aefqhV", args: "EoIOTBm", optional: "t", scripts: "c", permute: true,
			long: []string{"append", "command!", "echo=", "return", "flush", "force", "log-io=", "log-in=", "log-out=",
				"log-timing=", "logging-format=", "output-limit=", "quiet", "timing?", "help", "version"}}.parse(c, 1)
		if !p.ok {
			u.unknown = name
		}
		u.scripts = append(u.scripts, p.scripts...)
	case "bwrap":
		unwrapBwrap(c, &u)
	case "gdb":
		for i, a := range w {
			if a == "--args" {
				u.argvs = append(u.argvs, c.from(i+1))
				break
			}
		}
	case "valgrind", "firejail":
		// Every option is one word: --name or --name=value.
		i := 1
		for i < len(w) && strings.HasPrefix(w[i], "-") {
			i++
			if w[i-1] == "--" {
				break
			}
		}
		if i < len(w) {
			u.argvs = append(u.argvs, c.from(i))
		}
	case "parallel", "sem", "perf":
		// Too many forms to read: look at every word.
		u.unknown = name
	default:
		sp, ok := wrapperSpec(name)
		if !ok {
			return u, false
		}
		unwrapSpec(name, sp, c, &u)
	}
	return u, true
}

// wrapperSpec returns the options of a wrapper that runs the command
// following its options (and operands).
func wrapperSpec(name string) (optSpec, bool) {
	switch name {
	case "command":
		return optSpec{flags: "pvV"}, true
	case "builtin", "nohup", "catchsegv", "nocache", "unbuffer", "torify":
		return optSpec{flags: "p", long: []string{"help", "version"}}, true
	case "exec":
		return optSpec{flags: "cl", args: "a"}, true
	case "time":
		return optSpec{flags: "apqvV", args: "fo", long: []string{"format=", "output=", "append", "portability", "quiet", "verbose", "help", "version"}}, true
	case "setsid":
		return optSpec{flags: "cfwhV", long: []string{"ctty", "fork", "wait", "help", "version"}}, true
	case "nice":
		return optSpec{args: "n", long: []string{"adjustment=", "help", "version"}, digits: true}, true
	case "ionice":
		return optSpec{flags: "thV", args: "cnpPu", long: []string{"class=", "classdata=", "pid=", "pgid=", "uid=", "ignore", "help", "version"}}, true
	case "stdbuf":
		return optSpec{args: "ioe", long: []string{"input=", "output=", "error=", "help", "version"}}, true
	case "timeout":
		return optSpec{flags: "fpv", args: "ks", long: []string{"kill-after=", "signal=", "foreground", "preserve-status", "verbose", "help", "version"}, operands: 1}, true
	case "taskset":
		return optSpec{flags: "acphV", long: []string{"all-tasks", "cpu-list", "pid", "help", "version"}, operands: 1}, true
	case "chrt":
		return optSpec{flags: "abdefimoprRvhV", args: "TPD", long: []string{"all-tasks", "batch", "deadline", "ext", "fifo", "idle", "max",
			"other", "pid", "rr", "reset-on-fork", "verbose", "sched-runtime=", "sched-period=", "sched-deadline=", "help", "version"}, operands: 1}, true
	case "setpriv":
		return optSpec{flags: "dhV", long: []string{"dump", "nnp", "no-new-privs", "keep-groups", "clear-groups", "init-groups", "reset-env",
			"reuid=", "regid=", "ruid=", "euid=", "rgid=", "egid=", "groups=", "inh-caps=", "ambient-caps=", "bounding-set=", "securebits=",
			"pdeathsig=", "selinux-label=", "apparmor-profile=", "landlock-access=", "landlock-rule=", "seccomp-filter=", "help", "version"}}, true
	case "chroot":
		return optSpec{long: []string{"userspec=", "groups=", "skip-chdir", "help", "version"}, operands: 1}, true
	case "unshare":
		return optSpec{flags: "muinpUCTfrchV", args: "RwSGl", long: []string{"mount?", "uts?", "ipc?", "net?", "pid?", "user?", "cgroup?",
			"time?", "fork", "kill-child?", "mount-proc?", "map-user=", "map-group=", "map-users=", "map-groups=", "map-root-user",
			"map-current-user", "map-auto", "propagation=", "setgroups=", "root=", "wd=", "setuid=", "setgid=", "monotonic=", "boottime=",
			"keep-caps", "load-interp=", "help", "version"}}, true
	case "nsenter":
		return optSpec{flags: "aeFZchV", args: "tSGWN", optional: "muinpUCTrw", long: []string{"all", "target=", "mount?", "uts?", "ipc?",
			"net?", "pid?", "user?", "cgroup?", "time?", "setuid=", "setgid=", "preserve-credentials", "root?", "wd?", "wdns=", "env",
			"no-fork", "follow-context", "join-cgroup", "keep-caps", "user-parent", "net-socket=", "help", "version"}}, true
	case "strace":
		return optSpec{flags: "cCdDfFhiknqrtTvVwxyzZY", args: "abeEIoOpPsSuUX", long: []string{"output=", "trace=", "signal=", "status=",
			"string-limit=", "user=", "env=", "attach=", "summary-only", "summary", "follow-forks", "output-separately", "quiet?",
			"decode-fds?", "no-abbrev", "verbose=", "abbrev=", "raw=", "read=", "write=", "inject=", "fault=", "seccomp-bpf",
			"timestamps?", "relative-timestamps?", "syscall-times?", "instruction-pointer", "stack-trace", "help", "version"}}, true
	case "ltrace":
		return optSpec{flags: "bcCfhiLrStTV", args: "aAeDFlnopsuxw", long: []string{"output=", "align=", "demangle", "library=", "indent=", "help", "version"}}, true
	case "doas":
		return optSpec{flags: "Lns", args: "aCu"}, true
	case "pkexec":
		return optSpec{long: []string{"user=", "disable-internal-agent", "keep-cwd", "help", "version"}}, true
	case "fakeroot":
		return optSpec{flags: "uhv", args: "lsib", long: []string{"lib=", "faked=", "unknown-is-real", "help", "version"}}, true
	case "faketime":
		return optSpec{flags: "mfh", long: []string{"exclude-monotonic", "date-prog=", "help", "version"}, operands: 1}, true
	case "proxychains", "proxychains4":
		return optSpec{flags: "qh", args: "f"}, true
	case "torsocks":
		return optSpec{flags: "idqh", args: "upaP", long: []string{"user=", "pass=", "address=", "port=", "isolate", "quiet", "debug", "help", "version"}}, true
	case "numactl":
		return optSpec{flags: "lHsabuTthV", args: "ipmNCPwoLSfMIc", long: []string{"interleave=", "preferred=", "membind=", "cpunodebind=",
			"physcpubind=", "localalloc", "hardware", "show", "all", "balancing", "preferred-many=", "weighted-interleave=", "offset=",
			"length=", "shm=", "file=", "huge", "touch", "strict", "shmmode=", "shmid=", "cpubind=", "help", "version"}}, true
	case "cgexec":
		return optSpec{args: "g", long: []string{"sticky"}}, true
	case "prlimit":
		return optSpec{flags: "hV", args: "po", optional: "Acdefilmnqrstuvxy", long: []string{"as?", "core?", "cpu?", "data?", "fsize?",
			"locks?", "memlock?", "msgqueue?", "nice?", "nofile?", "nproc?", "rss?", "rtprio?", "rttime?", "sigpending?", "stack?",
			"pid=", "output=", "noheadings", "raw", "verbose", "help", "version"}}, true
	case "dbus-run-session":
		return optSpec{long: []string{"config-file=", "dbus-daemon=", "help", "version"}}, true
	case "xvfb-run":
		return optSpec{flags: "ahl", args: "efnpsw", long: []string{"auto-servernum", "auto-display", "error-file=", "server-num=",
			"xauth-protocol=", "server-args=", "wait=", "listen-tcp", "help"}}, true
	case "systemd-run":
		return optSpec{flags: "hqtPGrSd", args: "pEMHu", long: []string{"user", "system", "scope", "unit=", "property=", "description=",
			"slice=", "slice-inherit", "remain-after-exit", "send-sighup", "service-type=", "uid=", "gid=", "nice=", "working-directory=",
			"same-dir", "setenv=", "pty", "pipe", "quiet", "wait", "collect", "shell", "on-active=", "on-boot=", "on-startup=",
			"on-unit-active=", "on-unit-inactive=", "on-calendar=", "on-timezone-change", "on-clock-change", "timer-property=",
			"path-property=", "socket-property=", "no-block", "no-ask-password", "machine=", "host=", "expand-environment=", "help", "version"}}, true
	}
	return optSpec{}, false
}

// isWrapper reports whether name is a command that runs another command.
func isWrapper(name string) bool {
	_, ok := unwrap(plainWords(name))
	return ok
}

// optSpec describes a command's options, as getopt reads them.
type optSpec struct {
	flags    string // short options without an argument
	args     string // short options with an argument (attached or the next word)
	optional string // short options with an optional attached argument
	scripts  string // short options whose argument is a command line
	split    string // short options whose argument is split into more arguments (env -S)
	// long options, without the dashes: "name" takes no argument, "name="
	// one (after = or as the next word), "name?" an optional one after =,
	// "name!" a command line, "name%" arguments to split (env -S).
	long []string
	// operands is the number of words between the options and the command
	// (timeout's duration, chroot's directory).
	operands int
	// permute: options may follow operands (getopt without "+").
	permute bool
	// digits: -NUM is an option (nice -5).
	digits bool
	// assigns: NAME=value words may come between the options and the
	// command (sudo).
	assigns bool
}

// parsedOpts is the outcome of reading a command's options.
type parsedOpts struct {
	// rest is the index of the first word after the options.
	rest int
	// operands are the indexes of the words that are not options, when
	// the options permute.
	operands []int
	scripts  []string
	// split is the argument of a splitting option; rest is the index of
	// the word after it.
	split    string
	hasSplit bool
	// seen maps each option seen (the letter, or "--name") to its argument.
	seen map[string]string
	ok   bool
}

// longOpt finds a long option by its name or an unambiguous prefix, and
// returns its canonical name and kind (' ', '=', '?', '!' or '%').
func (sp optSpec) longOpt(name string) (string, byte, bool) {
	var hit string
	hits := 0
	for _, l := range sp.long {
		n, kind := l, byte(' ')
		if k := l[len(l)-1]; strings.IndexByte("=?!%", k) >= 0 {
			n, kind = l[:len(l)-1], k
		}
		if n == name {
			return n, kind, true
		}
		if strings.HasPrefix(n, name) {
			hit = l
			hits++
		}
	}
	if hits != 1 || name == "" {
		return "", 0, false
	}
	if k := hit[len(hit)-1]; strings.IndexByte("=?!%", k) >= 0 {
		return hit[:len(hit)-1], k, true
	}
	return hit, ' ', true
}

// parse reads the options of c from word start on.
func (sp optSpec) parse(c cmdWords, start int) parsedOpts {
	w := c.words
	p := parsedOpts{seen: map[string]string{}, ok: true}
	i := start
	for i < len(w) {
		a := w[i]
		if a == "--" {
			i++
			if sp.permute {
				for ; i < len(w); i++ {
					p.operands = append(p.operands, i)
				}
			}
			break
		}
		if len(a) < 2 || a[0] != '-' || !c.at(i).plain() {
			if sp.permute {
				p.operands = append(p.operands, i)
				i++
				continue
			}
			break
		}
		if sp.digits && strings.Trim(a, "-+0123456789") == "" {
			p.seen["-"] = a
			i++
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a[2:], "=")
			full, kind, ok := sp.longOpt(name)
			if !ok {
				p.ok = false
				i++
				continue
			}
			switch kind {
			case ' ':
				if hasVal {
					p.ok = false
				}
			case '=', '!', '%':
				if !hasVal {
					i++
					if i >= len(w) {
						p.rest = i
						return p
					}
					val = w[i]
				}
				switch kind {
				case '!':
					p.scripts = append(p.scripts, val)
				case '%':
					p.split, p.hasSplit, p.rest = val, true, i+1
					return p
				}
			}
			p.seen["--"+full] = val
			i++
			continue
		}
	cluster:
		for j := 1; j < len(a); j++ {
			ch := a[j]
			switch {
			case strings.IndexByte(sp.flags, ch) >= 0:
				p.seen[string(ch)] = ""
			case strings.IndexByte(sp.args+sp.scripts+sp.split, ch) >= 0:
				val := a[j+1:]
				if val == "" {
					i++
					if i >= len(w) {
						p.rest = i
						return p
					}
					val = w[i]
				}
				p.seen[string(ch)] = val
				switch {
				case strings.IndexByte(sp.scripts, ch) >= 0:
					p.scripts = append(p.scripts, val)
				case strings.IndexByte(sp.split, ch) >= 0:
					p.split, p.hasSplit, p.rest = val, true, i+1
					return p
				}
				break cluster
			case strings.IndexByte(sp.optional, ch) >= 0:
				p.seen[string(ch)] = a[j+1:]
				break cluster
			default:
				p.ok = false
				break cluster
			}
		}
		i++
	}
	p.rest = i
	return p
}

// unwrapSpec reads a wrapper's options and operands and takes the rest as
// the command it runs.
func unwrapSpec(name string, sp optSpec, c cmdWords, u *unwrapped) {
	p := sp.parse(c, 1)
	if !p.ok {
		u.unknown = name
	}
	u.scripts = append(u.scripts, p.scripts...)
	i := p.rest + sp.operands
	if sp.assigns {
		for i < len(c.words) && isAssignment(c.words[i]) {
			i++
		}
	}
	_, v := p.seen["v"]
	_, vv := p.seen["V"]
	if name == "command" && (v || vv) {
		return // command -v only says what a name is
	}
	if i < len(c.words) {
		u.argvs = append(u.argvs, c.from(i))
	}
}

// isAssignment reports whether w looks like NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && validName(name)
}

func validName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// unwrapShell finds the command line of `sh -c LINE` (and bash -lc LINE,
// bash -o pipefail -c -- LINE, fish --command=LINE, …). A shell given a
// script file or reading its input runs commands that rules cannot see.
func unwrapShell(name string, c cmdWords, u *unwrapped) {
	w := c.words
	hasC := false
	i := 1
	for i < len(w) {
		a := w[i]
		if a == "--" || a == "-" {
			i++
			break
		}
		if !c.at(i).plain() {
			u.unknown = name
			break
		}
		if strings.HasPrefix(a, "--") {
			opt, val, hasVal := strings.Cut(a[2:], "=")
			switch opt {
			case "rcfile", "init-file", "init-command", "debug-output", "debug", "profile":
				if !hasVal {
					i++
				}
			case "command":
				if !hasVal && i+1 < len(w) {
					i++
					val = w[i]
				}
				u.scripts = append(u.scripts, val)
			case "norc", "noprofile", "login", "posix", "noediting", "restricted", "verbose", "version", "help",
				"debugger", "dump-strings", "dump-po-strings", "wordexp", "protected", "interactive", "no-config",
				"private", "no-execute", "print-rusage-self", "features", "emulate":
			default:
				u.unknown = name
			}
			i++
			continue
		}
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			break
		}
		need := 0
		for j := 1; j < len(a); j++ {
			ch := a[j]
			switch {
			case ch == 'c' && a[0] == '-':
				hasC = true
			case ch == 'o' || ch == 'O' || name == "fish" && ch == 'C':
				need++
			case ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			default:
				u.unknown = name
			}
		}
		if name == "fish" && strings.ContainsRune(a[1:], 'C') && i+1 < len(w) {
			u.scripts = append(u.scripts, w[i+1])
		}
		i += 1 + need
	}
	if hasC && i < len(w) {
		u.scripts = append(u.scripts, w[i])
	}
}

// unwrapEnv reads env's options (splitting the string of -S into more
// arguments), its NAME=value words and the command.
func unwrapEnv(c cmdWords, u *unwrapped, depth int) {
	sp := optSpec{flags: "0iv", args: "uCPa", split: "S", long: []string{"ignore-environment", "null", "unset=", "chdir=",
		"split-string%", "debug", "help", "version", "block-signal?", "default-signal?", "ignore-signal?",
		"list-signal-handling", "argv0="}}
	// A lone "-" (before the command) means -i.
	idx := []int{0}
	for i := 1; i < len(c.words); i++ {
		a := c.words[i]
		if a == "-" && c.at(i).plain() {
			continue
		}
		if a == "--" || !strings.HasPrefix(a, "-") {
			for ; i < len(c.words); i++ {
				idx = append(idx, i)
			}
			break
		}
		idx = append(idx, i)
	}
	words := c.pick(idx)
	p := sp.parse(words, 1)
	if !p.ok {
		u.unknown = "env"
	}
	if p.hasSplit {
		if depth >= maxUnwrap {
			u.unknown = "env"
			return
		}
		// env -S 'rm x' y is env rm x y.
		split, rest := lenientWords(p.split), words.from(p.rest)
		more := plainWords("env").appendWords(split.words, split.info).appendWords(rest.words, rest.info)
		unwrapEnv(more, u, depth+1)
		return
	}
	i := p.rest
	for i < len(words.words) && strings.Contains(words.words[i], "=") && words.at(i).plain() {
		i++
	}
	if i < len(words.words) {
		u.argvs = append(u.argvs, words.from(i))
	}
}

// unwrapXargs reads xargs' options; the command (echo by default) gets
// the input as more arguments, or in place of the replace string.
func unwrapXargs(c cmdWords, u *unwrapped) {
	p := optSpec{flags: "0prtxo", args: "aEIdnLPs", optional: "eil", long: []string{"null", "arg-file=", "delimiter=", "eof?",
		"replace?", "max-lines?", "max-args=", "max-procs=", "max-chars=", "interactive", "no-run-if-empty", "verbose",
		"exit", "open-tty", "process-slot-var=", "show-limits", "help", "version"}}.parse(c, 1)
	if !p.ok {
		u.unknown = "xargs"
	}
	if p.rest >= len(c.words) {
		return
	}
	inner := c.from(p.rest)
	repl := ""
	if v, ok := p.seen["I"]; ok {
		repl = v
	}
	for _, k := range []string{"i", "--replace"} {
		if v, ok := p.seen[k]; ok {
			repl = v
			if repl == "" {
				repl = "{}"
			}
		}
	}
	u.argvs = append(u.argvs, replaced(inner, repl))
}

// replaced marks the words of c that contain the placeholder as unknown:
// xargs -I and find -exec put other text there.
func replaced(c cmdWords, placeholder string) cmdWords {
	if placeholder == "" {
		return c
	}
	out := cmdWords{words: c.words, info: make([]wordInfo, len(c.words))}
	for i, w := range c.words {
		out.info[i] = c.at(i)
		if strings.Contains(w, placeholder) {
			out.info[i] = unknownWord()
		}
	}
	return out
}

// unknownWord is a word that may take any value.
func unknownWord() wordInfo {
	return wordInfo{dyn: true, re: "^(?s:.*)$", baseRe: "^(?s:.*)$"}
}

// unwrapFind finds the commands of find's -exec, -execdir, -ok and -okdir.
func unwrapFind(c cmdWords, u *unwrapped) {
	w := c.words
	for i := 1; i < len(w); i++ {
		switch w[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(w) && w[j] != ";" && !(w[j] == "+" && w[j-1] == "{}") {
			j++
		}
		idx := make([]int, 0, j-i-1)
		for k := i + 1; k < j; k++ {
			idx = append(idx, k)
		}
		if len(idx) > 0 {
			u.argvs = append(u.argvs, replaced(c.pick(idx), "{}"))
		}
		i = j
	}
}

// unwrapFlock reads `flock [options] FILE COMMAND…`, `flock [options] FILE
// -c LINE` and `flock -c LINE FILE`.
func unwrapFlock(c cmdWords, u *unwrapped) {
	w := c.words
	p := optSpec{flags: "sxenouFvhV", args: "wE", scripts: "c", long: []string{"shared", "exclusive", "nonblock", "nb", "close",
		"unlock", "no-fork", "verbose", "timeout=", "wait=", "conflict-exit-code=", "command!", "help", "version"}}.parse(c, 1)
	if !p.ok {
		u.unknown = "flock"
	}
	u.scripts = append(u.scripts, p.scripts...)
	i := p.rest + 1 // the lock file or descriptor
	if i >= len(w) {
		return
	}
	switch a := w[i]; {
	case a == "-c" || a == "--command":
		if i+1 < len(w) {
			u.scripts = append(u.scripts, w[i+1])
		}
	case strings.HasPrefix(a, "--command="):
		u.scripts = append(u.scripts, strings.TrimPrefix(a, "--command="))
	case strings.HasPrefix(a, "-c"):
		u.scripts = append(u.scripts, a[2:])
	default:
		u.argvs = append(u.argvs, c.from(i))
	}
}

// unwrapSu reads su and runuser: -c LINE anywhere; `runuser -u USER
// COMMAND…`; and words after the user name, which go to the user's shell.
func unwrapSu(name string, c cmdWords, u *unwrapped) {
	sp := optSpec{flags: "flmpPhV", args: "gGsw", scripts: "c", permute: true, long: []string{"command!", "session-command!", "fast",
		"login", "preserve-environment", "pty", "group=", "supp-group=", "shell=", "whitelist-environment=", "help", "version"}}
	if name == "runuser" {
		sp.args += "u"
		sp.long = append(sp.long, "user=")
	}
	idx := []int{0}
	for i := 1; i < len(c.words); i++ {
		if c.words[i] != "-" { // a login shell
			idx = append(idx, i)
		}
	}
	words := c.pick(idx)
	p := sp.parse(words, 1)
	if !p.ok {
		u.unknown = name
	}
	u.scripts = append(u.scripts, p.scripts...)
	_, user := p.seen["u"]
	if _, ok := p.seen["--user"]; ok {
		user = true
	}
	if user {
		if len(p.operands) > 0 {
			u.argvs = append(u.argvs, words.pick(p.operands))
		}
		return
	}
	if len(p.operands) > 1 {
		// su USER ARGS… passes ARGS to the user's shell: `su root -- -c LINE`.
		args := words.pick(p.operands[1:])
		u.argvs = append(u.argvs, plainWords("sh").appendWords(args.words, args.info))
	}
}

// unwrapBwrap reads bubblewrap's options, each with a fixed number of
// arguments.
func unwrapBwrap(c cmdWords, u *unwrapped) {
	w := c.words
	i := 1
	for i < len(w) {
		a := w[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "--") {
			break
		}
		n, ok := bwrapArgs(a[2:])
		if !ok {
			u.unknown = "bwrap"
		}
		i += 1 + n
	}
	if i < len(w) {
		u.argvs = append(u.argvs, c.from(i))
	}
}

// bwrapArgs returns how many arguments a bubblewrap option takes.
func bwrapArgs(opt string) (int, bool) {
	switch opt {
	case "unshare-all", "share-net", "unshare-user", "unshare-user-try", "unshare-ipc", "unshare-pid", "unshare-net",
		"unshare-uts", "unshare-cgroup", "unshare-cgroup-try", "die-with-parent", "as-pid-1", "new-session", "clearenv",
		"disable-userns", "assert-userns-disabled", "level-prefix", "help", "version":
		return 0, true
	case "argv0", "userns", "userns2", "pidns", "uid", "gid", "hostname", "chdir", "unsetenv", "lock-file", "sync-fd",
		"remount-ro", "exec-label", "file-label", "proc", "dev", "tmpfs", "mqueue", "dir", "seccomp", "add-seccomp-fd",
		"block-fd", "userns-block-fd", "info-fd", "json-status-fd", "cap-add", "cap-drop", "perms", "size", "overlay-src",
		"tmp-overlay", "ro-overlay":
		return 1, true
	case "setenv", "bind", "bind-try", "dev-bind", "dev-bind-try", "ro-bind", "ro-bind-try", "bind-fd", "ro-bind-fd",
		"file", "bind-data", "ro-bind-data", "symlink", "chmod":
		return 2, true
	case "overlay":
		return 3, true
	}
	// --args FD reads more arguments, options or the command, from a file.
	return 0, false
}

// commandRisk returns why a simple command needs the bare exec rule even
// though its words are plain: a builtin that changes how later commands
// are read (an alias definition, trap, hash, enable), or a wrapper whose
// options are not understood, at any depth. It returns "" otherwise.
func commandRisk(words []string) string {
	return risk(plainWords(words...), 0)
}

func risk(c cmdWords, depth int) string {
	u, ok := unwrap(c)
	switch {
	case !ok:
		return ""
	case u.risk != "":
		return u.risk
	case u.unknown != "":
		return "arguments of " + u.unknown + " not understood"
	case depth >= maxUnwrap && len(u.argvs) > 0:
		return "wrappers nested too deeply"
	}
	for _, a := range u.argvs {
		if r := risk(a, depth+1); r != "" {
			return r
		}
	}
	return ""
}

// couldBe reports whether word i of c may be the text want once the shell
// has expanded it; for a command word (command set), also whether its base
// name may be want's base name, as /bin/rm and rm name the same program.
func (c cmdWords) couldBe(i int, want string, command bool) bool {
	wi, w := c.at(i), c.words[i]
	if wi.plain() {
		return w == want || command && path.Base(w) == path.Base(want)
	}
	if matchRe(wi.re, want) {
		return true
	}
	return command && matchRe(wi.baseRe, path.Base(want))
}

// matchRe matches s against the pattern; a pattern that does not compile
// (it holds invalid UTF-8) matches everything.
func matchRe(pattern, s string) bool {
	re, err := regexp.Compile(pattern)
	return err != nil || re.MatchString(s)
}
