package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// GateOptions configures a Gate.
type GateOptions struct {
	// Policy decides requests; nil means the built-in defaults. NewGate
	// copies it, so later changes to it do not affect the Gate.
	Policy *Policy
	// Approver is asked when the policy says ask. Nil means a
	// non-interactive run: ask becomes deny, with a hint naming the flag
	// that would allow the request.
	Approver Approver
	// Audit receives one record per request; nil keeps no log.
	Audit *AuditLog
	// AuditRequired refuses an operation whose audit record cannot be
	// written, instead of running it unaudited. Before an allowed
	// operation runs, a record with Phase "started" is written; when that
	// fails the operation does not run and the call returns an
	// *AuditError. When the record of a finished operation cannot be
	// written, the call returns an *AuditError with Ran set. A denial
	// stays a *DeniedError either way. With no Audit log, every allowed
	// operation is refused.
	AuditRequired bool
	// OnEvent, when set, is called after each decision and after each
	// operation finishes, from the goroutine that made the call (so
	// concurrently when the Gate is used concurrently). For ReadFile the
	// operation is opening the file; the caller's reading is not timed.
	OnEvent func(Event)
	// CallIDs gives each call its id; nil numbers this Gate's calls on
	// their own (CallIDs).
	CallIDs func() string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Mask hides registered secrets in what the Gate reports: targets,
	// details, reasons, rules and errors in audit records, events and
	// DeniedErrors. Nil masks nothing.
	Mask func(string) string
	// Workdir is the base of relative paths; empty means
	// providers.DefaultWorkdir.
	Workdir string
}

// Gate is the one approval gate: a providers.Provider that decides every
// operation on a sandbox's contents before it reaches the provider it
// wraps. A denied request never reaches that provider, except to learn
// where its paths lead when it implements providers.PathResolver: then
// path rules are decided on the paths as typed and as resolved in the
// sandbox, and the operation runs on the resolved paths following no
// symlink (providers.WithNoFollow). The inner provider is a named field,
// not embedded, so that a method added to providers.Provider does not
// compile until its approval is decided.
//
// A Gate is safe for concurrent use.
type Gate struct {
	inner    providers.Provider
	policy   *Policy
	approver Approver
	audit    *AuditLog
	auditReq bool
	features Features
	onEvent  func(Event)
	callIDs  func() string
	now      func() time.Time
	mask     func(string) string
	workdir  string

	mu       sync.Mutex
	session  []PolicyRule
	exact    map[string]struct{} // fingerprints of calls allowed for the session
	approved map[Source]string   // source → origin of its standing approval
	mode     Mode
}

// Mode is how a Gate treats requests that no deny rule decides, switched
// at run time (the TUI's /mode). A Gate starts in ModeAll when its policy
// has Yes (--yes), else in ModeSession; switching to another mode turns
// --yes off until ModeAll is chosen again.
type Mode string

// Gate modes.
const (
	// ModeAsk asks about every request the policy alone would ask about,
	// and about the user's own operations the built-in default would
	// allow (all but reading and listing): the rules added for the
	// session are kept but not applied.
	ModeAsk Mode = "ask"
	// ModeSession applies the rules added for the session (the default).
	ModeSession Mode = "session"
	// ModeAll allows every request that no deny or ask rule matches, as
	// --yes does.
	ModeAll Mode = "all"
)

// ParseMode parses "ask", "session" or "all".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case ModeAsk, ModeSession, ModeAll:
		return m, nil
	}
	return "", fmt.Errorf("unknown approval mode %q: use ask, session or all", s)
}

// SetMode switches the mode for the requests decided from now on.
func (g *Gate) SetMode(m Mode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = m
}

// Mode returns the current mode.
func (g *Gate) Mode() Mode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.modeLocked()
}

func (g *Gate) modeLocked() Mode {
	switch {
	case g.mode != "":
		return g.mode
	case g.policy.Yes:
		return ModeAll
	}
	return ModeSession
}

// Yes reports whether the policy has --yes (in effect in ModeAll only).
func (g *Gate) Yes() bool { return g.policy.Yes }

// Default returns the policy's default effect and where it was set (a
// policy file's `default:`); both are empty for the built-in default.
func (g *Gate) Default() (Effect, string) { return g.policy.Default, g.policy.DefaultOrigin }

// evaluateOne applies the policy, the session rules and the mode to req
// as it is (see evaluate).
func (g *Gate) evaluateOne(req Request) verdict {
	g.mu.Lock()
	mode, session := g.modeLocked(), slices.Clone(g.session)
	g.mu.Unlock()
	p := g.policy
	if p.Yes && mode != ModeAll {
		// --yes is the "all" mode: another mode turns it off.
		c := *p
		c.Yes = false
		p = &c
	}
	switch mode {
	case ModeAsk:
		// No session rules, and the user's own operations ask too: only
		// reading and listing, and what the policy allows by a rule or
		// --yes, pass.
		v := p.evaluate(req, nil)
		if v.stage == stageDefault && v.effect == Allow && req.Kind != KindRead && req.Kind != KindList {
			v.effect, v.origin = Ask, "/mode ask"
		}
		return v
	case ModeAll:
		if !p.Yes {
			c := *p
			c.Yes = true
			v := c.evaluate(req, session)
			if v.stage == stageYes {
				v.origin, v.by = "/mode all", "user"
			}
			return v
		}
	}
	return p.evaluate(req, session)
}

var (
	_ providers.Provider = (*Gate)(nil)
	_ providers.Grepper  = (*Gate)(nil)
	_ providers.Closer   = (*Gate)(nil)
	_ providers.Machine  = (*Gate)(nil)
)

// NewGate wraps inner. Only the engine calls it, once per sandbox session,
// and it never hands inner out again.
func NewGate(inner providers.Provider, opts GateOptions) *Gate {
	g := &Gate{
		inner:    inner,
		features: fillFeatures(inner),
		policy:   opts.Policy.Clone(),
		approver: opts.Approver,
		audit:    opts.Audit,
		auditReq: opts.AuditRequired,
		onEvent:  opts.OnEvent,
		callIDs:  opts.CallIDs,
		now:      opts.Now,
		mask:     opts.Mask,
		workdir:  opts.Workdir,
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.callIDs == nil {
		g.callIDs = CallIDs()
	}
	if g.mask == nil {
		g.mask = func(s string) string { return s }
	}
	if g.workdir == "" {
		g.workdir = providers.DefaultWorkdir
	}
	return g
}

// AllowForSession adds an allow rule for the rest of this Gate's life, as
// an approver's "always" answer does. Deny and ask rules still win over it.
func (g *Gate) AllowForSession(rule string) error {
	r, err := ParseRule(rule)
	if err != nil {
		return fmt.Errorf("session rule: %w", err)
	}
	pr := PolicyRule{Rule: r, Origin: "session " + quoteFlagValue(r.String()), By: "session"}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.ContainsFunc(g.session, func(x PolicyRule) bool { return x.Rule.String() == r.String() }) {
		g.session = append(g.session, pr)
	}
	return nil
}

// RevokeSessionRule removes a rule AllowForSession added; it reports
// whether there was one.
func (g *Gate) RevokeSessionRule(rule string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.session)
	g.session = slices.DeleteFunc(g.session, func(x PolicyRule) bool { return x.Rule.String() == rule })
	return len(g.session) < n
}

// AllowExactForSession allows requests identical to req — same source,
// kind, target, argv and details (for a write, the same diff: the same
// content over the same file) — for the rest of this Gate's life, as the
// dialog's "allow this exact call" does. Deny and ask rules still win, and
// ModeAsk ignores it like every session rule.
func (g *Gate) AllowExactForSession(req Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exact == nil {
		g.exact = map[string]struct{}{}
	}
	g.exact[fingerprint(req)] = struct{}{}
}

// exactAllowed reports whether AllowExactForSession allowed req.
func (g *Gate) exactAllowed(req Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.exact[fingerprint(req)]
	return ok && g.modeLocked() != ModeAsk
}

// fingerprint is a hash of everything a request does: its source, kind,
// target, argv and details (so a write's content, through its diff and
// size). Two requests with the same fingerprint do the same thing.
func fingerprint(req Request) string {
	req.Provider = ""
	data, _ := json.Marshal(req)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ApproveSource allows every request from src for the rest of this Gate's
// life, except those an explicit deny rule matches. The engine uses it for
// a setup script named on the command line: naming it approves it. origin
// is what decisions report, e.g. `--sandbox-setup "./setup.sh"`.
func (g *Gate) ApproveSource(src Source, origin string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.approved == nil {
		g.approved = map[Source]string{}
	}
	g.approved[src] = origin
}

func (g *Gate) approvedOrigin(src Source) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o, ok := g.approved[src]
	return o, ok
}

// SessionRules returns the rules added for this session, in order.
func (g *Gate) SessionRules() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(g.session))
	for i, r := range g.session {
		out[i] = r.Rule.String()
	}
	return out
}

func (g *Gate) sessionRules() []PolicyRule {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.session)
}
