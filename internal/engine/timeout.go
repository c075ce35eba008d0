package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// WithCallTimeout bounds one operation by d (no bound when d is zero). When
// the deadline passes, CallError turns the context's error into one that
// matches providers.ErrTimeout and says which limit elapsed (what, e.g.
// "--timeout 30s").
func WithCallTimeout(ctx context.Context, d time.Duration, what string) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%s elapsed: %w", what, providers.ErrTimeout))
}

// CallError replaces a deadline error from a context made by
// WithCallTimeout with its timeout cause; other errors pass unchanged.
func CallError(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
	}
	return err
}
