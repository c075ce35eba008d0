//go:build !modal

package all

import "github.com/agentbox/sandbox/providers"

// optional are the providers built in by tag. Modal needs -tags modal for
// now: its SDK's package initialisers (the protobuf descriptors above all,
// 2.3 ms and 1 MB per process) would run in every init and runner of the
// local provider, which re-executes this binary.
func optional() []providers.Registration { return nil }
