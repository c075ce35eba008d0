package approval

import (
	"errors"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// bareProvider has the provider contract and none of its optional parts.
type bareProvider struct{ providers.Provider }

func TestFeaturesFilledFromProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    providers.Provider
		want Features
	}{
		{"bare", bareProvider{seededFake()}, Features{}},
		{"the fake provider: a machine, nothing else", fake.New(), Features{Machine: true}},
	}
	for _, tt := range tests {
		if got := NewGate(tt.p, GateOptions{}).Features(); got != tt.want {
			t.Errorf("%s: features %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// A gate on a bare provider refuses what it lacks, asking nobody.
	g := NewGate(bareProvider{seededFake()}, GateOptions{Policy: &Policy{Yes: true}})
	if err := g.Start(t.Context(), "sb"); !errors.Is(err, providers.ErrUnsupported) {
		t.Errorf("Start on a provider without machines: %v", err)
	}
}
