package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ManifestEntry describes one path that PackPipe would write, for approval
// dialogs that show what an upload or download will transfer.
type ManifestEntry struct {
	// Path is the entry's name in the archive (no trailing slash).
	Path string `json:"path"`
	// Size is the length of a regular file; zero otherwise.
	Size int64       `json:"size"`
	Mode fs.FileMode `json:"mode"`
	// Target is the link target of a symlink.
	Target string `json:"target,omitempty"`
	// SHA256 is the hex digest of a regular file's contents, when asked for.
	SHA256 string `json:"sha256,omitempty"`
}

// Manifest lists the entries PackPipe would write for name inside root, in the
// same order, with sizes and, when hash is set, the SHA-256 of every
// regular file (streamed, so large files cost time but not memory).
func Manifest(ctx context.Context, root *os.Root, name string, hash bool) ([]ManifestEntry, error) {
	var out []ManifestEntry
	err := walk(ctx, root, name, func(n node) error {
		mode := n.info.Mode()
		e := ManifestEntry{Path: n.rel, Mode: mode, Target: n.target}
		switch {
		case mode.IsRegular():
			e.Size = n.info.Size()
			if hash {
				sum, err := hashFile(ctx, root, n.full)
				if err != nil {
					return err
				}
				e.SHA256 = sum
			}
		case mode.IsDir(), mode&fs.ModeSymlink != 0:
		default:
			return nil // PackPipe skips these too
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// hashFile returns the hex SHA-256 of a file inside root.
func hashFile(ctx context.Context, root *os.Root, name string) (string, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
