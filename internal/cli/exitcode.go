package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
)

// Exit codes: the one table of the program, also printed in the README and
// by `sandbox exit-codes`. `exec` passes the command's own status
// through instead.
const (
	ExitOK          = 0   // success
	ExitError       = 1   // any other error
	ExitUsage       = 2   // bad flags or arguments
	ExitDenied      = 3   // denied by approval or policy
	ExitCredentials = 4   // missing or rejected credentials
	ExitTimeout     = 124 // a timeout elapsed
	ExitSandbox     = 125 // the sandbox could not be created or set up, or its provider cannot run here
	ExitInterrupted = 130 // interrupted (SIGINT/SIGTERM)
)

// exitCodeTable lists the table for `sandbox exit-codes`, in order.
var exitCodeTable = []struct {
	Code int
	Text string
}{
	{ExitOK, "success"},
	{ExitError, "error"},
	{ExitUsage, "usage error (bad flag, argument, policy or plan)"},
	{ExitDenied, "denied by approval or policy"},
	{ExitCredentials, "missing or rejected credentials"},
	{ExitTimeout, "timed out"},
	{ExitSandbox, "sandbox could not be created or set up, or its provider cannot run here"},
	{ExitInterrupted, "interrupted"},
}

// UsageError marks an error as the user's invocation being wrong (exit 2).
type UsageError struct{ Err error }

// Error returns the underlying message.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// ExitStatus is an error carrying an exact status, used by `exec` to pass
// the command's status through without printing anything.
type ExitStatus struct{ Code int }

// Error is never printed: the status speaks for itself.
func (e *ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// exitCode maps an error to the table above.
func exitCode(err error) int {
	var (
		status  *ExitStatus
		usage   *UsageError
		denied  *approval.DeniedError
		setupE  *engine.SetupError
		createE *engine.CreateError
		unavail *engine.UnavailableError
		auditE  *approval.AuditError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &status):
		return status.Code
	case errors.As(err, &auditE):
		// --audit-required refused the call (or it ran unrecorded): an
		// error, not a denial; no rule would let it run, free space would.
		return ExitError
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.As(err, &denied), errors.Is(err, providers.ErrDenied):
		return ExitDenied
	case errors.Is(err, providers.ErrAuth):
		return ExitCredentials
	case errors.As(err, &setupE), errors.As(err, &createE), errors.As(err, &unavail):
		return ExitSandbox
	case errors.Is(err, providers.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	case errors.As(err, &usage), errors.Is(err, providers.ErrUnsupported):
		return ExitUsage
	}
	return ExitError
}
