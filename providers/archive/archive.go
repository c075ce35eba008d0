// Package archive holds the tar helpers shared by the CLI (the host side of
// upload and download) and by providers.
//
// PackPipe and Manifest read a tree through an *os.Root, and Extract writes one
// through an *os.Root, so that no path named in an archive, and no symlink
// found on disk, can reach outside the directory the caller opened. Extract
// additionally refuses entry names that are absolute, contain ".." or NUL
// bytes, and never writes through a symlink below its destination.
//
// UploadViaFiles and DownloadViaFiles implement Provider.Upload and
// Provider.Download on top of a provider's file operations, for backends
// whose APIs have no archive endpoint.
//
// Everything streams: file contents go from reader to writer in small
// chunks and are never held whole in memory, and every function stops
// promptly when its context is cancelled.
package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/agentbox/sandbox/providers"
)

// ctxReader fails reads once ctx is done, so that long copies stop promptly.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// entryName validates the name of an archive entry and returns it clean and
// relative, or "" for an entry that names the archive's root itself.
func entryName(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("archive entry with an empty name: %w", providers.ErrInvalid)
	}
	if strings.IndexByte(raw, 0) >= 0 {
		return "", fmt.Errorf("archive entry %q contains a NUL byte: %w", raw, providers.ErrInvalid)
	}
	if strings.HasPrefix(raw, "/") {
		return "", fmt.Errorf("archive entry %q is absolute: %w", raw, providers.ErrInvalid)
	}
	for part := range strings.SplitSeq(raw, "/") {
		if part == ".." {
			return "", fmt.Errorf("archive entry %q contains \"..\": %w", raw, providers.ErrInvalid)
		}
	}
	name := path.Clean(raw)
	if name == "." {
		return "", nil
	}
	return name, nil
}

// rootName cleans a name given to a function that works through an
// *os.Root: empty means the root itself.
func rootName(name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte: %w", name, providers.ErrInvalid)
	}
	return path.Clean(name), nil
}

// sortEntries orders directory entries the way PackPipe writes them:
// subdirectories first, then everything else, each group by name.
func sortEntries[T any](entries []T, name func(T) string, isDir func(T) bool) {
	slices.SortFunc(entries, func(a, b T) int {
		da, db := isDir(a), isDir(b)
		switch {
		case da && !db:
			return -1
		case !da && db:
			return 1
		}
		return strings.Compare(name(a), name(b))
	})
}

// tarMode returns the permission bits stored in a tar header.
func tarMode(m fs.FileMode) int64 { return int64(m.Perm()) }

// isEOF reports whether err is the io.EOF that ends a tar stream.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// wrapNotExist makes a missing-path error from the os package match
// providers.ErrNotFound as well.
func wrapNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, providers.ErrNotFound) {
		return fmt.Errorf("%w (%w)", err, providers.ErrNotFound)
	}
	return err
}
