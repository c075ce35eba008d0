package approval

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitShell(t *testing.T) {
	t.Parallel()
	type seg struct {
		words   string // words joined by "|"
		complex bool
		nested  bool
	}
	tests := []struct {
		name   string
		in     string
		want   []seg
		reason string // reason of the first segment, when complex
	}{
		{"simple", "go test ./...", []seg{{words: "go|test|./..."}}, ""},
		{"and", "go vet && go test", []seg{{words: "go|vet"}, {words: "go|test"}}, ""},
		{"or", "a || b", []seg{{words: "a"}, {words: "b"}}, ""},
		{"semicolon", "a; b;c", []seg{{words: "a"}, {words: "b"}, {words: "c"}}, ""},
		{"pipe", "a | b | c", []seg{{words: "a"}, {words: "b"}, {words: "c"}}, ""},
		{"background", "a & b", []seg{{words: "a"}, {words: "b"}}, ""},
		{"newline", "a\nb\n", []seg{{words: "a"}, {words: "b"}}, ""},
		{"no spaces", "a&&b;c||d|e", []seg{{words: "a"}, {words: "b"}, {words: "c"}, {words: "d"}, {words: "e"}}, ""},
		{"quoted operators stay", `echo "a && b" 'c;d'`, []seg{{words: "echo|a && b|c;d"}}, ""},
		{"escapes", `a\ b "e\"f" \rm r\m 'r'm "r"m`, []seg{{words: "a b|e\"f|rm|rm|rm|rm"}}, ""},
		// sh reads $'…' as a dollar sign and a quoted string, bash decodes
		// it: both readings are reported, and both are complex.
		{"ANSI-C quoting", `$'\x72m'`, []seg{{words: `$\x72m`, complex: true}, {words: "rm", complex: true}}, "$'…' or $\"…\" quoting, which sh and bash read differently"},
		{"comment", "ls # && rm", []seg{{words: "ls"}}, ""},
		{"empty", "", []seg{{}}, ""},
		{"command substitution", "echo $(id)", []seg{{words: "echo|$(id)", complex: true}, {words: "id", nested: true}}, "command substitution"},
		{"backticks", "echo `id`", []seg{{words: "echo|`id`", complex: true}, {words: "id", nested: true}}, "command substitution"},
		{"process substitution", "diff <(a) b", []seg{{words: "diff|<(a)|b", complex: true}, {words: "a", complex: true, nested: true}, {words: "diff", complex: true}, {words: "b", complex: true}}, "process substitution"},
		{"redirect out", "echo hi > f", []seg{{words: "echo|hi", complex: true}}, "redirection"},
		{"redirect append", "echo hi >> f", []seg{{words: "echo|hi", complex: true}}, "redirection"},
		{"redirect in", "wc < f", []seg{{words: "wc", complex: true}}, "redirection"},
		{"fd dup", "a 2>&1", []seg{{words: "a", complex: true}}, "redirection"},
		{"here-doc", "cat <<EOF\nx\nEOF", []seg{{words: "cat", complex: true}}, "here-document"},
		{"here-doc substitution", "cat <<EOF\n$(id)\nEOF", []seg{{words: "cat", complex: true}, {words: "id", nested: true}}, "here-document"},
		{"here-string", "cat <<< hi", []seg{{words: "cat", complex: true}, {words: "cat|hi", complex: true}}, "here-string"},
		{"subshell", "(a && b)", []seg{{complex: true}, {words: "a", nested: true}, {words: "b", nested: true}}, "subshell"},
		{"block", "{ a; }", []seg{{complex: true}, {words: "a", nested: true}}, "block"},
		{"function", "f() { rm -rf /; }", []seg{{complex: true}, {complex: true, nested: true}, {words: "rm|-rf|/", nested: true}}, "function definition"},
		{"if", "if a; then b; fi", []seg{{complex: true}, {words: "a", nested: true}, {words: "b", nested: true}}, "if clause"},
		{"for", "for i in 1 2; do b; done", []seg{{complex: true}, {words: "b", nested: true}}, "for loop"},
		{"while", "while a; do b; done", []seg{{complex: true}, {words: "a", nested: true}, {words: "b", nested: true}}, "while loop"},
		{"case", "case x in y) b;; esac", []seg{{complex: true}, {words: "b", nested: true}}, "case clause"},
		{"param", "echo $HOME", []seg{{words: "echo|$HOME", complex: true}}, "parameter expansion"},
		{"param braces", "echo ${A:-x}", []seg{{words: "echo|${A:-x}", complex: true}}, "parameter expansion"},
		{"param in double quotes", `echo "$A"`, []seg{{words: `echo|"$A"`, complex: true}}, "parameter expansion"},
		{"arithmetic", "echo $((1+2))", []seg{{words: "echo|$((1+2))", complex: true}}, "arithmetic expansion"},
		{"assignment", "A=1 rm x", []seg{{words: "rm|x", complex: true}}, "variable assignment"},
		{"export", "export A=1", []seg{{words: "export|A=1", complex: true}}, "declaration (export)"},
		{"brace expansion", "{rm,-rf,/}", []seg{{words: "{rm,-rf,/}", complex: true}}, "brace expansion"},
		{"pipe all", "a |& b", []seg{{words: "a", complex: true}, {words: "b", complex: true}}, "redirection (|&)"},
		{"parse error", `echo ok; rm -rf / "`, []seg{{words: "echo|ok", complex: true}, {words: `rm|-rf|/|`, complex: true}, {words: `rm|-rf|/`, complex: true}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := SplitShell(tt.in)
			var gotS []seg
			for _, s := range got {
				gotS = append(gotS, seg{strings.Join(s.Words, "|"), s.Complex, s.Nested})
			}
			if !slices.Equal(gotS, tt.want) {
				t.Fatalf("SplitShell(%q)\n got %+v\nwant %+v\n(%+v)", tt.in, gotS, tt.want, got)
			}
			if tt.reason != "" && got[0].Reason != tt.reason {
				t.Fatalf("SplitShell(%q)[0].Reason = %q, want %q", tt.in, got[0].Reason, tt.reason)
			}
		})
	}
}

func TestQuoteArgvRoundTrip(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{
		{"ls", "-la"},
		{"echo", "a b", "c;d", "$(id)", "`x`", "'", `"`, "", "~", "{a,b}", "#"},
		{"sh", "-c", "rm -rf / && echo done"},
	} {
		t.Run(strings.Join(argv, " "), func(t *testing.T) {
			t.Parallel()
			segs := SplitShell(QuoteArgv(argv))
			if len(segs) != 1 || segs[0].Complex || !slices.Equal(segs[0].Words, argv) {
				t.Fatalf("SplitShell(QuoteArgv(%q)) = %+v", argv, segs)
			}
		})
	}
}
