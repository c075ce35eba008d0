package engine

import (
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/providers"
)

// Event is what the engine reports to Options.Events, in process: the
// lifecycle of sandboxes, their setup and the gate's events. The TUI reads
// it as it is; Public turns it into the events of the schema that `--json`
// runs print.
type Event struct {
	Type string
	Time time.Time
	// Action is what happened: created, reused, deleted, kept, started,
	// stopped (lifecycle); started, output, skipped, succeeded, failed
	// (setup).
	Action  string
	Sandbox *providers.Info
	// CallID is the call setup output belongs to.
	CallID string
	// Output is a chunk of setup output, secrets masked. When the chunk
	// is not valid UTF-8, each invalid byte is U+FFFD here and OutputB64
	// holds the exact bytes.
	Output    string
	OutputB64 string
	ExitCode  *int
	Error     string
	Gate      *approval.Event
	// Reattach is the command that reopens a kept sandbox.
	Reattach string
}

// Public returns the events of the schema (package events) that ev stands
// for; none for the setup's own milestones, which its calls' events show.
func (ev Event) Public() []events.Event {
	switch {
	case ev.Gate != nil:
		return ev.Gate.Public()
	case ev.Type == "lifecycle" && ev.Sandbox != nil:
		state := providers.StateRunning
		switch ev.Action {
		case "stopped":
			state = providers.StateStopped
		case "deleted":
			state = "deleted"
		case "kept", "reused":
			state = ev.Sandbox.State
		}
		return []events.Event{{
			Type: "sandbox." + ev.Action, Time: ev.Time, Reattach: ev.Reattach,
			Sandbox: events.NewSandbox(*ev.Sandbox, state, RunLabel),
		}}
	case ev.Type == "setup" && ev.Action == "output":
		return []events.Event{{
			Type: events.CallOutput, Time: ev.Time, CallID: ev.CallID, Stream: "stdout",
			Data: ev.Output, DataB64: ev.OutputB64,
		}}
	}
	return nil
}
