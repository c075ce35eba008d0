package providers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SessionDir is the directory inside a sandbox under which every session
// keeps its state, one directory (mode 0700) per session name.
const SessionDir = "/tmp/.sandbox-sessions"

// maxSessionName is the longest session name.
const maxSessionName = 64

// SessionKeeper is an optional interface for providers that keep
// ExecRequest.Session themselves (the in-memory fake, which has no real
// shell). Every other provider gets sessions from SessionCommand, which
// the engine applies for it.
type SessionKeeper interface {
	// KeepsSessions reports that Exec honours ExecRequest.Session itself.
	KeepsSessions() bool
}

// ValidSessionName checks a session name: 1 to 64 letters, digits, "_",
// "." or "-", and not "." or "..". The error matches ErrInvalid.
func ValidSessionName(name string) error {
	ok := name != "" && len(name) <= maxSessionName && name != "." && name != ".."
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-')
	}
	if !ok {
		return fmt.Errorf("session name %q: use 1 to %d letters, digits, '_', '.' or '-': %w", name, maxSessionName, ErrInvalid)
	}
	return nil
}

// ForProvider returns req as p should receive it: unchanged when it names
// no session or p is a SessionKeeper that keeps sessions, and rewritten by
// SessionCommand otherwise.
func ForProvider(p Provider, req ExecRequest) (ExecRequest, error) {
	if req.Session == "" {
		return req, nil
	}
	if k, ok := p.(SessionKeeper); ok && k.KeepsSessions() {
		return req, ValidSessionName(req.Session)
	}
	return SessionCommand(req)
}

// SessionCommand turns a request that names a session into a plain
// request any provider runs: /bin/sh -c with a script that restores the
// session's exported variables and working directory from its state
// directory under SessionDir, runs the command in that same shell (eval,
// so `cd`, `export` and `unset` carry over), and saves the state again
// when the shell exits, also through `exit N`. Output, stdin and the exit
// status stay the command's own. A request without a session is returned
// unchanged; an Argv request becomes its quoted command line.
//
// The rules: the first command of a session starts in req.Cwd (or the
// provider's default) with the sandbox's environment plus req.Env. A later
// command starts in the directory the previous one ended in, unless
// req.Cwd is set, which then wins; a saved directory that no longer exists
// is silently replaced by req.Cwd or the default. Its environment is the
// one the previous command exported (an unset variable stays unset), with
// req.Env applied on top. PWD, OLDPWD, SHLVL and _ are not saved (the
// shell sets them itself), nor are shell functions, aliases, options or
// traps. A command that sets its own EXIT trap replaces the one that saves
// the state. Two commands running at once in one session each save their
// own state; the last to end wins.
//
// The command and the environment values never appear in the script's
// text: the command is a positional argument, the values stay in req.Env.
// The error matches ErrInvalid for a bad session name or an environment
// name that is not a shell variable name.
func SessionCommand(req ExecRequest) (ExecRequest, error) {
	if req.Session == "" {
		return req, nil
	}
	if err := ValidSessionName(req.Session); err != nil {
		return req, err
	}
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return req, fmt.Errorf("exec in session %s: exactly one of argv and a shell string must be given: %w", req.Session, ErrInvalid)
	}
	cmd := req.Shell
	if len(req.Argv) > 0 {
		cmd = QuoteShell(req.Argv)
	}
	keep := ""
	if req.Cwd != "" {
		keep = "1"
	}
	names := slices.Sorted(maps.Keys(req.Env))
	for _, n := range names {
		if !isShellName(n) {
			return req, fmt.Errorf("exec in session %s: environment name %q is not a shell variable name: %w", req.Session, n, ErrInvalid)
		}
	}
	argv := append([]string{"/bin/sh", "-c", sessionScript, "sh", cmd, SessionDir + "/" + req.Session, keep}, names...)
	out := req
	out.Argv, out.Shell, out.Session = argv, "", ""
	return out, nil
}

// isShellName reports whether s is a POSIX shell variable name.
func isShellName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// QuoteShell joins argv into one POSIX shell command line that runs it:
// words of only safe characters as they are, others single-quoted.
func QuoteShell(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		safe := a != ""
		for _, c := range a {
			safe = safe && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-./:=@%+,", c))
		}
		if safe {
			words[i] = a
		} else {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// sessionScript is run as: sh -c SCRIPT sh COMMAND STATEDIR KEEPCWD
// ENVNAME…; KEEPCWD is "1" when the request set its own working directory,
// and the ENVNAMEs are the request's variables, re-applied after the
// restore. Every variable of its own starts with __sandbox_ and is not
// exported, so `export -p` never saves one. The special builtins that may
// fail (., unset, export) run under `command`, so that a failure prints a
// message and the shell goes on to run the command.
const sessionScript = `__sandbox_cmd=$1 __sandbox_dir=$2 __sandbox_keep=$3 __sandbox_saved=
shift 3
if [ -f "$__sandbox_dir/env" ]; then
	for __sandbox_n do
		eval "__sandbox_v_$__sandbox_n=\${$__sandbox_n}"
	done
	__sandbox_fresh=$(export -p)
	while IFS= read -r __sandbox_l; do
		case $__sandbox_l in
		'export '*) __sandbox_l=${__sandbox_l#export } ;;
		'declare -x '*) __sandbox_l=${__sandbox_l#declare -x } ;;
		*) continue ;;
		esac
		__sandbox_l=${__sandbox_l%%=*}
		case $__sandbox_l in
		PWD | OLDPWD | SHLVL | _ | '' | [!A-Za-z_]* | *[!A-Za-z0-9_]*) ;;
		*) command unset "$__sandbox_l" 2>/dev/null ;;
		esac
	done <<__sandbox_eof
$__sandbox_fresh
__sandbox_eof
	command . "$__sandbox_dir/env"
	for __sandbox_n do
		eval "command export $__sandbox_n=\"\$__sandbox_v_$__sandbox_n\""
		unset "__sandbox_v_$__sandbox_n"
	done
	if [ -z "$__sandbox_keep" ] && [ -n "${__SANDBOX_SESSION_CWD-}" ]; then
		cd "$__SANDBOX_SESSION_CWD" 2>/dev/null
	fi
	command unset __SANDBOX_SESSION_CWD
	unset __sandbox_fresh __sandbox_l __sandbox_n
fi
set --
__sandbox_save() {
	[ -n "$__sandbox_saved" ] && return
	__sandbox_saved=1
	[ -d "$__sandbox_dir" ] || (umask 077 && command -p mkdir -p "$__sandbox_dir") || return
	command unset PWD OLDPWD SHLVL _ 2>/dev/null
	__SANDBOX_SESSION_CWD=$(command pwd) && command export __SANDBOX_SESSION_CWD &&
		export -p >"$__sandbox_dir/env.$$" &&
		command -p mv -f "$__sandbox_dir/env.$$" "$__sandbox_dir/env"
}
trap '__sandbox_st=$?; __sandbox_save; exit "$__sandbox_st"' EXIT
eval "$__sandbox_cmd"
`
