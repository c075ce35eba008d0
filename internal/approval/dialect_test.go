package approval

import (
	"strings"
	"testing"
)

// decide evaluates an agent's command under the given allow and deny rules.
func decide(t *testing.T, allow, deny []string, cmd string) Effect {
	t.Helper()
	p := testPolicy(t, "", allow, deny, false)
	got, _ := p.Evaluate(Request{Source: SourceAgent, Kind: KindExec, Target: cmd})
	return got
}

// TestDialectAttacks checks command lines that sh (dash) and bash read
// differently, or that do not parse: an exact or prefix allow rule never
// matches them, and a deny rule sees the command in every reading.
func TestDialectAttacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cmd   string
		allow string // a rule that must not allow cmd; "" for none
		deny  string // a rule that must deny cmd
	}{
		// $'…': bash reads one word, sh a dollar sign, a quoted string and
		// then more commands.
		{"ansi-c exact", `git status$'\0\';touch /workspace/PWN;#'`, "exec:git status", "exec:touch *"},
		{"ansi-c escaped quote", `git status$'\';touch /workspace/PWN;#'`, "exec:git status", "exec:touch *"},
		{"ansi-c prefix", `git status $'x\';rm -rf /;#'`, "exec:git status *", "exec:rm *"},
		{"ansi-c in plan word", `go test $'\';rm -rf / #'`, "exec:go test *", "exec:rm *"},
		{"ansi-c hex command", `$'\x72m' -rf /`, "exec:$\\x72m *", "exec:rm *"},
		{"ansi-c octal command", `$'\162\155' -rf /`, "", "exec:rm *"},
		{"ansi-c unicode command", `$'\u0072m' -rf /`, "", "exec:rm *"},
		{"ansi-c after separator", `git status;$'\x72m' x`, "exec:git status", "exec:rm *"},
		{"ansi-c exact echo", `echo $'a'`, "exec:echo $a", ""},
		// $"…": bash reads "…", sh a dollar sign and "…".
		{"dollar double quote command", `$"rm" x`, "", "exec:rm *"},
		{"dollar double quote arg", `echo $"x"`, "exec:echo x", ""},
		{"dollar double quote exact", `git $"status"`, "exec:git status", ""},
		// Parse failures in one dialect or both.
		{"test clause then newline", "[[ x\n'r'm -f victim", "exec:[[ *", "exec:rm *"},
		{"test clause double quotes", "[[ x\n\"r\"m -f victim", "", "exec:rm *"},
		{"test clause backslash", "[[ x\nr\\m -f victim", "", "exec:rm *"},
		{"test clause leading backslash", "[[ x\n\\rm -f victim", "", "exec:rm *"},
		{"stray fi", "'r'm x; fi", "exec:'r'm *", "exec:rm *"},
		{"stray done", `r\m x; done`, "", "exec:rm *"},
		{"stray esac", `"r"m x; esac`, "", "exec:rm *"},
		{"stray paren", `\rm x )`, "", "exec:rm *"},
		{"unterminated quote", `echo ok; rm -rf / "`, "exec:echo *", "exec:rm *"},
		{"unterminated quote hides command", `echo ok "; rm -rf /`, "exec:echo *", "exec:rm *"},
		{"ansi-c in broken text", "$'\\x72m' x; fi", "", "exec:rm *"},
		{"path in broken text", "/bin/r'm' x; fi", "", "exec:rm *"},
		{"glob in broken text", "/bin/r? x; fi", "", "exec:rm *"},
		{"wrapper in broken text", "sudo 'r'm x; fi", "", "exec:rm *"},
		{"env -S in broken text", "env -S'rm x'; fi", "", "exec:rm *"},
		// Bash-only syntax.
		{"test clause", "[[ -n x ]] && rm x", "", "exec:rm *"},
		{"arithmetic command", "((1)) && rm x", "", "exec:rm *"},
		{"double paren subshell", "((git status))", "exec:git status", ""},
		{"arithmetic expansion", "git status $((0))", "exec:git status *", ""},
		{"function keyword", "function f { rm x; }; f", "exec:f", "exec:rm *"},
		{"process substitution", "diff <(rm x) y", "exec:diff *", "exec:rm *"},
		{"brace expansion command", "{rm,x}", "exec:{rm,x}", "exec:rm *"},
		{"brace expansion args", "git {status,x}", "exec:git *", ""},
		{"pipe all", "git status |& rm x", "exec:git status", "exec:rm *"},
		{"ampersand redirect", "git status &> /workspace/x", "exec:git status", ""},
		{"ampersand redirect dash reading", "git status &>/etc/passwd", "exec:git status", ""},
		{"extglob", "rm @(x|y)", "exec:rm *", "exec:rm *"},
		{"here-string", "cat <<< x; rm y", "exec:cat *", "exec:rm *"},
		{"here-doc", "cat <<EOF\n$(rm x)\nEOF", "exec:cat *", "exec:rm *"},
		{"here-doc body", "cat <<EOF\nrm x\nEOF", "exec:cat *", ""},
		{"coproc", "coproc rm x", "exec:coproc *", "exec:rm *"},
		{"time keyword", "time rm x", "exec:time *", "exec:rm *"},
		{"select", "select x in a; do rm x; done", "", "exec:rm *"},
		{"array", "a=(rm x); \"${a[@]}\"", "", "exec:rm *"},
		{"let", "let x=1; rm y", "exec:let *", "exec:rm *"},
		{"append assignment", "a+=x git status", "exec:git status", ""},
		{"declare", "declare x=1 && rm y", "exec:declare *", "exec:rm *"},
		{"export changes PATH", "export PATH=/tmp/evil; git status", "exec:export *", ""},
		// Line continuation and quoting that both dialects read alike.
		{"backslash newline in command", "r\\\nm x", "", "exec:rm *"},
		{"backslash newline in operator", "git status &\\\n& rm x", "exec:git status", "exec:rm *"},
		{"quoted command", `'r'm x`, "", "exec:rm *"},
		{"escaped command", `\rm x`, "", "exec:rm *"},
		// Bytes a program may cut the line at.
		{"nul byte", "git status\x00; rm x", "exec:git status", "exec:rm *"},
		{"nul byte in quotes", "rm \"\x00\" x", "exec:rm *", "exec:rm *"},
		{"invalid utf-8", "git status \xff; rm x", "exec:git status *", "exec:rm *"},
		// Expansions the splitter cannot evaluate.
		{"tilde", "~/rm x", "exec:~/rm *", "exec:rm *"},
		{"tilde user", "~root/bin/rm x", "", "exec:rm *"},
		{"tilde after equals", "git status a=~", "exec:git status *", ""},
		{"variable command", "X=rm; $X -rf /", "", "exec:rm *"},
		{"empty variable first", "$EMPTY rm -rf /", "", "exec:rm *"},
		{"quoted variable path", `"$D/rm" x`, "", "exec:rm *"},
		{"command substitution command", "$(echo rm) x", "", "exec:rm *"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.allow != "" {
				if got := decide(t, []string{tt.allow}, nil, tt.cmd); got == Allow {
					t.Errorf("allow %q allows %q; segments %+v", tt.allow, tt.cmd, SplitShell(tt.cmd))
				}
				// Only the bare rule allows it (so the test's rule is not
				// simply wrong).
				if got := decide(t, []string{"exec"}, nil, tt.cmd); got != Allow {
					t.Errorf("bare exec does not allow %q: %s", tt.cmd, got)
				}
			}
			if tt.deny != "" {
				if got := decide(t, []string{"exec"}, []string{tt.deny}, tt.cmd); got != Deny {
					t.Errorf("deny %q does not deny %q (%s); segments %+v", tt.deny, tt.cmd, got, SplitShell(tt.cmd))
				}
			}
		})
	}
}

// TestDialectAgreement checks that lines sh and bash read alike keep
// matching allow rules, and that deny rules do not fire on mere mentions.
func TestDialectAgreement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd   string
		allow string
	}{
		{"git status", "exec:git status"},
		{"git status && go test ./...", "exec:go test *"},
		{"git 'status'", "exec:git status"},
		{"git sta\\\ntus", "exec:git status"},
		{"go test ./... # a comment", "exec:go test *"},
		{"ls *.go", "exec:ls *"},
		{"echo 'a $b' \"c\"", "exec:echo *"},
		{"timeout 60 go test ./...", "exec:timeout *"},
		{"sudo -u root apt-get update", "exec:sudo *"},
		{"echo $", "exec:echo *"},
		{`echo \$'a'`, "exec:echo *"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			t.Parallel()
			allow := []string{tt.allow, "exec:git status"}
			if got := decide(t, allow, nil, tt.cmd); got != Allow {
				t.Errorf("allow %q does not allow %q (%s); segments %+v", tt.allow, tt.cmd, got, SplitShell(tt.cmd))
			}
		})
	}
	for _, cmd := range []string{"echo rm", "git rm x", "grep -r rm .", "find . -name rm", "ls -la", "echo 'rm -rf /'",
		"sudo -u rm ls", "timeout 5 ls rm", "command -v rm", "l? x", "[ -f rm ]", "printf '%s' \"$'rm'\""} {
		t.Run("no deny "+cmd, func(t *testing.T) {
			t.Parallel()
			if got := decide(t, []string{"exec"}, []string{"exec:rm *"}, cmd); got != Allow {
				t.Errorf("deny exec:rm * fires on %q (%s); segments %+v", cmd, got, SplitShell(cmd))
			}
		})
	}
}

func TestQuoteArgvPOSIX(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{
		{"echo", "a\nb", "\x01", "\r", "tab\there", "\xff", "é"},
		{"printf", "%s", "it's"},
	} {
		q := QuoteArgv(argv)
		if strings.Contains(q, "$'") {
			t.Errorf("QuoteArgv(%q) = %q uses $'…', which sh does not read", argv, q)
		}
	}
}
