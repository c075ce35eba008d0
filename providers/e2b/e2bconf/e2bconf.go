// Package e2bconf is what this project knows of E2B without its client:
// the provider's name, the variables it reads, its defaults and
// capabilities. The program sandbox lists E2B with this package alone and
// hands a run that uses it to the program providers.CloudProgram, which
// has the client and the emulator (package e2b) built in.
package e2bconf

import (
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Name is the registry name of the provider.
const Name = "e2b"

// Environment variables the provider reads.
const (
	EnvAPIKey     = "E2B_API_KEY"
	EnvDomain     = "E2B_DOMAIN"
	EnvAPIURL     = "E2B_API_URL"
	EnvSandboxURL = "E2B_SANDBOX_URL"
	EnvTemplate   = "E2B_TEMPLATE"
	EnvUser       = "E2B_USER"
)

// Defaults of the public service.
const (
	DefaultDomain   = "e2b.app"
	DefaultTemplate = "base"
	// DefaultUser runs commands and file operations as root, so that
	// /workspace (the contract's working directory) can be created and
	// used on E2B's standard templates.
	DefaultUser = "root"
	// DefaultLifetime is the sandbox timeout sent when a Spec has no TTL:
	// E2B always ends a sandbox after its timeout, and one hour is the
	// longest the smallest plan allows.
	DefaultLifetime = time.Hour
)

// Capabilities are what E2B supports. Network is the sandbox-wide
// allow_internet_access flag; Resources depend on the template, not on
// the create call.
func Capabilities() providers.Capabilities {
	return providers.Capabilities{Network: true, TTL: true, Labels: true, Stdin: true, Image: true}
}

// Registration describes the provider without building it: name,
// variables and capabilities. Package e2b adds New and the emulator.
func Registration() providers.Registration {
	return providers.Registration{
		Name:        Name,
		Description: "E2B cloud sandboxes (Firecracker microVMs) through E2B's API",
		Env: []providers.EnvKey{
			{Name: EnvAPIKey, Help: "API key from the E2B dashboard", Required: true, Secret: true},
			{Name: EnvDomain, Help: "E2B domain (default " + DefaultDomain + ")"},
			{Name: EnvAPIURL, Help: "control-plane URL (default https://api.<domain>)"},
			{Name: EnvSandboxURL, Help: "one URL for every sandbox's envd, routed by headers (emulators)"},
			{Name: EnvTemplate, Help: "template used when --image is not given (default " + DefaultTemplate + ")"},
			{Name: EnvUser, Help: "user commands and files run as (default " + DefaultUser + ")"},
		},
		Capabilities: Capabilities(),
	}
}
