package archive

import (
	"context"
	"io"
	"os"
)

// Pack writes the archive PackPipe streams for name to w, for the tests.
func Pack(ctx context.Context, w io.Writer, root *os.Root, name string) error {
	return PackAs(ctx, w, root, name, "")
}

// PackAs is Pack with the entry name of a file given (see pack).
func PackAs(ctx context.Context, w io.Writer, root *os.Root, name, as string) error {
	return pack(ctx, NewWriter(w), root, name, as)
}
