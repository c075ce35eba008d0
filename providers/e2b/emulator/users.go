package emulator

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// E2B's sandboxes run commands and file operations as the user "user",
// whose home /home/user is the working directory and the base of relative
// paths and "~"; a request may name another user (root, typically). The
// emulator creates each sandbox with that user as the backend's default
// (Spec.User: the local provider adds it to the sandbox's /etc/passwd and
// gives it its home), or with the user a create request names in the
// emulator's own header wire.HeaderDefaultUser (this project's e2b client
// sends root there, the user it runs everything as). Each command runs as
// the user its request names (ExecRequest.User), in that user's home.
// File operations run as the sandbox's default user whatever user they
// name: the backend takes no user for them.
const (
	defaultUser = "user"
	rootUser    = "root"
	rootHome    = "/root"
)

// identity is the user an envd request acts as.
type identity struct {
	// exec is ExecRequest.User: empty for the sandbox's default user.
	exec string
	// name is the user's name, empty when unknown (the backend's own).
	name string
	// home is the user's home: the default working directory and the
	// base of relative paths and "~" (the backend sets HOME, USER and
	// LOGNAME for the user it runs a command as). Empty means the
	// backend's default working directory.
	home string
}

// prepare learns, once, the home of the sandbox's default user (from its
// /etc/passwd but for root). Without one (a backend that ignored
// Spec.User, or a sandbox created without it) requests that name no user
// keep the backend's default directory. Only an interrupted attempt is
// tried again.
func (s *Server) prepare(ctx context.Context, sb *sandbox) {
	sb.setupMu.Lock()
	defer sb.setupMu.Unlock()
	if sb.prepared {
		return
	}
	var home string
	switch sb.user {
	case "":
	case rootUser:
		home = rootHome
	default:
		h, err := s.homeOf(ctx, sb, sb.user)
		if ctx.Err() != nil || s.ctx.Err() != nil {
			return
		}
		if err != nil {
			s.logf("sandbox %s: user %s: %v; paths start at %s", sb.id, sb.user, err, providers.DefaultWorkdir)
		}
		home = h
	}
	sb.prepared, sb.home = true, home
}

// logf writes one line to the request log, if any.
func (s *Server) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "e2b emulator: "+format+"\n", args...)
	}
}

// requestUser is the user a request names: the username query parameter
// of /files, else the user of the Authorization header (Basic, with an
// empty password), else "" for the sandbox's default.
func requestUser(r *http.Request) (string, *rpcError) {
	if r.URL.Path == "/files" {
		if u := r.URL.Query().Get("username"); u != "" {
			return u, nil
		}
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", nil
	}
	scheme, cred, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return "", newRPCError(wire.CodeUnauthenticated, "unsupported authorization scheme "+strconv.Quote(scheme))
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", newRPCError(wire.CodeUnauthenticated, "invalid basic authorization: "+err.Error())
	}
	name, _, _ := strings.Cut(string(b), ":")
	return name, nil
}

// identityOf resolves the user a request acts as. As in envd, a user the
// sandbox does not have is unauthenticated.
func (s *Server) identityOf(r *http.Request, sb *sandbox) (identity, *rpcError) {
	name, rerr := requestUser(r)
	if rerr != nil {
		return identity{}, rerr
	}
	sb.setupMu.Lock()
	def := identity{name: sb.user, home: sb.home}
	sb.setupMu.Unlock()
	switch {
	case name == "" || name == def.name || name == defaultUser && def.name == "":
		// The sandbox's default user runs as the backend's default,
		// which works where the backend's user is not root.
		return def, nil
	case name == rootUser:
		return identity{exec: rootUser, name: rootUser, home: rootHome}, nil
	}
	home, err := s.homeOf(r.Context(), sb, name)
	if err != nil {
		return identity{}, newRPCError(wire.CodeUnauthenticated, "invalid username: '"+name+"': "+err.Error())
	}
	return identity{exec: name, name: name, home: home}, nil
}

// homeOf looks a user up in the sandbox's /etc/passwd.
func (s *Server) homeOf(ctx context.Context, sb *sandbox, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, ":\n/") {
		return "", fmt.Errorf("malformed user name: %w", providers.ErrInvalid)
	}
	rc, err := s.backend.ReadFile(ctx, sb.backendID, "/etc/passwd")
	if err != nil {
		return "", fmt.Errorf("reading /etc/passwd: %w", err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(io.LimitReader(rc, 4<<20))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) == 7 && f[0] == name && strings.HasPrefix(f[5], "/") {
			return path.Clean(f[5]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading /etc/passwd: %w", err)
	}
	return "", fmt.Errorf("no such user in /etc/passwd: %w", providers.ErrNotFound)
}

// resolve makes an envd path absolute as envd does: "~" and "~/…" start
// at the user's home, and so do relative paths ("~other" is refused).
func (id identity) resolve(p string) (string, error) {
	base := id.home
	if base == "" {
		base = providers.DefaultWorkdir
	}
	if p == "" || p == "~" {
		return base, nil
	}
	if p[0] == '~' {
		rest, ok := strings.CutPrefix(p, "~/")
		if !ok {
			return "", fmt.Errorf("cannot expand user-specific home dir in %q: %w", p, providers.ErrInvalid)
		}
		if rest == "" {
			return base, nil
		}
		p = rest
	}
	return providers.CleanPath(p, base)
}
