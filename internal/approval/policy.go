package approval

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// PolicyRule is a rule together with where it came from.
type PolicyRule struct {
	Rule Rule
	// Origin names the rule for messages and the audit log, e.g.
	// `--allow "exec:go test *"` or `policy.yaml:4: deny "exec:rm *"`.
	Origin string
	// By is the Decision.By of a decision this rule makes: "flag",
	// "policy" or "session".
	By string
}

// Policy decides requests without asking anyone: deny rules, ask rules,
// allow rules, --yes, and a default. The zero Policy (and a nil *Policy)
// applies the built-in defaults only. A Policy is not safe for concurrent
// modification; build it fully before handing it to NewGate, which copies
// it.
type Policy struct {
	// Default is the effect for kinds other than read and list when no
	// rule matches and Yes is unset. Empty means the built-in default:
	// allow for requests from SourceUser, ask for every other source.
	// Read and list are allowed unless a rule says otherwise.
	Default Effect
	// DefaultOrigin names where Default was set, e.g. "policy.yaml:1: default ask".
	DefaultOrigin string
	// Yes allows every request that no deny or ask rule matches (--yes).
	Yes bool

	// Allow, Deny and Ask hold the rules in the order they were given;
	// within a list the first matching rule names the decision.
	Allow []PolicyRule
	Deny  []PolicyRule
	Ask   []PolicyRule
}

// AddAllow adds an allow rule given on the command line. origin names it in
// decisions; empty means `--allow "RULE"`.
func (p *Policy) AddAllow(rule, origin string) error {
	return p.add(&p.Allow, "--allow", rule, origin)
}

// AddDeny adds a deny rule given on the command line. origin names it in
// decisions; empty means `--deny "RULE"`.
func (p *Policy) AddDeny(rule, origin string) error {
	return p.add(&p.Deny, "--deny", rule, origin)
}

// AddAsk adds an ask rule. origin names it in decisions; empty means
// `--ask "RULE"`.
func (p *Policy) AddAsk(rule, origin string) error {
	return p.add(&p.Ask, "--ask", rule, origin)
}

func (p *Policy) add(list *[]PolicyRule, flag, rule, origin string) error {
	r, err := ParseRule(rule)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if origin == "" {
		origin = flag + " " + quoteFlagValue(strings.TrimSpace(rule))
	}
	*list = append(*list, PolicyRule{Rule: r, Origin: origin, By: "flag"})
	return nil
}

// Clone returns a deep copy of p (a zero Policy when p is nil).
func (p *Policy) Clone() *Policy {
	if p == nil {
		return &Policy{}
	}
	c := *p
	c.Allow = slices.Clone(p.Allow)
	c.Deny = slices.Clone(p.Deny)
	c.Ask = slices.Clone(p.Ask)
	return &c
}

// Evaluate decides req by the policy alone and names the origin of the
// decision: a rule's origin, "--yes", or a "default: …" text. Order: deny
// rules (deny wins), ask rules, allow rules, --yes, the default.
//
// For exec, deny and ask rules match when they match ANY segment of the
// command, also looking through wrappers such as `sudo`, `env -S`,
// `timeout`, `xargs`, `find -exec` and `sh -c '…'`, and erring towards a
// match (see matchLoose); allow rules must cover EVERY segment, and a
// complex segment is only covered by the bare `exec` or `exec:*` rule.
// For other kinds every path in req.Paths() must match.
//
// Deny rules are a convenience, not a security boundary: a program that
// runs other programs (an interpreter, make, git aliases) can always hide
// a command from them.
func (p *Policy) Evaluate(req Request) (Effect, string) {
	v := p.evaluate(req, nil)
	return v.effect, v.origin
}

// stage says which step of the evaluation decided.
type stage int

const (
	stageDeny stage = iota + 1
	stageAsk
	stageAllow
	stageYes
	stageDefault
)

type verdict struct {
	effect Effect
	origin string
	by     string
	stage  stage
}

func (p *Policy) evaluate(req Request, session []PolicyRule) verdict {
	if p == nil {
		p = &Policy{}
	}
	segs := req.Segments()
	if r, ok := firstLoose(p.Deny, req, segs); ok {
		return verdict{Deny, r.Origin, r.By, stageDeny}
	}
	if r, ok := firstLoose(p.Ask, req, segs); ok {
		return verdict{Ask, r.Origin, r.By, stageAsk}
	}
	allow := p.Allow
	if len(session) > 0 {
		allow = append(slices.Clip(allow), session...)
	}
	if rules, ok := covering(allow, req, segs); ok {
		var origins []string
		for _, r := range rules {
			if !slices.Contains(origins, r.Origin) {
				origins = append(origins, r.Origin)
			}
		}
		return verdict{Allow, strings.Join(origins, ", "), rules[0].By, stageAllow}
	}
	if p.Yes {
		return verdict{Allow, "--yes", "flag", stageYes}
	}
	switch {
	case req.Kind == KindRead || req.Kind == KindList:
		return verdict{Allow, "default: read and list are allowed", "default", stageDefault}
	case p.Default != "":
		origin := p.DefaultOrigin
		if origin == "" {
			origin = "default: " + string(p.Default)
		}
		return verdict{p.Default, origin, "policy", stageDefault}
	case req.Source == SourceUser || req.Source == "":
		return verdict{Allow, "default: allowed when the user asks directly", "default", stageDefault}
	default:
		return verdict{Ask, fmt.Sprintf("default: %s requests need approval", req.Source), "default", stageDefault}
	}
}

// firstLoose returns the first rule that matches any part of req: any
// segment of a command (with wrappers looked through) or any path.
func firstLoose(rules []PolicyRule, req Request, segs []Segment) (PolicyRule, bool) {
	for _, r := range rules {
		if !r.Rule.MatchesKind(req.Kind) {
			continue
		}
		if req.Kind == KindExec {
			budget := looseBudget
			for _, seg := range segs {
				if matchLoose(r.Rule, seg, 0, &budget) {
					return r, true
				}
			}
			continue
		}
		for _, p := range req.Paths() {
			if r.Rule.MatchPath(p) {
				return r, true
			}
		}
	}
	return PolicyRule{}, false
}

// covering returns, for each segment or path of req, the first rule that
// matches it strictly, and whether every one is covered.
func covering(rules []PolicyRule, req Request, segs []Segment) ([]PolicyRule, bool) {
	var used []PolicyRule
	if req.Kind == KindExec {
		if len(segs) == 0 {
			return nil, false
		}
	seg:
		for _, seg := range segs {
			for _, r := range rules {
				if r.Rule.MatchSegment(seg, true) {
					used = append(used, r)
					continue seg
				}
			}
			return nil, false
		}
		return used, true
	}
path:
	for _, p := range req.Paths() {
		for _, r := range rules {
			if r.Rule.MatchesKind(req.Kind) && r.Rule.MatchPath(p) {
				used = append(used, r)
				continue path
			}
		}
		return nil, false
	}
	return used, len(used) > 0
}

// looseBudget bounds the work of matching one deny or ask rule against
// one request: one unit per command looked at through a wrapper, and one
// per KiB of command line parsed for `sh -c` and the like. A rule that
// would need more is taken to match.
const looseBudget = 2000

// matchLoose matches a deny or ask rule against a segment, also trying the
// commands that a wrapper (sudo, env -S, timeout, find -exec, xargs, …), a
// shell (`sh -c`, eval, trap, an alias definition) would run. It errs
// towards matching: see Rule.MatchSegment for globs, expansions and paths;
// a piece of text that does not parse matches when the rule's command word
// appears anywhere in it; and a wrapper whose options are not understood
// is tried with every later word as the start of the command and every
// word as a command line.
func matchLoose(r Rule, seg Segment, depth int, budget *int) bool {
	if r.MatchSegment(seg, false) {
		return true
	}
	if len(r.words) == 0 || len(seg.Words) == 0 {
		return false
	}
	c := segWords(seg)
	if seg.unparsed && r.matchAnywhere(c) {
		return true
	}
	return matchInner(r, c, depth, budget)
}

// matchInner matches a deny or ask rule against what the command c runs
// when it is a wrapper.
func matchInner(r Rule, c cmdWords, depth int, budget *int) bool {
	*budget--
	if *budget < 0 {
		return true
	}
	u, ok := unwrap(c)
	if !ok {
		return false
	}
	if depth >= maxUnwrap {
		// Wrappers nested deeper than rules look: assume the worst.
		return true
	}
	argvs, scripts := u.argvs, u.scripts
	if u.unknown != "" {
		for i := 1; i < len(c.words); i++ {
			argvs = append(argvs, c.from(i))
			if strings.ContainsAny(c.words[i], " \t\n;&|()<>`$'\"\\") || !c.at(i).plain() {
				scripts = append(scripts, c.words[i])
			}
		}
	}
	for _, a := range argvs {
		if r.couldMatch(a) || matchInner(r, a, depth+1, budget) {
			return true
		}
	}
	for _, s := range scripts {
		// Parsing costs one unit per KiB.
		*budget -= len(s) / 1024
		if *budget < 0 {
			return true
		}
		for _, inner := range SplitShell(s) {
			if matchLoose(r, inner, depth+1, budget) {
				return true
			}
		}
	}
	return false
}

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

// SuggestRule returns SuggestRules(req) joined for display, or "" when
// there is none. The approval prompt offers it as the session rule.
func SuggestRule(req Request) string {
	return strings.Join(SuggestRules(req), ", ")
}

// ExactRules returns the rules that allow exactly this request again, or
// nil when no rule can (a complex command, or words with spaces).
func ExactRules(req Request) []string {
	var out []string
	if req.Kind == KindExec {
		for _, seg := range req.Segments() {
			if seg.Complex || seg.hasPatterns() || len(seg.Words) == 0 || !spellable(seg.Words) {
				return nil
			}
			out = append(out, "exec:"+strings.Join(seg.Words, " "))
		}
		return out
	}
	for _, p := range req.Paths() {
		out = append(out, string(req.Kind)+":"+escapeGlob(p))
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

// LoadPolicy reads a policy file (see ParsePolicy).
func LoadPolicy(file string) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return ParsePolicy(file, data)
}

// PolicyError is a problem in a policy file, with its position.
type PolicyError struct {
	File string
	// Line and Col are 1-based; Col is 0 when unknown.
	Line, Col int
	Msg       string
}

// Error formats as "file:line:col: msg".
func (e *PolicyError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Col == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
}

// ParsePolicy parses a policy file named name:
//
//	default: ask          # ask | allow | deny, for kinds other than read and list
//	allow: ["exec:go test *", "write:/workspace/**"]
//	deny:  ["exec:rm *", "download:*"]
//	ask:   ["write:/workspace/.git/**"]
//
// Each list may also be a single string. Unknown fields, duplicate fields
// and malformed rules are errors of type *PolicyError that name
// file:line:col. Rules carry origins such as `policy.yaml:4: deny "exec:rm *"`.
func ParsePolicy(name string, data []byte) (p *Policy, err error) {
	defer func() {
		// The YAML decoder is fed untrusted files; never let it crash us.
		if r := recover(); r != nil {
			p, err = nil, &PolicyError{File: name, Msg: fmt.Sprintf("malformed YAML: %v", r)}
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		// The decoder reports "yaml: line N: problem".
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			num, text, _ := strings.Cut(rest, ": ")
			if line, err := strconv.Atoi(num); err == nil {
				return nil, &PolicyError{File: name, Line: line, Msg: text}
			}
		}
		return nil, &PolicyError{File: name, Msg: msg}
	}
	p = &Policy{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return p, nil // an empty file
	}
	root := resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return p, nil
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return &PolicyError{File: name, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
	}
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "want a mapping with the fields default, allow, deny and ask")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := resolve(root.Content[i]), resolve(root.Content[i+1])
		key := k.Value
		if seen[key] {
			return nil, at(k, "field %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "default":
			if v.Kind != yaml.ScalarNode {
				return nil, at(v, "default: want ask, allow or deny")
			}
			switch e := Effect(v.Value); e {
			case Ask, Allow, Deny:
				p.Default = e
				p.DefaultOrigin = fmt.Sprintf("%s:%d: default %s", name, v.Line, e)
			default:
				return nil, at(v, "default: %q is not ask, allow or deny", v.Value)
			}
		case "allow", "deny", "ask":
			var items []*yaml.Node
			switch v.Kind {
			case yaml.ScalarNode:
				if v.Tag != "!!null" {
					items = []*yaml.Node{v}
				}
			case yaml.SequenceNode:
				items = v.Content
			default:
				return nil, at(v, "%s: want a list of rules such as %q", key, "exec:go test *")
			}
			for j, item := range items {
				item = resolve(item)
				if item.Kind != yaml.ScalarNode {
					return nil, at(item, "%s[%d]: want a rule string such as %q", key, j, "exec:go test *")
				}
				r, err := ParseRule(item.Value)
				if err != nil {
					return nil, at(item, "%s[%d]: %v", key, j, err)
				}
				pr := PolicyRule{Rule: r, Origin: fmt.Sprintf("%s:%d: %s %s", name, item.Line, key, quoteFlagValue(r.String())), By: "policy"}
				switch key {
				case "allow":
					p.Allow = append(p.Allow, pr)
				case "deny":
					p.Deny = append(p.Deny, pr)
				default:
					p.Ask = append(p.Ask, pr)
				}
			}
		default:
			return nil, at(k, "unknown field %q: want default, allow, deny or ask", key)
		}
	}
	return p, nil
}

// resolve follows YAML aliases (bounded, in case of cycles).
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{}
	}
	return n
}

// IsPolicyError reports whether err comes from a malformed policy file.
func IsPolicyError(err error) bool {
	var pe *PolicyError
	return errors.As(err, &pe)
}
