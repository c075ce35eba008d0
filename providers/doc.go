// Package providers defines the contract every sandbox provider implements:
// the Provider interface, the value types it exchanges, the shared error kinds,
// declared capabilities, and the Registry that maps provider names to
// constructors.
//
// A provider is one folder under providers/ that exposes a Registration. The
// engine is the only package that looks providers up; it wraps each one in the
// approval gate before anything else can reach it.
//
// Paths handed to a provider are absolute paths inside the sandbox, already
// cleaned by the caller (see CleanPath). Providers must still refuse anything
// that would reach outside the sandbox.
package providers
