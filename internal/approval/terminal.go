package approval

import (
	"context"
	"fmt"

	"github.com/agentbox/sandbox/providers"
)

var _ providers.Terminal = (*Gate)(nil)

// ExecTerminal is gated as an exec of er (KindExec, decided as Exec
// decides it): one decision for the whole session, whatever is typed into
// the terminal afterwards. The operation's record is written when the
// command ends, with its exit status. Without providers.Terminal it
// returns an error matching providers.ErrUnsupported.
func (g *Gate) ExecTerminal(ctx context.Context, id string, er providers.ExecRequest, term providers.TerminalRequest) (providers.TerminalSession, error) {
	tp, ok := g.inner.(providers.Terminal)
	if !ok {
		return nil, providers.Errorf(providers.ErrUnsupported, g.inner.Name(), "exec",
			"provider %s has no terminals (PTYs): use exec, or a provider with them (local, e2b)", g.inner.Name())
	}
	if er.Argv != nil && er.Shell != "" {
		return nil, fmt.Errorf("exec: both argv and a shell string given: %w", providers.ErrInvalid)
	}
	type started struct {
		s   providers.TerminalSession
		err error
	}
	ready := make(chan started, 1)
	go func() {
		sent := false
		err := g.do(ctx, g.execRequest(ctx, id, er), func(ctx context.Context) (*int, error) {
			s, err := tp.ExecTerminal(ctx, id, er, term)
			if err != nil {
				return nil, err
			}
			ready <- started{s: s}
			sent = true
			res, err := s.Wait()
			if err != nil {
				return nil, err
			}
			code := res.ExitCode
			return &code, nil
		})
		if !sent {
			if err == nil {
				err = fmt.Errorf("exec on a terminal: the operation did not run: %w", providers.ErrUnavailable)
			}
			ready <- started{err: err}
		}
	}()
	r := <-ready
	return r.s, r.err
}
