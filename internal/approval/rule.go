package approval

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// KindAny in a rule matches requests of every kind.
const KindAny Kind = "*"

// Rule is one parsed `KIND[:PATTERN]` rule. The zero Rule matches nothing;
// build rules with ParseRule.
//
// Matching:
//   - The kind must equal the request's kind, or be `*` (which takes no
//     pattern, or the pattern `*`). A `write` rule also
//     matches `edit` requests, since an edit is a write.
//   - A bare kind (`upload`) and the pattern `*` match every target,
//     including complex shell commands.
//   - An exec pattern is a command pattern, matched against the words of a
//     command segment (see SplitShell): `git status` matches exactly those
//     words; a trailing ` *` (`go test *`) matches the prefix followed by any
//     arguments, or none. Complex segments only match the bare or `*` rule
//     when allowing; deny and ask rules match more eagerly (see
//     MatchSegment).
//   - Any other pattern is a doublestar glob (`/workspace/**`) matched
//     against the cleaned absolute path. A relative pattern is taken from
//     /workspace, except that a pattern starting with `*` is kept as is.
type Rule struct {
	// Kind is the kind matched, or KindAny.
	Kind Kind
	// Pattern is the canonical pattern; empty for a bare kind.
	Pattern string

	words  []string // exec: the fixed words
	prefix bool     // exec: a trailing " *" follows words
}

// ParseRule parses `KIND[:PATTERN]`, e.g. `exec:go test *`,
// `write:/workspace/**`, `download:*` or `upload`. Errors say what is wrong
// and how a valid rule looks.
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, fmt.Errorf("empty rule: want KIND[:PATTERN], e.g. %q", "exec:go test *")
	}
	k, pat, hasPat := strings.Cut(s, ":")
	kind := Kind(strings.TrimSpace(k))
	if kind != KindAny && !slices.Contains(allKinds(), kind) {
		return Rule{}, fmt.Errorf("rule %q: unknown kind %q: want one of %s or *", s, kind, kindList())
	}
	r := Rule{Kind: kind}
	if !hasPat {
		return r, nil
	}
	pat = strings.TrimSpace(pat)
	if pat == "" {
		return Rule{}, fmt.Errorf("rule %q: empty pattern: write %q to match every target", s, string(kind))
	}
	if pat == "*" || pat == "**" {
		r.Pattern = "*"
		return r, nil
	}
	if kind == KindAny {
		return Rule{}, fmt.Errorf("rule %q: kind * takes no pattern but *: write %q or name a kind", s, "*")
	}
	if kind == KindExec {
		words := strings.Fields(pat)
		for i, w := range words {
			if w == "*" && i != len(words)-1 {
				return Rule{}, fmt.Errorf("rule %q: %q may only end a command pattern (%q means %q and any arguments)", s, "*", "go test *", "go test")
			}
		}
		if words[len(words)-1] == "*" {
			r.prefix = true
			words = words[:len(words)-1]
		}
		r.words = words
		r.Pattern = strings.Join(pat2words(words, r.prefix), " ")
		return r, nil
	}
	glob, err := cleanGlob(pat)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	r.Pattern = glob
	return r, nil
}

func pat2words(words []string, prefix bool) []string {
	if prefix {
		return append(slices.Clip(words), "*")
	}
	return words
}

// cleanGlob validates a path pattern and makes it absolute.
func cleanGlob(pat string) (string, error) {
	if strings.IndexByte(pat, 0) >= 0 {
		return "", fmt.Errorf("pattern contains a NUL byte")
	}
	for _, part := range strings.Split(pat, "/") {
		if part == ".." {
			return "", fmt.Errorf("pattern %q contains \"..\": give an absolute pattern such as %q", pat, "/workspace/**")
		}
	}
	if !strings.HasPrefix(pat, "/") && !strings.HasPrefix(pat, "*") {
		pat = "/workspace/" + pat
	}
	if strings.HasPrefix(pat, "/") {
		trailing := strings.HasSuffix(pat, "/") && len(pat) > 1
		// The rule text is trimmed when parsed, so the canonical form must
		// not end in space that cleaning uncovered ("0 /." → "0 "), nor
		// hold what trimming uncovered; clean and trim until stable.
		for {
			clean := strings.TrimSpace(path.Clean(pat))
			if clean == pat {
				break
			}
			pat = clean
		}
		if trailing {
			// "dir/" means everything below dir.
			pat = strings.TrimSuffix(pat, "/") + "/**"
		}
	}
	if !doublestar.ValidatePattern(pat) {
		return "", fmt.Errorf("bad glob %q", pat)
	}
	return pat, nil
}

// String returns the canonical text of the rule; ParseRule(r.String())
// yields an equal rule.
func (r Rule) String() string {
	if r.Pattern == "" {
		return string(r.Kind)
	}
	return string(r.Kind) + ":" + r.Pattern
}

// IsZero reports whether r is the zero Rule, which matches nothing.
func (r Rule) IsZero() bool { return r.Kind == "" }

// anyTarget reports whether the rule matches every target of its kinds.
func (r Rule) anyTarget() bool { return r.Pattern == "" || r.Pattern == "*" }

// MatchesKind reports whether the rule applies to requests of kind k.
func (r Rule) MatchesKind(k Kind) bool {
	switch {
	case r.Kind == "":
		return false
	case r.Kind == KindAny || r.Kind == k:
		return true
	default:
		return r.Kind == KindWrite && k == KindEdit
	}
}

// MatchSegment reports whether the rule's command pattern matches one
// segment.
//
// With strict set (allow rules) a complex segment only matches a rule
// that matches every command, and the words must equal the pattern's
// exactly: a word the shell could still change (a glob such as `r?`)
// never equals a pattern word.
//
// Without strict (deny and ask rules) the match errs towards matching:
// the words of a complex segment are compared too, so that `rm -rf $(pwd)`
// is still caught by `exec:rm *`; a glob matches a pattern word it could
// expand to (`/bin/r[m]` is `rm`); a word holding an expansion matches any
// word, and an unquoted one any number of words; and the command word is
// also compared by its base name (`/bin/rm` is `rm`).
func (r Rule) MatchSegment(seg Segment, strict bool) bool {
	if !r.MatchesKind(KindExec) {
		return false
	}
	if r.anyTarget() {
		return true
	}
	if len(r.words) == 0 {
		return false
	}
	if strict {
		return !seg.Complex && r.matchStrict(seg)
	}
	return r.couldMatch(segWords(seg))
}

// matchStrict reports whether the segment's words are exactly the
// pattern's (followed by any words for a prefix pattern).
func (r Rule) matchStrict(seg Segment) bool {
	n := len(r.words)
	if len(seg.Words) < n || !r.prefix && len(seg.Words) != n {
		return false
	}
	for i := range n {
		if !seg.wordAt(i).plain() || seg.Words[i] != r.words[i] {
			return false
		}
	}
	return true
}

// couldMatch reports whether the words, once the shell has expanded them,
// could be words the pattern matches.
func (r Rule) couldMatch(c cmdWords) bool {
	j := 0
	for i, want := range r.words {
		if j >= len(c.words) {
			return false
		}
		if c.at(j).split {
			return true
		}
		if !c.couldBe(j, want, i == 0) {
			return false
		}
		j++
	}
	if r.prefix {
		return true
	}
	for ; j < len(c.words); j++ {
		if !c.at(j).split {
			return false
		}
	}
	return true
}

// matchAnywhere reports whether the pattern's command word could be any
// of the words: for text that does not parse, where any word may turn out
// to start a command.
func (r Rule) matchAnywhere(c cmdWords) bool {
	if len(r.words) == 0 {
		return false
	}
	for j := range c.words {
		if c.at(j).split || c.couldBe(j, r.words[0], true) {
			return true
		}
	}
	return false
}

// MatchPath reports whether the rule's path pattern matches p, a cleaned
// absolute path. It ignores the kind.
func (r Rule) MatchPath(p string) bool {
	if r.Kind == "" {
		return false
	}
	if r.anyTarget() {
		return true
	}
	ok, err := doublestar.Match(r.Pattern, p)
	return err == nil && ok
}

// Match reports whether the rule allows the whole request: for exec every
// segment must match (strictly, as for allow rules); for other kinds every
// sandbox path the request touches must match.
func (r Rule) Match(req Request) bool {
	if !r.MatchesKind(req.Kind) {
		return false
	}
	if req.Kind == KindExec {
		for _, seg := range req.Segments() {
			if !r.MatchSegment(seg, true) {
				return false
			}
		}
		return true
	}
	for _, p := range req.Paths() {
		if !r.MatchPath(p) {
			return false
		}
	}
	return true
}

func allKinds() []Kind {
	return []Kind{KindExec, KindRead, KindList, KindWrite, KindEdit, KindDelete, KindUpload, KindDownload}
}

func kindList() string {
	var s []string
	for _, k := range allKinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}
