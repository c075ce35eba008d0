package approval

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"exec:go test *", "exec:git status", "write:/workspace/**", "download:*", "upload",
		"*", "exec:", "write:a/../b", "read:{a,b}/[x]", "exec:* *", "list:/a/", ":", "exec:\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil {
			t.Fatalf("ParseRule(%q) = %q, which does not parse: %v", s, r.String(), err)
		}
		if again.String() != r.String() {
			t.Fatalf("canonical form not stable: %q -> %q -> %q", s, r.String(), again.String())
		}
		// Matching never panics.
		r.Match(Request{Kind: r.Kind, Target: "/workspace/x"})
		r.Match(Request{Kind: KindExec, Target: s})
	})
}

func FuzzSplitShell(f *testing.F) {
	for _, s := range []string{"go test ./... && git status", "a;b|c||d&e\nf", "echo $(id) `x` > f <<EOF\nx\nEOF",
		"if a; then b; fi", "(a) { b; }", `'a;b' "c&&d" e\;f`, "a |& b", "rm -rf / \"", "f() { x; }", "{a,b}", "A=1 b", "# c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		segs := SplitShell(s)
		if len(segs) == 0 {
			t.Fatalf("SplitShell(%q) returned no segments", s)
		}
		unquoted := !strings.ContainsAny(s, "'\"\\$`")
		for _, seg := range segs {
			if seg.Complex {
				continue
			}
			for _, w := range seg.Words {
				if unquoted && strings.ContainsAny(w, ";&|\n") {
					t.Fatalf("SplitShell(%q): simple segment %q has an unsplit operator in word %q", s, seg.Words, w)
				}
			}
			if slices.ContainsFunc(seg.Words, func(w string) bool { return strings.ContainsRune(w, 0) }) {
				continue
			}
			// The words of a simple segment quote back into exactly one
			// simple segment with the same words.
			back := SplitShell(QuoteArgv(seg.Words))
			if len(seg.Words) > 0 && (len(back) != 1 || back[0].Complex || !slices.Equal(back[0].Words, seg.Words)) {
				t.Fatalf("SplitShell(%q): words %q quote to %q, which splits into %+v", s, seg.Words, QuoteArgv(seg.Words), back)
			}
		}
		// Evaluation never panics either.
		p := &Policy{}
		_ = p.AddDeny("exec:rm *", "")
		_ = p.AddAllow("exec:go test *", "")
		p.Evaluate(Request{Source: SourceAgent, Kind: KindExec, Target: s})
		p.Hint(Request{Source: SourceAgent, Kind: KindExec, Target: s})
	})
}

func FuzzPolicyYAML(f *testing.F) {
	for _, s := range []string{
		"default: ask\nallow: [\"exec:go test *\", \"write:/workspace/**\"]\ndeny:  [\"exec:rm *\", \"download:*\"]\n",
		"allow: &a [exec]\ndeny: *a\n", "ask: upload", "- x", "default: [x]", "a: b: c", "allow:\n  - {x: y}\n", "",
		"!!binary x", "&a [*a]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy("fuzz.yaml", data)
		if err != nil {
			if pe := (*PolicyError)(nil); !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, req := range []Request{
			{Source: SourceAgent, Kind: KindExec, Target: "go test ./... && rm -rf /"},
			{Source: SourceUser, Kind: KindWrite, Target: "/workspace/a", Details: Details{Dest: "/etc/b"}},
			{Source: SourceScript, Kind: KindRead, Target: "/x"},
		} {
			p.Evaluate(req)
			p.Hint(req)
		}
	})
}
