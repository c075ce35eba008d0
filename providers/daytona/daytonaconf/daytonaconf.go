// Package daytonaconf is what this project knows of Daytona without its
// client: the provider's name, the variables it reads, its defaults and
// capabilities. The program sandbox lists Daytona with this package alone
// and hands a run that uses it to the program providers.CloudProgram,
// which has the client and the emulator (package daytona) built in.
package daytonaconf

import (
	"github.com/agentbox/sandbox/providers"
)

// Name is the registry name of the provider.
const Name = "daytona"

// Environment variables the provider reads.
const (
	EnvAPIKey       = "DAYTONA_API_KEY"
	EnvAPIURL       = "DAYTONA_API_URL"
	EnvTarget       = "DAYTONA_TARGET"
	EnvOrganization = "DAYTONA_ORGANIZATION_ID"
	EnvSnapshot     = "DAYTONA_SNAPSHOT"
)

// DefaultAPIURL is the API of Daytona's cloud.
const DefaultAPIURL = "https://app.daytona.io/api"

// Capabilities are what Daytona supports through this client: labels
// filter List, a snapshot is the image, networkBlockAll is the network
// switch, and stdin is read to its end before the command starts.
func Capabilities() providers.Capabilities {
	return providers.Capabilities{Network: true, Labels: true, Image: true, Stdin: true}
}

// Registration describes the provider without building it: name,
// variables and capabilities. Package daytona adds New and the emulator.
func Registration() providers.Registration {
	return providers.Registration{
		Name:        Name,
		Description: "Daytona cloud sandboxes through Daytona's API",
		Env: []providers.EnvKey{
			{Name: EnvAPIKey, Help: "API key from the Daytona dashboard", Required: true, Secret: true},
			{Name: EnvAPIURL, Help: "API URL (default " + DefaultAPIURL + ")"},
			{Name: EnvTarget, Help: "target region (us, eu; default: the organization's)"},
			{Name: EnvOrganization, Help: "organization id, sent as X-Daytona-Organization-ID"},
			{Name: EnvSnapshot, Help: "snapshot used when --image is not given (default: Daytona's)"},
		},
		Capabilities: Capabilities(),
	}
}
