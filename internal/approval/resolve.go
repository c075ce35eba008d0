package approval

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/agentbox/sandbox/providers"
)

// A path rule names paths as a person writes them, but a symlink in a path
// leads the operation elsewhere: with `deny: read:/workspace/secrets/**`, a
// link /workspace/alias → /workspace/secrets would read the secret. When the
// provider implements providers.PathResolver, the Gate therefore asks it
// where each path of a file operation leads inside the sandbox before
// deciding, decides on the typed and the resolved paths together (a deny or
// ask rule matching either counts, allow rules must cover both, and the
// approver is shown both), and runs the operation on the resolved paths
// with providers.WithNoFollow: a symlink that appears in them after the
// decision makes it fail rather than lead it elsewhere. Providers without a
// resolver are decided on the typed paths only.

// follow says how an operation treats a symlink that is the final component
// of its path, and so which path its effect lands on.
type follow int

const (
	// followFinal: the operation goes through a final symlink (read,
	// list, mkdir, grep and glob roots, upload into and download of a
	// directory).
	followFinal follow = iota
	// followParent: the operation acts on the final component itself
	// (stat, remove, rename), or replaces a symlink there (write).
	followParent
)

// resolved is where an allowed file operation runs.
type resolved struct {
	target, dest string
	// strict says that the paths were resolved by the provider, which is
	// to follow no symlink in them (providers.WithNoFollow).
	strict bool
}

// ctx returns the context for running the operation.
func (r resolved) ctx(ctx context.Context) context.Context {
	if r.strict {
		return providers.WithNoFollow(ctx)
	}
	return ctx
}

// resolve sets req.Details.Resolved (and ResolvedDest, for a rename) to
// where the paths of req lead inside the sandbox, when that differs from
// them, and returns the paths to run the operation on. Without a resolver
// those are the typed paths. A request that its typed paths alone already
// deny is denied at once (a *DeniedError), without asking the provider.
func (g *Gate) resolve(ctx context.Context, req *Request, f follow) (resolved, error) {
	at := resolved{target: req.Target, dest: req.Details.Dest}
	pr, ok := g.inner.(providers.PathResolver)
	if !ok {
		return at, nil
	}
	if err := g.deniedAsTyped(ctx, *req); err != nil {
		return at, err
	}
	t, err := resolvePath(ctx, pr, req.Sandbox, req.Target, f)
	if err != nil {
		return at, err
	}
	at.target = t
	if t != req.Target {
		req.Details.Resolved = t
	}
	if req.Kind == KindWrite && req.Details.Dest != "" {
		d, err := resolvePath(ctx, pr, req.Sandbox, req.Details.Dest, f)
		if err != nil {
			return at, err
		}
		at.dest = d
		if d != req.Details.Dest {
			req.Details.ResolvedDest = d
		}
	}
	at.strict = true
	return at, nil
}

// deniedAsTyped returns the *DeniedError of a request that is denied
// whatever its paths resolve to: by a deny rule, or by an effect no
// approver or approved source can turn into an allow. Resolving can only
// add paths for rules to match, never make a request more welcome.
func (g *Gate) deniedAsTyped(ctx context.Context, req Request) error {
	v := g.evaluate(req)
	_, approved := g.approvedOrigin(req.Source)
	if v.stage != stageDeny && (approved || v.effect == Allow || v.effect == Ask && g.approver != nil) {
		return nil
	}
	_, err := g.decide(ctx, req)
	return err
}

// resolvePath asks the provider where p leads: through a final symlink
// too, or (followParent) only through those of its directory.
func resolvePath(ctx context.Context, pr providers.PathResolver, id, p string, f follow) (string, error) {
	var r string
	var err error
	if f == followParent && p != "/" {
		r, err = pr.ResolvePath(ctx, id, path.Dir(p))
		r = path.Join(r, path.Base(p))
	} else {
		r, err = pr.ResolvePath(ctx, id, p)
	}
	if err != nil {
		return "", err
	}
	if !path.IsAbs(r) || path.Clean(r) != r {
		return "", fmt.Errorf("resolve %s: the provider answered %q, not an absolute clean path: %w", p, r, providers.ErrInvalid)
	}
	return r, nil
}

// strictness orders effects from the most to the least permissive.
func strictness(e Effect) int {
	switch e {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2
}

// evaluate applies the policy, the session rules and the mode to req. A
// request with resolved paths is decided on all its paths together, and
// also on its typed and on its resolved paths alone, the strictest verdict
// winning: an ask rule that matches one is not asked about when a default
// denies the other.
func (g *Gate) evaluate(req Request) verdict {
	v, _ := g.evaluateFor(req)
	return v
}

// evaluateFor is evaluate, also returning the form of req (all its paths,
// the typed or the resolved ones) that gave the verdict, for the hint.
func (g *Gate) evaluateFor(req Request) (verdict, Request) {
	v := g.evaluateOne(req)
	d := req.Details
	if v.effect == Deny || d.Resolved == "" && d.ResolvedDest == "" {
		return v, req
	}
	typed := req
	typed.Details.Resolved, typed.Details.ResolvedDest = "", ""
	res := typed
	if d.Resolved != "" {
		res.Target = d.Resolved
	}
	if d.ResolvedDest != "" {
		res.Details.Dest = d.ResolvedDest
	}
	by := req
	for _, alt := range []Request{typed, res} {
		if a := g.evaluateOne(alt); strictness(a.effect) > strictness(v.effect) {
			v, by = a, alt
		}
	}
	return v, by
}

// rebase turns p, a path at or below from, into the same path below to:
// the paths a provider reports below a resolved directory become paths
// below the directory as typed.
func rebase(p, from, to string) string {
	if from == to {
		return p
	}
	if p == from {
		return to
	}
	prefix := from
	if from != "/" {
		prefix += "/"
	}
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return p
	}
	return path.Join(to, rest)
}
