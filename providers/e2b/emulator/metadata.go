package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// File metadata lives, as in envd, in the file's extended attributes under
// wire.MetadataXattrPrefix. The backends have no calls for extended
// attributes, so the emulator reads and writes them with a small Python
// program run in the sandbox as the request's user (E2B's templates have
// Python; a sandbox without it has no metadata, and its writes with
// metadata fail).

// metadataChunk bounds the paths of one metadata read.
const metadataChunk = 256

// readXattrs prints, as one JSON object, the metadata of each path given
// as an argument that has any.
const readXattrs = `import json, os, sys
p = sys.argv[1]
out = {}
for f in sys.argv[2:]:
    m = {}
    try:
        for k in os.listxattr(f, follow_symlinks=False):
            if k.startswith(p):
                m[k[len(p):]] = os.getxattr(f, k, follow_symlinks=False).decode("utf-8", "replace")
    except OSError:
        pass
    if m:
        out[f] = m
sys.stdout.write(json.dumps(out))
`

// writeXattrs replaces the metadata of argv[2] with the JSON object on
// stdin.
const writeXattrs = `import json, os, sys
p, f = sys.argv[1], sys.argv[2]
md = json.load(sys.stdin)
for k in os.listxattr(f, follow_symlinks=False):
    if k.startswith(p):
        os.removexattr(f, k, follow_symlinks=False)
for k, v in md.items():
    os.setxattr(f, p + k, v.encode("utf-8"), follow_symlinks=False)
`

// metadataOf reads the metadata of paths as who; paths without any are
// missing from the result. A sandbox without Python has none.
func (s *Server) metadataOf(ctx context.Context, sb *sandbox, who identity, paths []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for len(paths) > 0 {
		n := min(len(paths), metadataChunk)
		var stdout bytes.Buffer
		argv := append([]string{"python3", "-c", readXattrs, wire.MetadataXattrPrefix}, paths[:n]...)
		res, err := s.backend.Exec(ctx, sb.backendID, providers.ExecRequest{Argv: argv, User: who.exec, Cwd: "/", Stdout: &stdout})
		paths = paths[n:]
		if err != nil || res.ExitCode != 0 {
			continue
		}
		var got map[string]map[string]string
		if json.Unmarshal(stdout.Bytes(), &got) == nil {
			for k, v := range got {
				out[k] = v
			}
		}
	}
	return out
}

// setMetadata replaces the metadata of p with md (none when empty).
func (s *Server) setMetadata(ctx context.Context, sb *sandbox, who identity, p string, md map[string]string) error {
	if md == nil {
		md = map[string]string{}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("encoding metadata: %w", err)
	}
	var stderr bytes.Buffer
	res, err := s.backend.Exec(ctx, sb.backendID, providers.ExecRequest{
		Argv: []string{"python3", "-c", writeXattrs, wire.MetadataXattrPrefix, p},
		User: who.exec, Cwd: "/", Stdin: bytes.NewReader(b), Stderr: &stderr,
	})
	if err != nil {
		return fmt.Errorf("setting the metadata of %s: %w", p, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("setting the metadata of %s: %s: %w", p, lastLine(stderr.String()), providers.ErrInvalid)
	}
	return nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// uploadMetadata collects an upload's X-Metadata-* headers (keys in lower
// case, as HTTP header names have no case); nil when there are none.
func uploadMetadata(h http.Header) (map[string]string, error) {
	var md map[string]string
	for k, vs := range h {
		name, ok := strings.CutPrefix(k, wire.HeaderMetadataPrefix)
		if !ok {
			continue
		}
		if name == "" || len(vs) != 1 || strings.IndexFunc(vs[0], func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) >= 0 {
			return nil, fmt.Errorf("invalid metadata header %s: %w", k, providers.ErrInvalid)
		}
		if md == nil {
			md = map[string]string{}
		}
		md[strings.ToLower(name)] = vs[0]
	}
	return md, nil
}

// withMetadata adds the metadata of each entry.
func (s *Server) withMetadata(ctx context.Context, sb *sandbox, who identity, entries []wire.EntryInfo) {
	paths := make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.Path
	}
	md := s.metadataOf(ctx, sb, who, paths)
	for i := range entries {
		entries[i].Metadata = md[entries[i].Path]
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// writeAsScript replaces $1 with stdin, making its parents.
const writeAsScript = `set -e; mkdir -p -- "$(dirname -- "$1")"; rm -f -- "$1"; cat > "$1"`

// ownerScript prints the uid that owns $1 or, when it is missing, its
// nearest ancestor that exists.
const ownerScript = `d=$1; while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done; exec stat -c %u -- "$d"`

// writerOf is who writes into dir for a default user the sandbox refused:
// the owner of dir or of its nearest existing ancestor, as a numeric user.
// That is root where the sandbox's root owns its system directories, as
// envd's root does; where they are another user's (the sandbox of an
// unprivileged host user, whose root the host's files do not belong to),
// that user, who alone may write there. Root when the owner is unknown.
func (s *Server) writerOf(ctx context.Context, sb *sandbox, dir string) identity {
	root := identity{exec: rootUser, name: rootUser, home: rootHome}
	var out bytes.Buffer
	res, err := s.backend.Exec(ctx, sb.backendID, providers.ExecRequest{
		Argv: []string{"/bin/sh", "-c", ownerScript, "sh", dir}, User: rootUser, Cwd: "/", Stdout: &out,
	})
	uid := strings.TrimSpace(out.String())
	if err != nil || res.ExitCode != 0 || uid == "" || uid == "0" || strings.Trim(uid, "0123456789") != "" {
		return root
	}
	return identity{exec: uid, name: uid, home: "/"}
}

// readAsScript copies $1 to stdout: status 2 when it is missing, 3 when
// it is a directory.
const readAsScript = `[ -e "$1" ] || exit 2; [ -d "$1" ] && exit 3; exec cat -- "$1"`

// writeFile writes an upload's file p as who. The backends' file calls run
// as the sandbox's default user, so another user's writes (root's, into
// /root) run as a command of that user, and so does a default user's
// write that the backend refused for lack of permission before reading
// any of it (a new directory under /, which envd, running as root,
// makes): that one runs as the owner of the directory it goes into (see
// writerOf).
func (s *Server) writeFile(ctx context.Context, sb *sandbox, who identity, p string, body io.Reader) error {
	if who.exec == "" {
		// A missing parent the user cannot make is made by its
		// directory's owner (the backend would read the body before
		// finding out).
		dir := path.Dir(p)
		if _, err := s.backend.Stat(ctx, sb.backendID, dir); isKind(err, providers.ErrNotFound) {
			if err := s.backend.Mkdir(ctx, sb.backendID, dir); err != nil && permissionDenied(err) {
				who = s.writerOf(ctx, sb, dir)
			}
		}
	}
	if who.exec == "" {
		cr := &countingReader{r: body}
		err := s.backend.WriteFile(ctx, sb.backendID, p, cr, 0o644)
		if err == nil || cr.n > 0 || !permissionDenied(err) {
			return err
		}
		who = s.writerOf(ctx, sb, path.Dir(p))
	}
	var stderr bytes.Buffer
	res, err := s.backend.Exec(ctx, sb.backendID, providers.ExecRequest{
		Argv: []string{"/bin/sh", "-c", writeAsScript, "sh", p}, User: who.exec, Cwd: "/", Stdin: body, Stderr: &stderr,
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: %w", lastLine(stderr.String()), providers.ErrDenied)
	}
	return nil
}

// readAs streams the file p to w as who, a user other than the default:
// the status is 404 for a missing file and 400 for a directory, and the
// headers go out with the first byte.
func (s *Server) readAs(w http.ResponseWriter, r *http.Request, sb *sandbox, who identity, p string) {
	lw := &lazyWriter{w: w, name: path.Base(p)}
	var stderr bytes.Buffer
	res, err := s.backend.Exec(r.Context(), sb.backendID, providers.ExecRequest{
		Argv: []string{"/bin/sh", "-c", readAsScript, "sh", p}, User: who.exec, Cwd: "/", Stdout: lw, Stderr: &stderr,
	})
	switch {
	case lw.started && (err != nil || res.ExitCode != 0):
		panic(http.ErrAbortHandler)
	case err != nil:
		writeAPIError(w, statusOf(err), err.Error())
	case res.ExitCode == 2:
		writeAPIError(w, http.StatusNotFound, "path '"+p+"' does not exist")
	case res.ExitCode == 3:
		writeAPIError(w, http.StatusBadRequest, "path '"+p+"' is a directory")
	case res.ExitCode != 0:
		writeAPIError(w, http.StatusForbidden, "reading "+p+": "+lastLine(stderr.String()))
	default:
		lw.start()
	}
}

// lazyWriter sends a download's headers before its first byte.
type lazyWriter struct {
	w       http.ResponseWriter
	name    string
	started bool
}

func (l *lazyWriter) start() {
	if l.started {
		return
	}
	l.started = true
	h := l.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": l.name}))
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	l.start()
	return l.w.Write(b)
}

// permissionDenied reports a refusal for lack of permission: EACCES, or a
// backend's message that carries no errno but says so.
func permissionDenied(err error) bool {
	return isKind(err, fs.ErrPermission) || strings.Contains(err.Error(), "permission denied")
}
