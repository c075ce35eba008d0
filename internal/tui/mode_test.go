package tui

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/internal/interactive"
)

// foreignBridge is an interactive.Bridge that NewBridge did not make.
type foreignBridge struct{ approval.Approver }

func (foreignBridge) Event(engine.Event)     {}
func (foreignBridge) Progress() io.Writer    { return io.Discard }
func (foreignBridge) SetupOutput() io.Writer { return io.Discard }

// TestModeRefusesForeignBridge: Mode hands out its own bridges, and Run
// refuses any other (its approvals would never reach the dialog) before it
// opens anything.
func TestModeRefusesForeignBridge(t *testing.T) {
	if _, ok := (Mode{}).NewBridge(io.Discard).(*Bridge); !ok {
		t.Fatal("Mode.NewBridge returns no *Bridge")
	}
	opened := false
	_, err := Mode{}.Run(context.Background(), interactive.Options{
		Bridge: foreignBridge{},
		Open: func(context.Context) (*engine.Session, error) {
			opened = true
			return nil, nil
		},
		In: strings.NewReader(""), Out: io.Discard,
	})
	if err == nil || !strings.Contains(err.Error(), "not one NewBridge made") || opened {
		t.Errorf("Run with a foreign bridge: %v (opened %v); want a refusal before opening", err, opened)
	}
}
