package approval

import (
	"fmt"
	"slices"
	"strings"
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
