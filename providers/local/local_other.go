//go:build !linux

package local

import (
	"runtime"

	"github.com/agentbox/sandbox/providers"
)

// Name is the provider's registry name.
const Name = "local"

// Registration describes the local provider where it cannot run: its
// sandboxes are built from Linux namespaces, overlayfs, Landlock and
// seccomp, so on this system every use fails (exit 125) and says what to
// use instead.
func Registration() providers.Registration {
	return providers.Registration{
		Name:        Name,
		Description: "sandboxes on this machine: Linux only (namespaces, overlayfs, Landlock, seccomp)",
		New: func(providers.Config) (providers.Provider, error) {
			return nil, providers.Errorf(providers.ErrUnavailable, Name, "start",
				"local sandboxes need Linux, and this is %s: use a cloud provider (--sandbox e2b, daytona, runloop or modal, with its API key set), or run sandbox on a Linux machine or VM", runtime.GOOS)
		},
	}
}

// MaybeRunInit returns at once: outside Linux this binary is never started
// as a sandbox's init.
func MaybeRunInit() {}

// RegistrationWith is Registration: outside Linux no init is started.
func RegistrationWith(func() string) providers.Registration { return Registration() }
