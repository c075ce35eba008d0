package tui

import (
	"context"
	"errors"
	"io"
	"sync"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
)

// bridgeBuffer is how many messages wait for the program before senders
// block (back-pressure on fast output instead of unbounded memory).
const bridgeBuffer = 1024

// Bridge carries what other goroutines produce — approval requests from the
// gate, engine events, progress lines, command output — to the Bubble Tea
// program as messages. It is an approval.Approver: Approve sends the request
// with a reply channel and blocks until the dialog answers or ctx ends.
//
// A Bridge is made before the engine (which needs the approver) and before
// the program; the program drains it. Detach, called when the program has
// ended, makes Approve deny and sends progress text to the fallback writer.
// A Bridge is safe for concurrent use.
type Bridge struct {
	msgs     chan tea.Msg
	done     chan struct{}
	once     sync.Once
	fallback io.Writer

	mu     sync.Mutex
	nextID int
}

var _ approval.Approver = (*Bridge)(nil)

// NewBridge returns a bridge; after Detach, progress text goes to fallback
// (stderr), so nothing printed while closing is lost.
func NewBridge(fallback io.Writer) *Bridge {
	if fallback == nil {
		fallback = io.Discard
	}
	return &Bridge{msgs: make(chan tea.Msg, bridgeBuffer), done: make(chan struct{}), fallback: fallback}
}

// errDetached is returned once the TUI is gone.
var errDetached = errors.New("the TUI has closed")

// send delivers msg to the program, waiting for room; it reports false when
// the program is gone (or ctx ended).
func (b *Bridge) send(ctx context.Context, msg tea.Msg) bool {
	select {
	case <-b.done:
		return false
	default:
	}
	select {
	case b.msgs <- msg:
		return true
	case <-b.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// Detach ends delivery: the program has stopped reading.
func (b *Bridge) Detach() { b.once.Do(func() { close(b.done) }) }

func (b *Bridge) id() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	return b.nextID
}

// approvalMsg asks the dialog about one request.
type approvalMsg struct {
	id    int
	req   approval.Request
	reply chan<- approval.Decision
	// hosts are a download's host destinations (hostDestinations).
	hosts []string
	// op is the operation that asks, 0 when unknown.
	op int
}

type opKey struct{}

// withOp tags ctx with the operation it runs, so that its requests can
// name it.
func withOp(ctx context.Context, id int) context.Context { return context.WithValue(ctx, opKey{}, id) }

// opOf returns the operation ctx runs, or 0.
func opOf(ctx context.Context) int {
	id, _ := ctx.Value(opKey{}).(int)
	return id
}

// approvalGoneMsg withdraws a request whose caller stopped waiting.
type approvalGoneMsg struct{ id int }

// Approve shows req in the approval dialog and waits for the answer. When
// ctx ends first (the operation was cancelled), the request is withdrawn
// from the dialog and ctx.Err() returned.
func (b *Bridge) Approve(ctx context.Context, req approval.Request) (approval.Decision, error) {
	reply := make(chan approval.Decision, 1)
	id := b.id()
	shown, hosts := hostDestinations(req)
	if !b.send(ctx, approvalMsg{id: id, req: shown, reply: reply, hosts: hosts, op: opOf(ctx)}) {
		if err := ctx.Err(); err != nil {
			return approval.Decision{}, err
		}
		return approval.Decision{By: "user", Reason: errDetached.Error()}, nil
	}
	select {
	case d := <-reply:
		return d, nil
	case <-ctx.Done():
		// The dialog drops it; a late answer goes to the buffered reply
		// channel and nowhere else.
		go b.send(context.Background(), approvalGoneMsg{id: id})
		return approval.Decision{}, ctx.Err()
	case <-b.done:
		return approval.Decision{By: "user", Reason: errDetached.Error()}, nil
	}
}

// eventMsg is an engine event (lifecycle, setup).
type eventMsg struct{ ev engine.Event }

// Event forwards an engine event; it is engine.Options.Events.
func (b *Bridge) Event(ev engine.Event) {
	b.send(context.Background(), eventMsg{ev})
}

// textMsg is output for the scrollback: setup output, progress lines, and
// the output of operations.
type textMsg struct {
	op     int // 0 for text that belongs to no operation
	stream stream
	data   string
}

// stream says where text came from; it picks the style.
type stream uint8

const (
	streamInfo stream = iota
	streamStdout
	streamStderr
	streamSetup
)

// Writer returns a writer whose bytes appear in the scrollback as stream
// text of operation op. After Detach, info and setup text goes to the
// fallback writer and the rest is dropped.
func (b *Bridge) writer(op int, s stream) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if !b.send(context.Background(), textMsg{op: op, stream: s, data: string(p)}) {
			if s == streamInfo || s == streamSetup {
				return b.fallback.Write(p)
			}
		}
		return len(p), nil
	})
}

// Progress is the writer for the engine's progress lines.
func (b *Bridge) Progress() io.Writer { return b.writer(0, streamInfo) }

// SetupOutput is the writer for the setup script's live output.
func (b *Bridge) SetupOutput() io.Writer { return b.writer(0, streamSetup) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// transferMsg reports the bytes an upload or download has moved.
type transferMsg struct {
	op          int
	done, total int64
}

// transferProgress returns the engine's progress callback for operation op.
func (b *Bridge) transferProgress(op int) func(done, total int64) {
	return func(done, total int64) {
		b.send(context.Background(), transferMsg{op: op, done: done, total: total})
	}
}

// batchMsg is several bridge messages delivered at once.
type batchMsg []tea.Msg

// maxBatch bounds how many queued messages one wake-up delivers.
const maxBatch = 512

// wait returns a command that delivers the next bridge messages: the first
// one it waits for, and whatever else is already queued.
func (b *Bridge) wait() tea.Cmd {
	return func() tea.Msg {
		var batch batchMsg
		select {
		case m := <-b.msgs:
			batch = append(batch, m)
		case <-b.done:
			return nil
		}
		for len(batch) < maxBatch {
			select {
			case m := <-b.msgs:
				batch = append(batch, m)
			default:
				return batch
			}
		}
		return batch
	}
}
