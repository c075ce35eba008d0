package providers

import (
	"fmt"
	"path"
	"strings"
)

// DefaultWorkdir is the working directory and the base of relative paths.
const DefaultWorkdir = "/workspace"

// CleanPath turns a user-supplied sandbox path into an absolute, clean path.
// Relative paths are taken from base (DefaultWorkdir when empty). It refuses
// empty paths, NUL bytes and any ".." component, so that a path can never
// climb out of the directory its author named; the error matches ErrInvalid.
func CleanPath(p, base string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path: %w", ErrInvalid)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte: %w", p, ErrInvalid)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q contains \"..\": give the path without parent references: %w", p, ErrInvalid)
		}
	}
	if !strings.HasPrefix(p, "/") {
		if base == "" {
			base = DefaultWorkdir
		}
		p = base + "/" + p
	}
	return path.Clean(p), nil
}
