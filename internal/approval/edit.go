package approval

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/agentbox/sandbox/providers"
)

// EditResult is the outcome of an Edit.
type EditResult struct {
	// Replacements is how many occurrences were replaced.
	Replacements int `json:"replacements"`
	// Diff is the unified diff that was approved and applied.
	Diff string `json:"diff"`
}

// maxEditSize bounds the files Edit loads into memory.
const maxEditSize = 16 << 20

// Edit replaces old with new in a file, after ONE approval of kind
// KindEdit whose Details.Diff is the unified diff. old must occur exactly
// once, or at least once when all is set: otherwise the error matches
// providers.ErrInvalid and says that the text was not found, or how often
// it occurs. The file keeps its mode. Edit refuses to write when the file
// changed while the approver was deciding.
//
// The file is read before the approver is asked (the diff needs it), but
// only when neither the policy for the edit nor that for reading the file
// already denies.
func (g *Gate) Edit(ctx context.Context, id, path, old, new string, all bool) (EditResult, error) {
	p, err := g.clean(path)
	if err != nil {
		return EditResult{}, err
	}
	if old == "" {
		return EditResult{}, fmt.Errorf("edit %s: the text to replace is empty: %w", p, providers.ErrInvalid)
	}
	if old == new {
		return EditResult{}, fmt.Errorf("edit %s: the old and new text are the same: %w", p, providers.ErrInvalid)
	}
	req := g.request(ctx, KindEdit, id, p)
	req.Details.Dest = ""

	// Decide what can be decided without the diff, so a denied edit never
	// reaches the provider, not even to read: on the path as typed, then
	// on where it leads, for reading (through a final symlink) and for
	// writing (which replaces one).
	readReq := req
	readReq.Kind = KindRead
	if denied, err := g.editDenied(ctx, readReq, req); denied {
		return EditResult{}, err
	}
	readAt, err := g.resolve(ctx, &readReq, followFinal)
	if err != nil {
		return EditResult{}, err
	}
	at, err := g.resolve(ctx, &req, followParent)
	if err != nil {
		return EditResult{}, err
	}
	if denied, err := g.editDenied(ctx, readReq, req); denied {
		return EditResult{}, err
	}

	before, err := g.readAll(readAt.ctx(ctx), id, readAt.target)
	if err != nil {
		return EditResult{}, err
	}
	n := strings.Count(before, old)
	switch {
	case n == 0:
		return EditResult{}, fmt.Errorf("edit %s: the text to replace was not found: %w", p, providers.ErrInvalid)
	case n > 1 && !all:
		return EditResult{}, fmt.Errorf("edit %s: the text to replace occurs %d times: add surrounding context to make it unique, or pass --all: %w", p, n, providers.ErrInvalid)
	}
	after := strings.Replace(before, old, new, 1)
	if all {
		after = strings.ReplaceAll(before, old, new)
	} else {
		n = 1
	}
	diff := unifiedDiff(p, before, after)
	req.Details.Diff = diff
	req.Details.Bytes = int64(len(after))

	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		now, err := g.readAll(readAt.ctx(ctx), id, readAt.target)
		if err != nil {
			return nil, err
		}
		if now != before {
			return nil, fmt.Errorf("edit %s: the file changed while waiting for approval; edit again: %w", p, providers.ErrInvalid)
		}
		mode := fs.FileMode(0o644)
		if fi, err := g.inner.Stat(at.ctx(ctx), id, at.target); err == nil && fi.Mode&fs.ModeSymlink == 0 {
			mode = fi.Mode.Perm()
		}
		return nil, g.inner.WriteFile(at.ctx(ctx), id, at.target, strings.NewReader(after), mode)
	})
	if err != nil {
		return EditResult{}, err
	}
	return EditResult{Replacements: n, Diff: diff}, nil
}

// editDenied decides an edit as far as it can be without its diff: a read
// of the file that is denied, or an edit that is denied or that no one can
// be asked about. It returns true with the decision's error when so.
func (g *Gate) editDenied(ctx context.Context, readReq, req Request) (bool, error) {
	if g.evaluate(readReq).effect == Deny {
		_, err := g.decide(ctx, readReq)
		return true, err
	}
	if v := g.evaluate(req); v.effect == Deny || (v.effect == Ask && g.approver == nil) {
		_, err := g.decide(ctx, req)
		return true, err
	}
	return false, nil
}

// readAll reads a whole (bounded) file through the inner provider.
func (g *Gate) readAll(ctx context.Context, id, p string) (string, error) {
	rc, err := g.inner.ReadFile(ctx, id, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxEditSize+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > maxEditSize {
		return "", fmt.Errorf("edit %s: file is larger than %d MiB: %w", p, maxEditSize>>20, providers.ErrInvalid)
	}
	return string(data), nil
}

func unifiedDiff(p, before, after string) string { return UnifiedDiff(p, before, after, false) }

// UnifiedDiff renders before → after as a unified diff of the sandbox path
// p, the one diff of every write and edit an approver is shown: a new
// file (isNew) is `--- /dev/null` / `@@ -0,0 +1,N @@`, and a last line
// without a newline adds no blank line.
func UnifiedDiff(p, before, after string, isNew bool) string {
	from := "a" + p
	if isNew {
		from = "/dev/null"
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        splitLines(before),
		B:        splitLines(after),
		FromFile: from,
		ToFile:   "b" + p,
		Context:  3,
	})
	if err != nil {
		return ""
	}
	return d
}

// splitLines splits text into lines that each end in a newline, without
// inventing an empty last line.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}
