package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// sandboxKey carries the routed sandbox in a request's context.
type sandboxKey struct{}

// serveEnvd checks the route and the access token, then serves envd.
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, id, port string) {
	sb, err := s.lookup(r.Context(), id)
	if err == nil {
		s.mu.Lock()
		if sb.paused {
			err = providers.ErrNotFound
		}
		s.mu.Unlock()
	}
	if err != nil {
		// The edge proxy's reply for a sandbox it cannot reach.
		writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "message": "The sandbox was not found", "code": http.StatusBadGateway})
		return
	}
	if port != strconv.Itoa(wire.EnvdPort) {
		writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "message": "The sandbox is running but port is not open (the e2b emulator serves only envd's port " + strconv.Itoa(wire.EnvdPort) + ")", "port": port, "code": http.StatusBadGateway})
		return
	}
	open := r.URL.Path == "/health" || r.URL.Path == "/files"
	if sb.token != "" && !open && !sameSecret(r.Header.Get(wire.HeaderAccessToken), sb.token) {
		writeAPIError(w, http.StatusUnauthorized, msgUnauthorized)
		return
	}
	if r.URL.Path != "/health" {
		s.prepare(r.Context(), sb)
	}
	s.envd.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, sb)))
}

func sandboxOf(r *http.Request) *sandbox { return r.Context().Value(sandboxKey{}).(*sandbox) }

// rpcError is a Connect error ready to send.
type rpcError = wire.Error

func newRPCError(code, msg string) *rpcError { return &rpcError{Code: code, Message: msg} }

// errorFrom maps a backend error to a Connect error with its message.
func errorFrom(err error) *rpcError { return newRPCError(codeOf(err), err.Error()) }

// writeUnaryError answers a unary call with a Connect error.
func writeUnaryError(w http.ResponseWriter, e *rpcError) {
	w.Header().Set("Content-Type", wire.ContentTypeUnary)
	w.WriteHeader(wire.HTTPStatus(e.Code))
	_ = json.NewEncoder(w).Encode(e)
}

// readUnary decodes a unary request as connect-go does: JSON only, an
// empty body is invalid.
func readUnary(r *http.Request, v any) *rpcError {
	ct := r.Header.Get("Content-Type")
	if ct != "" && !strings.HasPrefix(ct, wire.ContentTypeUnary) {
		return newRPCError(wire.CodeUnimplemented, "the e2b emulator speaks Connect with JSON only, not "+ct)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return newRPCError(wire.CodeInvalidArgument, "reading the request: "+err.Error())
	}
	if len(b) == 0 {
		return newRPCError(wire.CodeInvalidArgument, "unmarshal into "+strings.TrimPrefix(r.URL.Path, "/")+": zero-length payload is not a valid JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return newRPCError(wire.CodeInvalidArgument, "unmarshal request: "+err.Error())
	}
	return nil
}

// writeUnary answers a unary call.
func writeUnary(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", wire.ContentTypeUnary)
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

// entryOf converts a backend FileInfo to envd's EntryInfo.
func entryOf(fi providers.FileInfo) wire.EntryInfo {
	t := wire.FileTypeFile
	switch {
	case fi.Mode&fs.ModeSymlink != 0:
		t = wire.FileTypeSymlink
	case fi.IsDir():
		t = wire.FileTypeDirectory
	}
	e := wire.EntryInfo{
		Name: fi.Name, Type: t, Path: fi.Path, Size: fi.Size, Mode: uint32(fi.Mode.Perm()),
		Permissions: fi.Mode.String(), Owner: "user", Group: "user",
	}
	if e.Name == "" {
		e.Name = path.Base(fi.Path)
	}
	if !fi.ModTime.IsZero() {
		e.ModifiedTime = &wire.Timestamp{Time: fi.ModTime}
	}
	if fi.Target != "" {
		// envd reports where the link points as an absolute path.
		target := fi.Target
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(fi.Path), target)
		}
		e.SymlinkTarget = &target
	}
	return e
}

// handleFilesystem serves filesystem.Filesystem's unary methods.
func (s *Server) handleFilesystem(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	ctx, id, b := r.Context(), sb.backendID, s.backend
	who, rerr := s.identityOf(r, sb)
	if rerr != nil {
		writeUnaryError(w, rerr)
		return
	}
	// entry answers with the entry now at p.
	entry := func(p string) (any, error) {
		fi, err := b.Stat(ctx, id, p)
		if err != nil {
			return nil, err
		}
		e := []wire.EntryInfo{entryOf(fi)}
		s.withMetadata(ctx, sb, who, e)
		return wire.EntryResponse{Entry: e[0]}, nil
	}
	switch r.URL.Path {
	case wire.FSStat:
		serveUnary(w, r, func(req wire.PathRequest) (any, error) {
			p, err := who.resolve(req.Path)
			if err != nil {
				return nil, err
			}
			return entry(p)
		})
	case wire.FSListDir:
		serveUnary(w, r, func(req wire.ListDirRequest) (any, error) {
			p, err := who.resolve(req.Path)
			if err != nil {
				return nil, err
			}
			if fi, err := b.Stat(ctx, id, p); err != nil {
				return nil, err
			} else if !fi.IsDir() {
				return nil, newRPCError(wire.CodeInvalidArgument, "path "+p+" is not a directory")
			}
			list, err := b.ListDir(ctx, id, p, max(int(req.Depth), 1))
			if err != nil {
				return nil, err
			}
			out := wire.ListDirResponse{Entries: make([]wire.EntryInfo, 0, len(list))}
			for _, fi := range list {
				out.Entries = append(out.Entries, entryOf(fi))
			}
			s.withMetadata(ctx, sb, who, out.Entries)
			return out, nil
		})
	case wire.FSMakeDir:
		serveUnary(w, r, func(req wire.PathRequest) (any, error) {
			p, err := who.resolve(req.Path)
			if err != nil {
				return nil, err
			}
			if fi, err := b.Stat(ctx, id, p); err == nil {
				if fi.IsDir() {
					return nil, newRPCError(wire.CodeAlreadyExists, "directory "+p+" already exists")
				}
				return nil, newRPCError(wire.CodeInvalidArgument, "path "+p+" already exists and is not a directory")
			}
			if err := b.Mkdir(ctx, id, p); err != nil {
				return nil, err
			}
			sb.settleWatches(ctx, p)
			return entry(p)
		})
	case wire.FSMove:
		serveUnary(w, r, func(req wire.MoveRequest) (any, error) {
			from, err := who.resolve(req.Source)
			if err != nil {
				return nil, err
			}
			to, err := who.resolve(req.Destination)
			if err != nil {
				return nil, err
			}
			if err := b.Rename(ctx, id, from, to); err != nil {
				return nil, err
			}
			sb.settleWatches(ctx, from, to)
			return entry(to)
		})
	case wire.FSRemove:
		serveUnary(w, r, func(req wire.PathRequest) (any, error) {
			p, err := who.resolve(req.Path)
			if err != nil {
				return nil, err
			}
			if err := b.Remove(ctx, id, p, true); err != nil && !errors.Is(err, providers.ErrNotFound) {
				return nil, err
			}
			sb.settleWatches(ctx, p)
			return struct{}{}, nil
		})
	case wire.FSCreateWatcher:
		serveUnary(w, r, func(req wire.WatchRequest) (any, error) {
			return s.createWatcher(ctx, sb, who, req)
		})
	case wire.FSGetWatcherEvents:
		serveUnary(w, r, func(req wire.WatcherRequest) (any, error) {
			return sb.watcherEvents(req.WatcherID)
		})
	case wire.FSRemoveWatcher:
		serveUnary(w, r, func(req wire.WatcherRequest) (any, error) {
			return struct{}{}, sb.removeWatcher(req.WatcherID)
		})
	case wire.FSWatchDir:
		s.handleWatchDir(w, r, sb, who)
	default:
		writeUnaryError(w, newRPCError(wire.CodeUnimplemented, "the e2b emulator does not implement "+r.URL.Path))
	}
}

// serveUnary decodes a unary request into a Req, runs fn and writes its
// reply, or its error as a Connect error (an *rpcError as it is, any other
// error mapped by its kind).
func serveUnary[Req any](w http.ResponseWriter, r *http.Request, fn func(Req) (any, error)) {
	var req Req
	if rerr := readUnary(r, &req); rerr != nil {
		writeUnaryError(w, rerr)
		return
	}
	reply, err := fn(req)
	if err != nil {
		var rerr *rpcError
		if !errors.As(err, &rerr) {
			rerr = errorFrom(err)
		}
		writeUnaryError(w, rerr)
		return
	}
	writeUnary(w, reply)
}

// handleEnvs answers GET /envs with the sandbox's environment.
func (s *Server) handleEnvs(w http.ResponseWriter, r *http.Request) {
	envs := sandboxOf(r).envs
	if envs == nil {
		envs = map[string]string{}
	}
	writeJSON(w, http.StatusOK, envs)
}
