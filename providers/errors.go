package providers

import (
	"errors"
	"fmt"
)

// Shared error kinds. Providers wrap them (directly or through *Error) so that
// errors.Is works across provider boundaries and the CLI can choose an exit
// code and a hint.
var (
	ErrNotFound    = errors.New("not found")
	ErrAuth        = errors.New("authentication failed")
	ErrQuota       = errors.New("quota exceeded")
	ErrTimeout     = errors.New("timed out")
	ErrUnavailable = errors.New("unavailable")
	ErrUnsupported = errors.New("not supported")
	ErrInvalid     = errors.New("invalid argument")
	ErrExists      = errors.New("already exists")
	// ErrDenied is an operation refused by an approval policy, here or in
	// the server behind a provider (an emulator runs its own gate).
	ErrDenied = errors.New("denied by policy")
)

// Error carries a shared kind together with the provider's own message.
type Error struct {
	// Kind is one of the Err* sentinels above.
	Kind error
	// Provider is the registry name of the provider that failed.
	Provider string
	// Op names the operation ("create", "exec", "read /workspace/x").
	Op string
	// Msg is the server's or system's own message, kept verbatim.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

// Error formats as "provider: op: msg".
func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = e.Kind.Error()
	}
	switch {
	case e.Provider != "" && e.Op != "":
		return fmt.Sprintf("%s: %s: %s", e.Provider, e.Op, msg)
	case e.Op != "":
		return fmt.Sprintf("%s: %s", e.Op, msg)
	default:
		return msg
	}
}

// Is matches the kind sentinel.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error of the given kind with a formatted message.
func Errorf(kind error, provider, op, format string, args ...any) error {
	return &Error{Kind: kind, Provider: provider, Op: op, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the shared kind of err, or nil when it has none.
func KindOf(err error) error {
	for _, k := range []error{ErrNotFound, ErrAuth, ErrQuota, ErrTimeout, ErrUnavailable, ErrUnsupported, ErrInvalid, ErrExists} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// CredentialError reports a missing or rejected credential; it matches ErrAuth
// and names the variable that would fix it.
type CredentialError struct {
	Provider string
	// Var is the environment variable to set, e.g. "E2B_API_KEY".
	Var string
	// Rejected is true when the key was present but refused.
	Rejected bool
	Msg      string
}

// Error says which variable to set.
func (e *CredentialError) Error() string {
	if e.Rejected {
		s := fmt.Sprintf("%s: credentials rejected: check %s", e.Provider, e.Var)
		if e.Msg != "" {
			s += ": " + e.Msg
		}
		return s
	}
	return fmt.Sprintf("%s: missing credentials: set %s in the environment or a .env file", e.Provider, e.Var)
}

// Is matches ErrAuth.
func (e *CredentialError) Is(target error) bool { return target == ErrAuth }
