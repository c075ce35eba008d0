package emulator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// routes registers the control plane and envd handlers.
func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	api := func(h http.HandlerFunc) http.HandlerFunc { return s.requireKey(h) }
	m.HandleFunc("POST /sandboxes", api(s.handleCreate))
	m.HandleFunc("POST /v2/sandboxes", api(s.handleCreate))
	m.HandleFunc("GET /sandboxes", api(s.handleListRunning))
	m.HandleFunc("GET /v2/sandboxes", api(s.handleList))
	m.HandleFunc("GET /sandboxes/{id}", api(s.handleGet))
	m.HandleFunc("DELETE /sandboxes/{id}", api(s.handleKill))
	m.HandleFunc("POST /sandboxes/{id}/timeout", api(s.handleTimeout))
	m.HandleFunc("POST /sandboxes/{id}/refreshes", api(s.handleRefresh))
	m.HandleFunc("POST /sandboxes/{id}/connect", api(s.handleConnect))
	m.HandleFunc("POST /v2/sandboxes/{id}/connect", api(s.handleConnect))
	m.HandleFunc("POST /sandboxes/{id}/resume", api(s.handleConnect))
	m.HandleFunc("POST /sandboxes/{id}/pause", api(s.handlePause))
	m.HandleFunc("GET /sandboxes/{id}/metrics", api(s.handleMetrics))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "the e2b emulator does not implement "+r.Method+" "+r.URL.Path)
	})
	s.mux = m

	e := http.NewServeMux()
	e.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	e.HandleFunc("GET /files", s.handleDownload)
	e.HandleFunc("POST /files", s.handleUpload)
	e.HandleFunc("GET /envs", s.handleEnvs)
	e.HandleFunc("POST /process.Process/{method}", s.handleProcess)
	e.HandleFunc("POST /filesystem.Filesystem/{method}", s.handleFilesystem)
	e.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "the e2b emulator's envd does not implement "+r.Method+" "+r.URL.Path)
	})
	s.envd = e
}

// requireKey checks X-API-Key.
func (s *Server) requireKey(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(wire.HeaderAPIKey)
		if key == "" || (s.opts.APIKey != "" && !sameSecret(key, s.opts.APIKey)) {
			writeAPIError(w, http.StatusUnauthorized, "Invalid API key, please visit your E2B dashboard to get a valid one (or use the key `sandbox serve` printed)")
			return
		}
		h(w, r)
	}
}

// decodeBody reads a JSON body into v; an empty body leaves v as is.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var body wire.NewSandbox
	if err := decodeBody(r, &body); err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if body.TemplateID == "" {
		writeAPIError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	timeout := body.Timeout
	switch {
	case timeout == 0:
		timeout = defaultTimeout
	case timeout < 0:
		writeAPIError(w, http.StatusBadRequest, "timeout must be greater than 0")
		return
	case timeout > maxTimeout:
		writeAPIError(w, http.StatusBadRequest, "Timeout cannot be greater than 24 hours")
		return
	}
	id := randomString(20)
	labels := maps.Clone(body.Metadata)
	if labels == nil {
		labels = map[string]string{}
	}
	for k := range labels {
		if internalLabel(k) {
			writeAPIError(w, http.StatusBadRequest, "metadata key "+k+" is reserved by the emulator")
			return
		}
	}
	labels[labelMarker], labels[labelID], labels[labelTemplate] = "1", id, body.TemplateID
	labels[labelEnd] = strconv.FormatInt(s.now().Add(time.Duration(timeout)*time.Second).Unix(), 10)
	autoPause := body.AutoPause != nil && *body.AutoPause
	if autoPause {
		labels[labelAutoPause] = "1"
	}
	spec := providers.Spec{Labels: labels, Env: body.EnvVars}
	if body.AllowInternetAccess != nil {
		spec.Network = providers.NetworkOff
		if *body.AllowInternetAccess {
			spec.Network = providers.NetworkOn
		}
		if !s.backend.Capabilities().Network {
			spec.Network = providers.NetworkDefault
		}
	}
	if s.backend.Capabilities().Image && body.TemplateID != "base" {
		spec.Image = body.TemplateID
	}
	info, user, err := s.createBackend(r.Context(), spec, r.Header.Get(wire.HeaderDefaultUser))
	if err != nil {
		writeAPIError(w, statusOf(err), "creating the sandbox: "+err.Error())
		return
	}
	now := s.now()
	sb := &sandbox{
		id: id, backendID: info.ID, template: body.TemplateID, metadata: maps.Clone(body.Metadata),
		envs: body.EnvVars, started: now, end: now.Add(time.Duration(timeout) * time.Second),
		internet: body.AllowInternetAccess, procs: map[uint32]*process{}, nextPID: 1000, user: user,
		killed: make(chan struct{}), autoPause: autoPause,
	}
	if sb.metadata == nil {
		sb.metadata = map[string]string{}
	}
	if body.Secure == nil || *body.Secure {
		sb.token = s.tokenFor(id)
	}
	s.prepare(r.Context(), sb)
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.sandboxReply(sb))
}

// createBackend creates the backend sandbox with its default user: want,
// E2B's "user" when empty. Root is the backend's own default. A backend
// that cannot have another user (the local provider run by a user other
// than root maps no other ids; its weak mode has none) gets a second try
// without, and its own user runs everything. It returns the user that
// requests naming none run as ("" for the backend's own).
func (s *Server) createBackend(ctx context.Context, spec providers.Spec, want string) (providers.Info, string, error) {
	if want == "" {
		want = defaultUser
	}
	withUser := spec
	withUser.Labels = maps.Clone(spec.Labels)
	withUser.Labels[labelUser] = want
	if want != rootUser {
		withUser.User = want
	}
	info, err := s.backend.Create(ctx, withUser)
	if err == nil || want == rootUser {
		return info, want, err
	}
	if ctx.Err() != nil || isKind(err, providers.ErrAuth) || isKind(err, providers.ErrQuota) {
		return info, "", err
	}
	s.logf("creating a sandbox with the user %q failed, creating one without: %v", want, err)
	info, err = s.backend.Create(ctx, spec)
	return info, "", err
}

func (s *Server) sandboxReply(sb *sandbox) wire.Sandbox {
	return wire.Sandbox{
		TemplateID: sb.template, SandboxID: sb.id, ClientID: wire.ClientID,
		EnvdVersion: EnvdVersion, EnvdAccessToken: sb.token,
	}
}

func (s *Server) detail(sb *sandbox, withSecrets bool) wire.SandboxDetail {
	state := wire.StateRunning
	if sb.paused {
		state = wire.StatePaused
	}
	d := wire.SandboxDetail{
		TemplateID: sb.template, SandboxID: sb.id, ClientID: wire.ClientID,
		StartedAt: sb.started.UTC(), EndAt: sb.end.UTC(), CPUCount: 2, MemoryMB: 512, DiskSizeMB: 1024,
		Metadata: sb.metadata, State: state, EnvdVersion: EnvdVersion,
	}
	if withSecrets {
		d.EnvdAccessToken = sb.token
		d.AllowInternetAccess = sb.internet
	}
	return d
}

// sandboxFor finds the path's sandbox or answers 404.
func (s *Server) sandboxFor(w http.ResponseWriter, r *http.Request) *sandbox {
	id := r.PathValue("id")
	sb, err := s.lookup(r.Context(), id)
	if err != nil {
		if errors.Is(err, providers.ErrNotFound) {
			writeAPIError(w, http.StatusNotFound, "sandbox \""+id+"\" doesn't exist or you don't have access to it")
		} else {
			writeAPIError(w, statusOf(err), err.Error())
		}
		return nil
	}
	return sb
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if sb := s.sandboxFor(w, r); sb != nil {
		s.mu.Lock()
		d := s.detail(sb, true)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, d)
	}
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxFor(w, r)
	if sb == nil {
		return
	}
	if err := s.kill(r.Context(), sb); err != nil {
		if errors.Is(err, providers.ErrNotFound) {
			writeAPIError(w, http.StatusNotFound, "sandbox \""+sb.id+"\" not found")
			return
		}
		writeAPIError(w, statusOf(err), "killing the sandbox: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	var body wire.TimeoutRequest
	if err := decodeBody(r, &body); err != nil || body.Timeout <= 0 {
		writeAPIError(w, http.StatusBadRequest, "timeout must be a positive number of seconds")
		return
	}
	if body.Timeout > maxTimeout {
		writeAPIError(w, http.StatusBadRequest, "Timeout cannot be greater than 24 hours")
		return
	}
	if sb := s.sandboxFor(w, r); sb != nil {
		s.mu.Lock()
		sb.end = s.now().Add(time.Duration(body.Timeout) * time.Second)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Duration int `json:"duration"`
	}
	if err := decodeBody(r, &body); err != nil || body.Duration < 0 || body.Duration > 3600 {
		writeAPIError(w, http.StatusBadRequest, "duration must be between 0 and 3600 seconds")
		return
	}
	if sb := s.sandboxFor(w, r); sb != nil {
		s.mu.Lock()
		if end := s.now().Add(time.Duration(body.Duration) * time.Second); end.After(sb.end) {
			sb.end = end
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

// handleConnect answers 200 for a running sandbox and 201 after resuming
// a paused one; the timeout only ever extends the lifetime.
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	var body wire.TimeoutRequest
	if err := decodeBody(r, &body); err != nil || body.Timeout < 0 {
		writeAPIError(w, http.StatusBadRequest, "invalid request body")
		return
	}
	sb := s.sandboxFor(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	status := http.StatusOK
	if sb.paused {
		sb.paused, status = false, http.StatusCreated
		// A resumed sandbox's timeout starts again.
		sb.end = s.now().Add(time.Duration(min(max(body.Timeout, defaultTimeout), maxTimeout)) * time.Second)
	}
	if body.Timeout > 0 {
		if end := s.now().Add(time.Duration(min(body.Timeout, maxTimeout)) * time.Second); end.After(sb.end) {
			sb.end = end
		}
	}
	reply := s.sandboxReply(sb)
	s.mu.Unlock()
	writeJSON(w, status, reply)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxFor(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb.paused {
		writeAPIError(w, http.StatusConflict, "sandbox \""+sb.id+"\" is already paused")
		return
	}
	sb.paused = true
	w.WriteHeader(http.StatusNoContent)
}

// handleListRunning is the deprecated GET /sandboxes: running only, no paging.
func (s *Server) handleListRunning(w http.ResponseWriter, r *http.Request) {
	filter, err := parseMetadataQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	list, err := s.matching(r.Context(), filter)
	if err != nil {
		writeAPIError(w, statusOf(err), err.Error())
		return
	}
	out := []wire.SandboxDetail{}
	for _, d := range list {
		if d.State == wire.StateRunning {
			out = append(out, d)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleList is GET /v2/sandboxes with metadata and state filters, order
// and paging by an opaque cursor.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := parseMetadataQuery(q.Get("metadata"))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	states := map[string]bool{wire.StateRunning: true, wire.StatePaused: true}
	if v := q["state"]; len(v) > 0 {
		states = map[string]bool{}
		for _, part := range v {
			for st := range strings.SplitSeq(part, ",") {
				if st != wire.StateRunning && st != wire.StatePaused {
					writeAPIError(w, http.StatusBadRequest, "unknown state "+strconv.Quote(st))
					return
				}
				states[st] = true
			}
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeAPIError(w, http.StatusBadRequest, "limit must be between 1 and 100")
			return
		}
		limit = n
	}
	var after, before time.Time
	for name, t := range map[string]*time.Time{"startedAfter": &after, "startedBefore": &before} {
		if v := q.Get(name); v != "" {
			parsed, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "invalid "+name+": "+err.Error())
				return
			}
			*t = parsed
		}
	}
	offset := 0
	if v := q.Get("nextToken"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		n, cerr := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if err != nil || cerr != nil || n < 0 {
			writeAPIError(w, http.StatusBadRequest, "invalid nextToken")
			return
		}
		offset = n
	}
	list, err := s.matching(r.Context(), filter)
	if err != nil {
		writeAPIError(w, statusOf(err), err.Error())
		return
	}
	var kept []wire.SandboxDetail
	running := 0
	for _, d := range list {
		if d.State == wire.StateRunning {
			running++
		}
		if !after.IsZero() && d.StartedAt.Before(after) || !before.IsZero() && d.StartedAt.After(before) {
			continue
		}
		if states[d.State] && (q.Get("template") == "" || q.Get("template") == d.TemplateID) {
			kept = append(kept, d)
		}
	}
	asc := q.Get("order") == "asc"
	sort.SliceStable(kept, func(i, j int) bool {
		if asc {
			return kept[i].StartedAt.Before(kept[j].StartedAt)
		}
		return kept[i].StartedAt.After(kept[j].StartedAt)
	})
	page := []wire.SandboxDetail{}
	if offset < len(kept) {
		page = kept[offset:min(offset+limit, len(kept))]
	}
	if offset+limit < len(kept) {
		w.Header().Set(wire.HeaderNextToken, base64.RawURLEncoding.EncodeToString([]byte("offset:"+itoa(offset+limit))))
	}
	w.Header().Set("X-Total-Running", itoa(running))
	writeJSON(w, http.StatusOK, page)
}

// matching lists the emulator's sandboxes whose metadata contains filter,
// adopting the backend's sandboxes a previous emulator created.
func (s *Server) matching(ctx context.Context, filter map[string]string) ([]wire.SandboxDetail, error) {
	labels := maps.Clone(filter)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelMarker] = "1"
	found, err := s.backend.List(ctx, providers.Filter{Labels: labels})
	if err != nil {
		return nil, err
	}
	for _, info := range found {
		if info.Labels[labelID] != "" && (info.State == providers.StateRunning || info.State == providers.StatePaused) {
			s.adopt(info)
		}
	}
	f := providers.Filter{Labels: filter}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []wire.SandboxDetail{}
	ids := slices.Sorted(maps.Keys(s.sandboxes))
	for _, id := range ids {
		sb := s.sandboxes[id]
		if f.Matches(sb.metadata) {
			out = append(out, s.detail(sb, false))
		}
	}
	return out, nil
}

// parseMetadataQuery parses "k1=v1&k2=v2" with escaped keys and values
// (the query value itself was already unescaped once).
func parseMetadataQuery(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(v, "&") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			return nil, errors.New("invalid metadata query: each pair must be key=value")
		}
		k, err := url.QueryUnescape(kv[0])
		if err != nil {
			return nil, errors.New("invalid metadata key: " + err.Error())
		}
		val, err := url.QueryUnescape(kv[1])
		if err != nil {
			return nil, errors.New("invalid metadata value: " + err.Error())
		}
		out[k] = val
	}
	return out, nil
}
