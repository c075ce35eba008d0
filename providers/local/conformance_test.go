//go:build linux

package local

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/providertest"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Options{
		New: func(t *testing.T) providers.Provider { return newTestProvider(t) },
	})
}
