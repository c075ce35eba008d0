package modal

import (
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/modal/emulator"
)

// newEmulator builds the emulator `sandbox serve --api modal` runs.
func newEmulator(backend providers.Provider, opts providers.EmulatorOptions) (providers.Emulator, error) {
	return emulator.New(backend, emulator.Options{APIKey: opts.APIKey, Log: opts.Log}), nil
}
