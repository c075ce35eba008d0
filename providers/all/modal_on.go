//go:build modal

package all

import (
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/modal"
)

// optional are the providers built in by tag: modal (-tags modal).
func optional() []providers.Registration {
	return []providers.Registration{modal.Registration()}
}
