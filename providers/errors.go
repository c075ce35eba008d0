package providers

import (
	"errors"
	"fmt"
	"strings"
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

// UnreachableError is a provider's API that could not be reached: no
// connection to URL was made in Attempts tries. It matches ErrUnavailable
// and says what to check.
type UnreachableError struct {
	Provider string
	// Op names the operation ("create", "list").
	Op string
	// URL is the address tried, without its query.
	URL string
	// Cause is why no connection was made ("connect: connection
	// refused").
	Cause    string
	Attempts int
	// Check names the variables that set the API's address, when known;
	// the message names the provider's API URL setting otherwise.
	Check []string
	// Err is the transport's error.
	Err error
}

// Error names the URL tried, why it failed, and what to check.
func (e *UnreachableError) Error() string {
	var b strings.Builder
	if e.Provider != "" {
		b.WriteString(e.Provider + ": ")
	}
	if e.Op != "" {
		b.WriteString(e.Op + ": ")
	}
	fmt.Fprintf(&b, "cannot reach %s", e.URL)
	if e.Cause != "" {
		fmt.Fprintf(&b, " (%s)", e.Cause)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	check := "the provider's API URL setting (see `sandbox providers`)"
	if n := len(e.Check); n > 0 {
		check = e.Check[n-1]
		if n > 1 {
			check = strings.Join(e.Check[:n-1], ", ") + " or " + check
		}
	}
	fmt.Fprintf(&b, ": check %s and the network", check)
	return b.String()
}

// Is matches ErrUnavailable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the transport's error.
func (e *UnreachableError) Unwrap() error { return e.Err }
