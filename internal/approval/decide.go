package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentbox/sandbox/internal/output"
	"github.com/agentbox/sandbox/providers"
)

func (g *Gate) clean(p string) (string, error) {
	return providers.CleanPath(p, g.workdir)
}

// request builds a request from ctx (source and details) and the call.
func (g *Gate) request(ctx context.Context, k Kind, id, target string) Request {
	return Request{
		Source:   SourceFrom(ctx),
		Kind:     k,
		Provider: g.inner.Name(),
		Sandbox:  id,
		Target:   target,
		Details:  DetailsFrom(ctx),
	}
}

// call is one gated call on its way through the gate.
type call struct {
	id    string
	place callPlace
	req   Request
	// mreq is req with secrets masked, for events and the audit.
	mreq Request
	// hold, when set, keeps the completion event until the caller
	// releases it (HoldCompletions).
	hold *held
}

// do decides req and, when allowed, runs op and reports its outcome.
// op returns the exit code of an exec, nil for other operations.
func (g *Gate) do(ctx context.Context, req Request, op func(context.Context) (*int, error)) error {
	c, dec, auditErr, err := g.decideCall(ctx, req)
	if err != nil {
		return err
	}
	if auditErr != nil && g.auditReq {
		aerr := &AuditError{Request: c.mreq, Err: auditErr}
		g.report(c, dec, nil, aerr, 0)
		return aerr
	}
	start := g.now()
	code, opErr := op(ctx)
	werr := g.report(c, dec, code, opErr, g.now().Sub(start))
	if werr != nil && g.auditReq && opErr == nil {
		return &AuditError{Request: c.mreq, Ran: true, Err: werr}
	}
	return opErr
}

// AuditError is an operation refused because its audit record could not
// be written while the audit is required (GateOptions.AuditRequired), or,
// with Ran set, one that ran but whose outcome could not be recorded. The
// CLI exits 1 (error) with it: it is no decision of the policy, and
// freeing the disk, not changing a rule, is what lets the call run.
type AuditError struct {
	// Request is the request, secrets masked.
	Request Request
	// Ran is true when the operation ran and only the record of its
	// outcome is missing.
	Ran bool
	Err error
}

// Error names the operation and why the audit failed.
func (e *AuditError) Error() string {
	if e.Ran {
		return output.Escape(fmt.Sprintf("%s %q ran, but the audit log could not record it, and the audit is required: %v", e.Request.Kind, e.Request.Target, e.Err))
	}
	return output.Escape(fmt.Sprintf("refused %s %q: the audit log cannot be written, and the audit is required: %v", e.Request.Kind, e.Request.Target, e.Err))
}

// Unwrap returns the audit log's error.
func (e *AuditError) Unwrap() error { return e.Err }

// decide returns the decision for req, or a *DeniedError, or ctx.Err()
// when ctx ends while an approver is deciding. Every outcome is reported.
func (g *Gate) decide(ctx context.Context, req Request) (Decision, error) {
	_, dec, _, err := g.decideCall(ctx, req)
	return dec, err
}

// decideCall is decide for a call that may run: it also returns the call
// and the error of writing its decision to the audit log.
func (g *Gate) decideCall(ctx context.Context, req Request) (*call, Decision, error, error) {
	c := &call{id: g.callID(), place: stepFrom(ctx), req: req, mreq: g.maskRequest(req), hold: holdFrom(ctx)}
	observe(ctx, c.id)
	if err := ctx.Err(); err != nil {
		return c, Decision{}, nil, err
	}
	requested := g.event(c, EventRequested, Decision{})
	g.send(requested)
	session := g.sessionRules()
	v, decisive := g.evaluateFor(req)
	if origin, ok := g.approvedOrigin(req.Source); ok && v.effect != Allow && v.stage != stageDeny {
		v = verdict{Allow, origin, "flag", v.stage}
	}
	if v.effect == Ask && v.stage != stageAsk && g.exactAllowed(req) {
		v = verdict{Allow, ExactOrigin, "session", v.stage}
	}
	var dec Decision
	switch {
	case v.effect == Allow:
		dec = Decision{Allow: true, By: v.by, Rule: v.origin}
	case v.effect == Ask && g.approver != nil:
		d, err := g.ask(ctx, req)
		if err != nil {
			ev := g.event(c, EventDecision, Decision{By: "user", Rule: v.origin, Reason: "not answered"})
			ev.Error, ev.cancelled = g.mask(err.Error()), isCancel(err)
			g.send(ev)
			g.audit.Write(append(requested.Public(), ev.Public()...)...)
			return c, Decision{}, nil, err
		}
		dec = d
		if dec.By == "" {
			dec.By = "user"
		}
		if dec.Allow && dec.SessionExact {
			g.AllowExactForSession(req)
		}
		if dec.Allow {
			for _, r := range append([]string{dec.SessionRule}, dec.SessionRules...) {
				if r != "" {
					// An invalid rule from an approver only loses the
					// "always": this call was still allowed.
					_ = g.AllowForSession(r)
				}
			}
		}
	case v.effect == Ask:
		dec = Decision{By: v.by, Rule: v.origin, Reason: "approval required, and no one can be asked in a non-interactive run"}
	default:
		dec = Decision{By: v.by, Rule: v.origin}
	}
	decided := g.event(c, EventDecision, dec)
	var denied *DeniedError
	if !dec.Allow {
		denied = &DeniedError{
			Request:  c.mreq,
			Decision: g.maskDecision(dec),
			Hint:     g.mask(g.policy.hint(decisive, session)),
		}
		decided.denial = denied.Error()
	}
	g.send(decided)
	// The request and its decision are recorded before the call runs: with
	// the audit required, a call whose record cannot be written does not.
	werr := g.audit.Write(append(requested.Public(), decided.Public()...)...)
	if g.audit == nil && g.auditReq {
		werr = errors.New("no audit log is open")
	}
	if denied != nil {
		return c, dec, werr, denied
	}
	return c, dec, werr, nil
}

// callID gives the next call its id.
func (g *Gate) callID() string { return g.callIDs() }

// event is the Event of c of type typ, with its decision.
func (g *Gate) event(c *call, typ string, dec Decision) Event {
	return Event{
		Type: typ, Time: g.now(), CallID: c.id, Step: c.place.step, Line: c.place.line,
		Request: c.mreq, Decision: g.maskDecision(dec),
	}
}

func (g *Gate) send(ev Event) {
	if g.onEvent != nil {
		g.onEvent(ev)
	}
}

// ask runs the approver, returning early with ctx.Err() when ctx ends.
func (g *Gate) ask(ctx context.Context, req Request) (Decision, error) {
	type answer struct {
		d   Decision
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		d, err := g.approver.Approve(ctx, req)
		ch <- answer{d, err}
	}()
	select {
	case a := <-ch:
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		if a.err != nil {
			return Decision{}, fmt.Errorf("approval: %w", a.err)
		}
		return a.d, nil
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// report sends the event of a finished (or refused) operation and writes
// it to the audit log; it returns the audit log's error.
func (g *Gate) report(c *call, dec Decision, code *int, err error, d time.Duration) error {
	ev := g.event(c, EventOperation, dec)
	ev.ExitCode, ev.Duration, ev.DurationMS = code, d, d.Milliseconds()
	if err != nil {
		ev.Error = g.mask(err.Error())
		ev.cancelled = isCancel(err)
	}
	if !c.hold.add(func() {
		sent := ev
		sent.Time = g.now()
		g.send(sent)
	}) {
		g.send(ev)
	}
	return g.audit.Write(ev.Public()...)
}

func (g *Gate) maskRequest(r Request) Request {
	r.Target = g.mask(r.Target)
	if r.Argv != nil {
		argv := make([]string, len(r.Argv))
		for i, a := range r.Argv {
			argv[i] = g.mask(a)
		}
		r.Argv = argv
	}
	d := r.Details
	d.Cwd, d.User, d.Diff, d.Dest, d.Pattern, d.From = g.mask(d.Cwd), g.mask(d.User), g.mask(d.Diff), g.mask(d.Dest), g.mask(d.Pattern), g.mask(d.From)
	d.Resolved, d.ResolvedDest = g.mask(d.Resolved), g.mask(d.ResolvedDest)
	if d.Files != nil {
		files := slices.Clone(d.Files)
		for i := range files {
			files[i].Path = g.mask(files[i].Path)
		}
		d.Files = files
	}
	r.Details = d
	return r
}

func (g *Gate) maskDecision(d Decision) Decision {
	d.Rule, d.Reason, d.SessionRule = g.mask(d.Rule), g.mask(d.Reason), g.mask(d.SessionRule)
	if d.SessionRules != nil {
		rules := make([]string, len(d.SessionRules))
		for i, r := range d.SessionRules {
			rules[i] = g.mask(r)
		}
		d.SessionRules = rules
	}
	return d
}

// IsDenied reports whether err is (or wraps) a *DeniedError.
func IsDenied(err error) bool {
	var d *DeniedError
	return errors.As(err, &d)
}
