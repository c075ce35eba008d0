package archive

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Symlinker is an optional interface for providers that can create a
// symlink through their API. UploadViaFiles uses it for symlink entries;
// without it such entries are refused with providers.ErrUnsupported.
type Symlinker interface {
	// Symlink creates a symlink at path (absolute, inside the sandbox)
	// pointing to target, replacing an existing file or symlink there.
	Symlink(ctx context.Context, id, target, path string) error
}

// UploadViaFiles implements Provider.Upload with p's file operations: it
// creates dst, then unpacks the tar stream entry by entry with Mkdir and
// WriteFile (and Symlinker when p has it), streaming each file's bytes
// straight from the archive. Entry names are validated as in Extract;
// hard links and device nodes are refused.
func UploadViaFiles(ctx context.Context, p providers.Provider, id, dst string, archive io.Reader) error {
	if err := p.Mkdir(ctx, id, dst); err != nil {
		return fmt.Errorf("upload: create %s: %w", dst, err)
	}
	tr := tar.NewReader(ctxReader{ctx, archive})
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if isEOF(err) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("upload: read archive: %w", err)
		}
		if err := checkSparse(hdr); err != nil {
			return fmt.Errorf("upload: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return fmt.Errorf("upload: %w", err)
		}
		target := path.Join(dst, name)
		switch {
		case hdr.Typeflag == tar.TypeXGlobalHeader:
		case hdr.Typeflag == tar.TypeDir:
			if err := p.Mkdir(ctx, id, target); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
		case name == "":
			return fmt.Errorf("upload: archive entry %q names the destination itself: %w", hdr.Name, providers.ErrInvalid)
		case isRegular(hdr):
			if err := p.WriteFile(ctx, id, target, tr, fs.FileMode(hdr.Mode).Perm()); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("upload: %w", err)
			}
		case hdr.Typeflag == tar.TypeSymlink:
			s, ok := p.(Symlinker)
			if !ok {
				return fmt.Errorf("upload: archive entry %q is a symlink, which provider %s cannot create: %w", hdr.Name, p.Name(), providers.ErrUnsupported)
			}
			if err := s.Symlink(ctx, id, hdr.Linkname, target); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
		case hdr.Typeflag == tar.TypeLink:
			return fmt.Errorf("upload: archive entry %q is a hard link to %q: hard links are not extracted: %w", hdr.Name, hdr.Linkname, providers.ErrUnsupported)
		default:
			return fmt.Errorf("upload: archive entry %q has unsupported type %q: %w", hdr.Name, hdr.Typeflag, providers.ErrUnsupported)
		}
	}
}

// DownloadViaFiles implements Provider.Download with p's file operations:
// a file or symlink yields one entry named by its base name; a directory
// yields its contents relative to it, in the order PackPipe uses, listed one
// directory at a time and streamed file by file.
func DownloadViaFiles(ctx context.Context, p providers.Provider, id, src string, w io.Writer) error {
	fi, err := p.Stat(ctx, id, src)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if fi.Path == "" {
		fi.Path = src
	}
	tw := tar.NewWriter(w)
	if fi.IsDir() {
		err = downloadDir(ctx, p, id, tw, src, "")
	} else {
		err = downloadEntry(ctx, p, id, tw, fi, path.Base(src))
	}
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("download: finish archive: %w", err)
	}
	return nil
}

// downloadDir writes the contents of the sandbox directory dir, naming them
// below rel.
func downloadDir(ctx context.Context, p providers.Provider, id string, tw *tar.Writer, dir, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := p.ListDir(ctx, id, dir, 1)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	// A listing comes from the sandbox and is not trusted to name only
	// direct children with plain names.
	kept := entries[:0]
	for _, e := range entries {
		base := path.Base(e.Path)
		if base == "." || base == ".." || base == "/" || path.Join(dir, base) != e.Path {
			return fmt.Errorf("download: listing of %s returned %q, which is not a direct child: %w", dir, e.Path, providers.ErrInvalid)
		}
		kept = append(kept, e)
	}
	sortEntries(kept, func(e providers.FileInfo) string { return path.Base(e.Path) }, providers.FileInfo.IsDir)
	for _, e := range kept {
		name := path.Join(rel, path.Base(e.Path))
		if err := downloadEntry(ctx, p, id, tw, e, name); err != nil {
			return err
		}
		if e.IsDir() {
			if err := downloadDir(ctx, p, id, tw, e.Path, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// downloadEntry writes one header and, for a regular file, its contents.
func downloadEntry(ctx context.Context, p providers.Provider, id string, tw *tar.Writer, fi providers.FileInfo, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	hdr := &tar.Header{Name: name, Mode: tarMode(fi.Mode), ModTime: fi.ModTime.Truncate(time.Second)}
	switch {
	case fi.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		return writeHeader(tw, hdr)
	case fi.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, fi.Target
		return writeHeader(tw, hdr)
	case fi.Mode.IsRegular():
	default:
		return nil
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size
	rc, err := p.ReadFile(ctx, id, fi.Path)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	defer rc.Close()
	if err := writeHeader(tw, hdr); err != nil {
		return err
	}
	n, err := io.CopyN(tw, ctxReader{ctx, rc}, fi.Size)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("download: %s: %d of %d bytes (did it change while downloading?): %w", fi.Path, n, fi.Size, err)
	}
	return nil
}
