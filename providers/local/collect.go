//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Collect removes what interrupted creates and deletes left in the
// provider's directory: a sandbox directory without metadata (a create
// killed before it wrote it, a delete killed after it removed it) whose
// last change is older than grace, with its machine, if one still runs,
// and its cgroups; then every empty cgroup of a sandbox that is gone. It
// returns the ids of the directories it removed. A younger directory may
// be a create still at work, and is left alone.
func (p *Provider) Collect(ctx context.Context, grace time.Duration) ([]string, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("local: collect: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		id := e.Name()
		if !e.IsDir() || !strings.HasPrefix(id, "sb-") || !validID(id) {
			continue
		}
		dir := filepath.Join(p.dir, id)
		if _, err := os.Lstat(filepath.Join(dir, metaFile)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < grace {
			continue
		}
		if err := p.killMachine(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("local: collect %s: %w", id, err))
			continue
		}
		if err := p.discard(dir, id); err != nil {
			errs = append(errs, fmt.Errorf("local: collect %s: %w", id, err))
			continue
		}
		p.cg.removeSandbox(id)
		removed = append(removed, id)
	}
	// Empty cgroups of sandboxes deleted while their processes were
	// being torn down.
	p.cg.removeEmpty()
	return removed, errors.Join(errs...)
}
