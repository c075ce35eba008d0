// Package runloopconf is what this project knows of Runloop without its
// client: the provider's name, the variables it reads, its defaults and
// capabilities. The program sandbox lists Runloop with this package alone
// and hands a run that uses it to the program providers.CloudProgram,
// which has the client and the emulator (package runloop) built in.
package runloopconf

import (
	"github.com/agentbox/sandbox/providers"
)

// Name is the registry name of the provider.
const Name = "runloop"

// Environment variables the provider reads.
const (
	EnvAPIKey  = "RUNLOOP_API_KEY"
	EnvBaseURL = "RUNLOOP_BASE_URL"
)

// DefaultBaseURL is Runloop's API.
const DefaultBaseURL = "https://api.runloop.ai"

// Capabilities: metadata holds the labels, keep_alive_time_seconds is the
// TTL, a blueprint (or snapshot) is the image, and stdin is read to its
// end before the command starts.
func Capabilities() providers.Capabilities {
	return providers.Capabilities{Labels: true, TTL: true, Image: true, Stdin: true}
}

// Registration describes the provider without building it: name,
// variables and capabilities. Package runloop adds New and the emulator.
func Registration() providers.Registration {
	return providers.Registration{
		Name:        Name,
		Description: "Runloop devboxes through Runloop's API",
		Env: []providers.EnvKey{
			{Name: EnvAPIKey, Help: "API key from the Runloop dashboard", Required: true, Secret: true},
			{Name: EnvBaseURL, Help: "API base URL (default " + DefaultBaseURL + ")"},
		},
		Capabilities: Capabilities(),
	}
}
