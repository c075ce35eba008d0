// Package modalconf is what this project knows of Modal without Modal's
// SDK: the provider's name, the variables it reads, its defaults and
// capabilities, and whether credentials are there to be found. The
// program sandbox lists Modal and says whether it is configured with this
// package alone, and hands a run that uses Modal to the program
// providers.CloudProgram, which links the SDK (package modal): the SDK's
// package initialisers would otherwise run in every start of sandbox and
// of every local sandbox's init and runners, which re-execute it.
package modalconf

import (
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Name is the registry name of the provider.
const Name = "modal"

// Environment variables the provider reads or documents.
const (
	EnvTokenID     = "MODAL_TOKEN_ID"
	EnvTokenSecret = "MODAL_TOKEN_SECRET"
	EnvServerURL   = "MODAL_SERVER_URL"
	EnvEnvironment = "MODAL_ENVIRONMENT"
	EnvApp         = "MODAL_APP"
	EnvImage       = "MODAL_IMAGE"
)

// Defaults.
const (
	// DefaultApp is the app sandboxes are created in.
	DefaultApp = "sandbox"
	// DefaultImage is the registry tag used when a Spec names no image.
	DefaultImage = "debian:bookworm-slim"
	// DefaultLifetime is the timeout sent when a Spec has no TTL: Modal
	// ends a sandbox after its timeout (five minutes when none is sent),
	// and 24 hours is the longest it accepts.
	DefaultLifetime = 24 * time.Hour
	// DefaultWorkdir is where commands run when a request names no
	// directory; it is created at sandbox creation.
	DefaultWorkdir = "/workspace"
)

// Registration describes the provider without building it: name,
// variables, capabilities and the credentials check. Package modal adds
// New and the emulator.
func Registration() providers.Registration {
	return providers.Registration{
		Name:        Name,
		Description: "Modal sandboxes (gVisor containers) through Modal's official Go SDK",
		Env: []providers.EnvKey{
			{Name: EnvTokenID, Help: "token id (or a profile in ~/.modal.toml)", Secret: false},
			{Name: EnvTokenSecret, Help: "token secret (or a profile in ~/.modal.toml)", Secret: true},
			{Name: EnvServerURL, Help: "API URL, read by the SDK from the environment (emulators: http:// on loopback only)"},
			{Name: EnvEnvironment, Help: "Modal environment (default: the profile's)"},
			{Name: EnvApp, Help: "app the sandboxes belong to, created when missing (default " + DefaultApp + ")"},
			{Name: EnvImage, Help: "registry tag used when --image is not given (default " + DefaultImage + ")"},
		},
		Capabilities: Capabilities(),
		Ready:        Configured,
	}
}

// Capabilities are what Modal supports through the SDK.
func Capabilities() providers.Capabilities {
	return providers.Capabilities{Network: true, TTL: true, Labels: true, Stdin: true, Resources: true, Image: true}
}
