package approval

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// Hint says how to allow a request that p denies or asks about: the exact
// --allow flag(s), "or --yes" — or, when a deny or ask rule decided, which
// rule to remove. Callers put it in a DeniedError.
func (p *Policy) Hint(req Request) string {
	return p.hint(req, nil)
}

func (p *Policy) hint(req Request, session []PolicyRule) string {
	v := p.evaluate(req, session)
	switch v.stage {
	case stageDeny:
		return fmt.Sprintf("denied by %s; a deny rule wins over --allow and --yes, so remove it to allow this", v.origin)
	case stageAsk:
		return fmt.Sprintf("%s requires approval; run interactively, or remove that rule", v.origin)
	}
	if p == nil {
		p = &Policy{}
	}
	allow := append(slices.Clip(p.Allow), session...)
	var flags []string
	var notes []string
	if req.Kind == KindExec {
		for _, seg := range req.Segments() {
			if _, ok := covering(allow, Request{Kind: KindExec, Argv: seg.Words}, []Segment{seg}); ok {
				continue
			}
			r := suggestSegment(seg)
			if r == "" {
				r = string(KindExec)
				why := seg.Reason
				if why == "" {
					why = "words a rule cannot spell"
				}
				note := fmt.Sprintf("the command uses %s, which only --allow %s matches", why, quoteFlagValue(r))
				if !slices.Contains(notes, note) {
					notes = append(notes, note)
				}
			}
			if f := "--allow " + quoteFlagValue(r); !slices.Contains(flags, f) {
				flags = append(flags, f)
			}
		}
	} else {
		for _, pth := range req.Paths() {
			if _, ok := covering(allow, Request{Kind: req.Kind, Target: pth}, nil); ok {
				continue
			}
			if f := "--allow " + quoteFlagValue(suggestPath(req.Kind, pth)); !slices.Contains(flags, f) {
				flags = append(flags, f)
			}
		}
	}
	if len(notes) > 0 {
		// Only the bare kind covers a complex segment, and it covers all.
		flags = []string{"--allow " + quoteFlagValue(string(KindExec))}
	}
	s := "allow it with "
	if len(flags) > 0 {
		s += strings.Join(flags, " ") + " or "
	}
	s += "--yes"
	if len(notes) > 0 {
		s = strings.Join(notes, "; ") + "; " + s
	}
	return s
}

// SuggestRules returns the rules that would allow req for the rest of a
// session: for a command, one rule per segment (`exec:go test *` for
// `go test ./...`, `exec:ls *` for `ls -la`, the exact command for a single
// word); for a path, its directory (`write:/workspace/dir/**`). It returns
// nil when no rule short of the bare kind covers req (a complex command).
func SuggestRules(req Request) []string {
	var out []string
	if req.Kind == KindExec {
		for _, seg := range req.Segments() {
			r := suggestSegment(seg)
			if r == "" {
				return nil
			}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
		return out
	}
	for _, p := range req.Paths() {
		if r := suggestPath(req.Kind, p); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func suggestSegment(seg Segment) string {
	w := seg.Words
	if seg.Complex || len(w) == 0 || !spellable(w[:1]) || w[0] == "*" || !seg.wordAt(0).plain() {
		return ""
	}
	if len(w) == 1 {
		return "exec:" + w[0]
	}
	if isSubcommand(w[1]) && seg.wordAt(1).plain() && !isWrapper(path.Base(w[0])) {
		return "exec:" + w[0] + " " + w[1] + " *"
	}
	return "exec:" + w[0] + " *"
}

// spellable reports whether words survive a rule's whitespace splitting.
func spellable(words []string) bool {
	for _, w := range words {
		if w == "" || strings.IndexFunc(w, unicode.IsSpace) >= 0 {
			return false
		}
	}
	return true
}

func isSubcommand(w string) bool {
	if w == "" || len(w) > 32 || w[0] < 'a' || w[0] > 'z' {
		return false
	}
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':') {
			return false
		}
	}
	return true
}

func suggestPath(k Kind, p string) string {
	dir := path.Dir(p)
	if dir == "/" || dir == "." {
		return string(k) + ":" + escapeGlob(p)
	}
	return string(k) + ":" + escapeGlob(dir) + "/**"
}

// escapeGlob quotes the glob metacharacters of a literal path.
func escapeGlob(p string) string {
	var b strings.Builder
	for _, c := range p {
		switch c {
		case '*', '?', '[', ']', '{', '}', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// quoteFlagValue quotes a rule for a command line: in double quotes when
// that is safe, else in single quotes.
func quoteFlagValue(s string) string {
	if !strings.ContainsAny(s, "\"\\$`!\n") {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
