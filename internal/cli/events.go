package cli

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/output"
)

// eventStream is the --json event stream of a run (package events): it
// starts with run.started, written before the first other event, and
// end writes the terminal run.completed or run.failed. It is safe for
// concurrent use.
type eventStream struct {
	lines *output.Lines
	runID string
	now   func() time.Time
	// start is when the run started: the time of run.started.
	start time.Time

	mu      sync.Mutex
	started bool
}

func newEventStream(lines *output.Lines, runID string) *eventStream {
	return &eventStream{lines: lines, runID: runID, now: time.Now, start: time.Now()}
}

// write writes evs, after run.started when it is the first write.
func (s *eventStream) write(evs ...events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.lines.Write(events.Event{Type: events.RunStarted, Time: s.start, RunID: s.runID, Version: events.Version})
	}
	for _, ev := range evs {
		s.lines.Write(ev)
	}
}

// engineEvent writes the events an engine event stands for.
func (s *eventStream) engineEvent(ev engine.Event) { s.write(ev.Public()...) }

// end writes the terminal event: run.completed when the run went to its
// end (err nil, or the exit status of the command it ran), run.failed
// with the error (masked by mask) otherwise.
func (s *eventStream) end(code int, err error, mask func(string) string) {
	ev := events.Event{Type: events.RunCompleted, Time: s.now(), ExitCode: events.Ptr(code)}
	var status *ExitStatus
	if err != nil && !errors.As(err, &status) {
		ev.Type, ev.Error = events.RunFailed, mask(err.Error())
	}
	s.write(ev)
}

// output returns the writer of one stream ("stdout" or "stderr") of the
// call current is at: call.output events, secrets masked in the raw bytes
// before they are encoded (events.OutputWriter). Close flushes.
func (a *App) output(stream string, current *events.CurrentCall) io.WriteCloser {
	return events.OutputWriter(events.OutputOptions{
		Stream: stream, CallID: current.ID, MaskWriter: a.masker.Writer,
		Emit: func(ev events.Event) { a.stream.write(ev) },
	})
}
