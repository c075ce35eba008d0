package approval

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentbox/sandbox/internal/events"
)

// callKey is the context key of a call's place in a plan.
type callKey struct{}

// observerKey is the context key of a call observer.
type observerKey struct{}

// callPlace is the step of a plan a call is made for.
type callPlace struct{ step, line int }

// WithStep tags every gated call made with ctx as made for step (from 1)
// of a plan, at line of the plan file; events carry both.
func WithStep(ctx context.Context, step, line int) context.Context {
	return context.WithValue(ctx, callKey{}, callPlace{step, line})
}

func stepFrom(ctx context.Context) callPlace {
	p, _ := ctx.Value(callKey{}).(callPlace)
	return p
}

// WithCallObserver returns ctx with fn, which the Gate calls with the id it
// gives each call made with ctx, before the call is decided: the caller
// can then label the call's output with it.
func WithCallObserver(ctx context.Context, fn func(callID string)) context.Context {
	return context.WithValue(ctx, observerKey{}, fn)
}

func observe(ctx context.Context, id string) {
	if fn, ok := ctx.Value(observerKey{}).(func(string)); ok {
		fn(id)
	}
}

// holdKey is the context key of held completions.
type holdKey struct{}

// held keeps the completion events of calls until it is released.
type held struct {
	mu       sync.Mutex
	released bool
	pending  []func()
}

// add keeps send for the release and reports true, or reports false
// when h is released already (or nil).
func (h *held) add(send func()) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return false
	}
	h.pending = append(h.pending, send)
	return true
}

func (h *held) release() {
	h.mu.Lock()
	pending := h.pending
	h.pending, h.released = nil, true
	h.mu.Unlock()
	for _, send := range pending {
		send()
	}
}

// HoldCompletions returns ctx with which the Gate holds back the
// completion event (EventOperation) of every call made with it until
// release is called, which sends them in order, timed then. A caller that
// writes what a call returned as output events (a read's content, a
// listing, the last chunk of an exec's output) releases after writing
// it, so that call.completed follows the call's output. The audit log
// records each completion when its call ends. release may be called more
// than once; a call that ends after it is reported at once.
func HoldCompletions(ctx context.Context) (context.Context, func()) {
	h := &held{}
	return context.WithValue(ctx, holdKey{}, h), h.release
}

func holdFrom(ctx context.Context) *held {
	h, _ := ctx.Value(holdKey{}).(*held)
	return h
}

// CallIDs returns a source of call ids unique to one run: "c1", "c2", …
// Gates that share it number their calls as one sequence.
func CallIDs() func() string {
	var n atomic.Int64
	return func() string { return "c" + strconv.FormatInt(n.Add(1), 10) }
}

// Public returns the events of the schema (package events) that ev stands
// for: a requested event is call.requested, a decision is call.decided
// (and call.completed when the call will not run), and an operation is
// call.completed.
func (ev Event) Public() []events.Event {
	switch ev.Type {
	case EventRequested:
		return []events.Event{requestedEvent(ev)}
	case EventDecision:
		out := []events.Event{{
			Type: events.CallDecided, Time: ev.Time, CallID: ev.CallID,
			Allow: events.Ptr(ev.Decision.Allow), By: ev.Decision.By, Rule: ev.Decision.Rule, Reason: ev.Decision.Reason,
		}}
		if !ev.Decision.Allow || ev.Error != "" {
			out = append(out, completedEvent(ev))
		}
		return out
	case EventOperation:
		return []events.Event{completedEvent(ev)}
	}
	return nil
}

func requestedEvent(ev Event) events.Event {
	r := ev.Request
	d := r.Details
	det := &events.Details{
		Cwd: d.Cwd, User: d.User, Background: d.Background, Diff: d.Diff, Bytes: d.Bytes,
		Dest: d.Dest, From: d.From, Pattern: d.Pattern, Resolved: d.Resolved, ResolvedDest: d.ResolvedDest,
	}
	for _, f := range d.Files {
		det.Files = append(det.Files, events.File{Path: f.Path, Type: "file", Size: f.Size, SHA256: f.SHA256, Exists: f.Exists})
	}
	return events.Event{
		Type: events.CallRequested, Time: ev.Time, CallID: ev.CallID,
		Source: string(r.Source), Kind: string(r.Kind), Target: r.Target, Argv: r.Argv,
		Provider: r.Provider, SandboxID: r.Sandbox, Details: det, Step: ev.Step, Line: ev.Line,
	}
}

func completedEvent(ev Event) events.Event {
	out := events.Event{
		Type: events.CallCompleted, Time: ev.Time, CallID: ev.CallID, ExitCode: ev.ExitCode,
		DurationMS: events.Ptr(ev.Duration.Milliseconds()), Error: ev.Error, Step: ev.Step, Line: ev.Line,
	}
	switch {
	case ev.Type == EventDecision && ev.Error != "":
		out.Status = events.StatusError
		if ev.cancelled {
			out.Status = events.StatusCancelled
		}
	case !ev.Decision.Allow:
		out.Status = events.StatusDenied
		if out.Error == "" {
			out.Error = ev.denial
		}
	case ev.Error != "":
		out.Status = events.StatusError
		if ev.cancelled {
			out.Status = events.StatusCancelled
		}
	case ev.ExitCode != nil && *ev.ExitCode != 0:
		out.Status = events.StatusFailed
	default:
		out.Status = events.StatusOK
	}
	return out
}

// isCancel reports whether err is an interrupt rather than a failure.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled)
}
