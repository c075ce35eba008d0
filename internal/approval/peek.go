package approval

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/agentbox/sandbox/providers"
)

// Existing is what Peek finds where a write is about to go.
type Existing struct {
	// Exists is set when something is there; Dir when it is a directory.
	Exists, Dir bool
	// Known is set when Content holds the file's content.
	Known   bool
	Content string
}

// Peek looks at path before a write to it, as part of that write rather
// than as a call of its own: it sends no event and writes no audit record.
// It follows the symlinks the write would (the parent's), and reads the
// content (for the write's diff) only of a regular file of at most limit
// bytes that the policy lets be read without asking anyone. A write the
// policy denies whatever its path resolves to is decided (and reported)
// here, as the write it is.
func (g *Gate) Peek(ctx context.Context, id, path string, limit int64) (Existing, error) {
	p, err := g.clean(path)
	if err != nil {
		return Existing{}, err
	}
	req := g.request(ctx, KindWrite, id, p)
	req.Details.Dest = ""
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return Existing{}, err
	}
	fi, err := g.inner.Stat(at.ctx(ctx), id, at.target)
	if errors.Is(err, providers.ErrNotFound) {
		return Existing{}, nil
	}
	if err != nil {
		return Existing{}, err
	}
	ex := Existing{Exists: true, Dir: fi.IsDir()}
	if !fi.Mode.IsRegular() || fi.Size > limit {
		return ex, nil
	}
	readReq := g.request(ctx, KindRead, id, p)
	if g.evaluate(readReq).effect != Allow {
		return ex, nil
	}
	rat, err := g.resolve(ctx, &readReq, followFinal)
	if err != nil || g.evaluate(readReq).effect != Allow {
		return ex, nil
	}
	rc, err := g.inner.ReadFile(rat.ctx(ctx), id, rat.target)
	if err != nil {
		return ex, nil
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return ex, fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(data)) <= limit {
		ex.Known, ex.Content = true, string(data)
	}
	return ex, nil
}
