package emulator

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"

	shared "github.com/agentbox/sandbox/providers/emulator"
)

// sandbox is the emulator's record of one Daytona sandbox.
type sandbox struct {
	id        string
	backendID string

	// mu guards everything below.
	mu  sync.Mutex
	dto wire.Sandbox
	// signingKey signs the sandbox's file URLs (see signed.go).
	signingKey   string
	lastActivity time.Time
	stoppedAt    time.Time
	// inflight counts the toolbox requests being served.
	inflight int
	sessions map[string]*session
	// removing says that a remove is deleting the backend sandbox: the
	// record stays (destroying) until the backend's is gone.
	removing bool
}

// view returns the sandbox's description with toolboxProxyURL.
func (sb *sandbox) view(proxy string) wire.Sandbox {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	d := sb.dto
	d.Labels = maps.Clone(d.Labels)
	d.Env = maps.Clone(d.Env)
	d.LastActivityAt = sb.lastActivity
	d.ToolboxProxyURL = proxy
	return d
}

// proxyURL is the toolboxProxyUrl handed out for requests to r's host.
func proxyURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/toolbox"
}

func (s *Server) controlRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /api/sandbox", s.create)
	m.HandleFunc("GET /api/sandbox", s.list)
	m.HandleFunc("GET /api/sandbox/{id}", s.withSandbox(s.get))
	m.HandleFunc("DELETE /api/sandbox/{id}", s.withSandbox(s.destroy))
	m.HandleFunc("POST /api/sandbox/{id}/start", s.withSandbox(s.start))
	m.HandleFunc("POST /api/sandbox/{id}/stop", s.withSandbox(s.stop))
	m.HandleFunc("GET /api/sandbox/{id}/toolbox-proxy-url", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, http.StatusOK, wire.ToolboxProxyURL{URL: proxyURL(r)})
	}))
	m.HandleFunc("PUT /api/sandbox/{id}/labels", s.withSandbox(s.setLabels))
	m.HandleFunc("GET /api/sandbox/{id}/signing-key", s.withSandbox(s.signingKey))
	m.HandleFunc("POST /api/sandbox/{id}/signing-key/rotate", s.withSandbox(s.rotateSigningKey))
	m.HandleFunc("POST /api/sandbox/{id}/last-activity", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		sb.mu.Lock()
		sb.lastActivity = s.opts.Now()
		sb.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	for _, name := range []string{"autostop", "autoarchive", "autodelete"} {
		m.HandleFunc("POST /api/sandbox/{id}/"+name+"/{minutes}", s.withSandbox(s.setInterval(name)))
	}
}

// withSandbox resolves the {id} of the path (an id or a name).
func (s *Server) withSandbox(h func(http.ResponseWriter, *http.Request, *sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb, err := s.lookup(r.Context(), r.PathValue("id"))
		if err != nil {
			if isKind(err, providers.ErrNotFound) {
				writeError(w, r, http.StatusNotFound, "Sandbox with ID or name "+r.PathValue("id")+" not found", "")
				return
			}
			writeBackendError(w, r, err)
			return
		}
		h(w, r, sb)
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateSandbox
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, r, http.StatusBadRequest, "invalid body: "+err.Error(), "")
		return
	}
	if req.Snapshot != "" && req.BuildInfo != nil {
		writeError(w, r, http.StatusBadRequest, "Cannot specify both snapshot and buildInfo", "")
		return
	}
	if req.Name != "" {
		if _, err := s.lookup(r.Context(), req.Name); err == nil {
			writeError(w, r, http.StatusConflict, "Sandbox with name "+req.Name+" already exists", "")
			return
		}
	}
	id := newUUID()
	now := s.opts.Now().UTC()
	dto := wire.Sandbox{
		ID: id, OrganizationID: organizationID, Name: cmp.Or(req.Name, id), Snapshot: req.Snapshot,
		User: cmp.Or(req.User, defaultUser), Env: nonNil(req.Env), Labels: nonNil(req.Labels),
		Public: req.Public, Target: cmp.Or(req.Target, "local"),
		CPU: cmp.Or(req.CPU, defaultCPU), GPU: req.GPU, Memory: cmp.Or(req.Memory, defaultMemory), Disk: cmp.Or(req.Disk, defaultDisk),
		State: wire.StateStarted, DesiredState: wire.StateStarted,
		AutoStopInterval: intOr(req.AutoStopInterval, defaultAutoStop), AutoArchiveInterval: intOr(req.AutoArchiveInterval, defaultAutoArchive),
		AutoDeleteInterval: intOr(req.AutoDeleteInterval, defaultAutoDelete),
		Volumes:            []any{}, BuildInfo: req.BuildInfo, CreatedAt: now, UpdatedAt: now,
		SandboxClass: "container", DaemonVersion: "emulator",
	}
	if req.NetworkBlockAll != nil {
		dto.NetworkBlockAll = *req.NetworkBlockAll
	}
	labels := maps.Clone(dto.Labels)
	labels[labelMarker], labels[labelID], labels[labelName] = "1", id, dto.Name
	if req.Snapshot != "" {
		labels[labelSnapshot] = req.Snapshot
	}
	// A user named in the create is the backend sandbox's default user;
	// Daytona's default ("daytona") stands for the backend's own.
	spec := providers.Spec{Labels: labels, Env: dto.Env, User: req.User}
	if req.NetworkBlockAll != nil {
		spec.Network = providers.NetworkOn
		if *req.NetworkBlockAll {
			spec.Network = providers.NetworkOff
		}
	}
	if req.Snapshot != "" && s.backend.Capabilities().Image {
		spec.Image = req.Snapshot
	}
	info, err := s.backend.Create(r.Context(), spec)
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	// The toolbox's relative paths and default directory exist.
	if err := s.backend.Mkdir(r.Context(), info.ID, workDir); err != nil {
		_ = s.backend.Delete(context.WithoutCancel(r.Context()), info.ID)
		writeBackendError(w, r, err)
		return
	}
	if info.Network != providers.NetworkDefault {
		dto.NetworkBlockAll = info.Network == providers.NetworkOff
	}
	sb := &sandbox{id: id, backendID: info.ID, dto: dto, signingKey: shared.RandomHex(32), lastActivity: now, sessions: map[string]*session{}}
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, sb.view(proxyURL(r)))
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, sb.view(proxyURL(r)))
}

// list answers GET /sandbox: filtered by labels (a JSON object), states
// and id or name prefix, oldest first, in pages of limit with a cursor.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var want map[string]string
	if v := q.Get("labels"); v != "" {
		if err := json.Unmarshal([]byte(v), &want); err != nil {
			writeError(w, r, http.StatusBadRequest, "labels must be a JSON object of strings: "+err.Error(), "")
			return
		}
	}
	states := q["states"]
	limit, err := strconv.Atoi(cmp.Or(q.Get("limit"), "100"))
	if err != nil || limit < 1 || limit > 200 {
		writeError(w, r, http.StatusBadRequest, "limit must be between 1 and 200", "")
		return
	}
	offset := 0
	if c := q.Get("cursor"); c != "" {
		if offset, err = strconv.Atoi(c); err != nil || offset < 0 {
			writeError(w, r, http.StatusBadRequest, "invalid cursor", "")
			return
		}
	}
	if err := s.adoptAll(r.Context()); err != nil {
		writeBackendError(w, r, err)
		return
	}
	s.mu.Lock()
	all := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		all = append(all, sb)
	}
	s.mu.Unlock()
	proxy := proxyURL(r)
	items := []wire.Sandbox{}
	for _, sb := range all {
		d := sb.view(proxy)
		if !(providers.Filter{Labels: want}).Matches(d.Labels) {
			continue
		}
		if len(states) > 0 && !contains(states, d.State) {
			continue
		}
		if p := q.Get("name"); p != "" && !strings.HasPrefix(d.Name, p) {
			continue
		}
		if p := q.Get("id"); p != "" && !strings.HasPrefix(d.ID, p) {
			continue
		}
		items = append(items, d)
	}
	sort.Slice(items, func(i, j int) bool {
		if !items[i].CreatedAt.Equal(items[j].CreatedAt) {
			return items[i].CreatedAt.Before(items[j].CreatedAt)
		}
		return items[i].ID < items[j].ID
	})
	out := wire.SandboxList{Items: []wire.Sandbox{}}
	if offset < len(items) {
		end := min(offset+limit, len(items))
		out.Items = items[offset:end]
		if end < len(items) {
			next := strconv.Itoa(end)
			out.NextCursor = &next
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// destroy deletes the backend sandbox and forgets the record.
func (s *Server) destroy(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if err := s.remove(r.Context(), sb); err != nil {
		writeBackendError(w, r, err)
		return
	}
	d := sb.view(proxyURL(r))
	d.State, d.DesiredState = wire.StateDestroyed, wire.StateDestroyed
	writeJSON(w, http.StatusOK, d)
}

// remove ends a sandbox: its sessions, the backend sandbox, then the
// record. The record stays, destroying, while the backend deletes: gone
// from the records earlier, a lookup meanwhile found the backend's
// sandbox still there and adopted it again, as a stopped sandbox without
// its auto-delete interval that no reaper would ever remove (seen in CI
// with a slow delete). A concurrent remove of the same sandbox finds it
// gone; a failed delete leaves the record as it was.
func (s *Server) remove(ctx context.Context, sb *sandbox) error {
	s.mu.Lock()
	current := s.sandboxes[sb.id] == sb
	s.mu.Unlock()
	sb.mu.Lock()
	if !current || sb.removing {
		sb.mu.Unlock()
		return providers.ErrNotFound
	}
	sb.removing = true
	state, desired := sb.dto.State, sb.dto.DesiredState
	sb.dto.State, sb.dto.DesiredState = wire.StateDestroying, wire.StateDestroyed
	sb.mu.Unlock()
	sb.endSessions()
	if err := s.backend.Delete(ctx, sb.backendID); err != nil && !isKind(err, providers.ErrNotFound) {
		sb.mu.Lock()
		sb.removing = false
		sb.dto.State, sb.dto.DesiredState = state, desired
		sb.mu.Unlock()
		return err
	}
	s.mu.Lock()
	if s.sandboxes[sb.id] == sb {
		delete(s.sandboxes, sb.id)
	}
	s.mu.Unlock()
	return nil
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if err := s.setState(r.Context(), sb, wire.StateStarted); err != nil {
		writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sb.view(proxyURL(r)))
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if err := s.setState(r.Context(), sb, wire.StateStopped); err != nil {
		writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sb.view(proxyURL(r)))
}

// setState starts or stops a sandbox: the backend's machine when it has
// one (a stop ends its processes), the record in any case. A stopped
// sandbox's sessions end.
func (s *Server) setState(ctx context.Context, sb *sandbox, state string) error {
	between := wire.StateStarting
	if state == wire.StateStopped {
		between = wire.StateStopping
	}
	sb.mu.Lock()
	cur := sb.dto.State
	if cur == state || cur == between {
		sb.mu.Unlock()
		return nil
	}
	sb.dto.State, sb.dto.DesiredState = between, state
	sb.mu.Unlock()
	m, ok := s.backend.(providers.Machine)
	if state == wire.StateStopped {
		sb.endSessions()
	}
	if ok {
		var err error
		if state == wire.StateStopped {
			err = m.Stop(ctx, sb.backendID)
		} else {
			err = m.Start(ctx, sb.backendID)
		}
		if err != nil && !isKind(err, providers.ErrUnsupported) {
			sb.mu.Lock()
			sb.dto.State, sb.dto.DesiredState = cur, cur
			sb.mu.Unlock()
			return err
		}
	}
	now := s.opts.Now().UTC()
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.dto.State, sb.dto.DesiredState, sb.dto.UpdatedAt = state, state, now
	sb.lastActivity = now
	if state == wire.StateStopped {
		sb.stoppedAt = now
	}
	return nil
}

func (s *Server) setLabels(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var body struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		writeError(w, r, http.StatusBadRequest, "invalid body: "+err.Error(), "")
		return
	}
	sb.mu.Lock()
	sb.dto.Labels = nonNil(body.Labels)
	sb.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"labels": nonNil(body.Labels)})
}

// setInterval sets autostop, autoarchive or autodelete (minutes).
func (s *Server) setInterval(name string) func(http.ResponseWriter, *http.Request, *sandbox) {
	return func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		n, err := strconv.Atoi(r.PathValue("minutes"))
		if err != nil || n < -1 {
			writeError(w, r, http.StatusBadRequest, "invalid interval "+r.PathValue("minutes"), "")
			return
		}
		sb.mu.Lock()
		switch name {
		case "autostop":
			sb.dto.AutoStopInterval = n
		case "autoarchive":
			sb.dto.AutoArchiveInterval = n
		default:
			sb.dto.AutoDeleteInterval = n
		}
		sb.mu.Unlock()
		writeJSON(w, http.StatusOK, sb.view(proxyURL(r)))
	}
}

// reap stops sandboxes idle longer than their auto-stop interval and
// destroys those stopped longer than their auto-delete interval.
func (s *Server) reap() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.reapOnce()
	}
}

func (s *Server) reapOnce() {
	now := s.opts.Now()
	unit := s.opts.Minute
	var stop, del []*sandbox
	s.mu.Lock()
	for _, sb := range s.sandboxes {
		sb.mu.Lock()
		switch d := sb.dto; {
		case d.State == wire.StateStarted && d.AutoStopInterval > 0 && !sb.busy() &&
			now.Sub(sb.lastActivity) >= time.Duration(d.AutoStopInterval)*unit:
			stop = append(stop, sb)
		case d.State == wire.StateStopped && d.AutoDeleteInterval >= 0 &&
			now.Sub(sb.stoppedAt) >= time.Duration(d.AutoDeleteInterval)*unit:
			del = append(del, sb)
		}
		sb.mu.Unlock()
	}
	s.mu.Unlock()
	for _, sb := range stop {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		_ = s.setState(ctx, sb, wire.StateStopped)
		cancel()
	}
	for _, sb := range del {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		_ = s.remove(ctx, sb)
		cancel()
	}
}

// lookup finds a sandbox by id or name, asking the backend for sandboxes
// a previous emulator created.
func (s *Server) lookup(ctx context.Context, idOrName string) (*sandbox, error) {
	find := func() *sandbox {
		s.mu.Lock()
		defer s.mu.Unlock()
		if sb, ok := s.sandboxes[idOrName]; ok {
			return sb
		}
		for _, sb := range s.sandboxes {
			sb.mu.Lock()
			name := sb.dto.Name
			sb.mu.Unlock()
			if name == idOrName {
				return sb
			}
		}
		return nil
	}
	if sb := find(); sb != nil {
		return sb, nil
	}
	if idOrName == "" || len(idOrName) > 256 {
		return nil, providers.ErrNotFound
	}
	if err := s.adoptAll(ctx); err != nil {
		return nil, err
	}
	if sb := find(); sb != nil {
		return sb, nil
	}
	return nil, providers.ErrNotFound
}

// adoptAll records the backend's sandboxes a previous emulator made.
func (s *Server) adoptAll(ctx context.Context) error {
	found, err := s.backend.List(ctx, providers.Filter{Labels: map[string]string{labelMarker: "1"}})
	if err != nil {
		return err
	}
	for _, info := range found {
		s.adopt(info)
	}
	return nil
}

// adopt records a backend sandbox found by its labels.
func (s *Server) adopt(info providers.Info) {
	id := info.Labels[labelID]
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sandboxes[id]; ok {
		return
	}
	labels := map[string]string{}
	for k, v := range info.Labels {
		if !internalLabel(k) {
			labels[k] = v
		}
	}
	state := wire.StateStarted
	if info.State == providers.StateStopped {
		state = wire.StateStopped
	}
	now := s.opts.Now().UTC()
	s.sandboxes[id] = &sandbox{
		id: id, backendID: info.ID, signingKey: shared.RandomHex(32), lastActivity: now, stoppedAt: now, sessions: map[string]*session{},
		dto: wire.Sandbox{
			ID: id, OrganizationID: organizationID, Name: cmp.Or(info.Labels[labelName], id), Snapshot: info.Labels[labelSnapshot],
			User: defaultUser, Env: map[string]string{}, Labels: labels, Target: "local",
			CPU: defaultCPU, Memory: defaultMemory, Disk: defaultDisk, State: state, DesiredState: state,
			AutoStopInterval: defaultAutoStop, AutoArchiveInterval: defaultAutoArchive, AutoDeleteInterval: defaultAutoDelete,
			Volumes: []any{}, CreatedAt: info.CreatedAt, UpdatedAt: now, SandboxClass: "container", DaemonVersion: "emulator",
		},
	}
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		for _, y := range strings.Split(x, ",") {
			if y == s {
				return true
			}
		}
	}
	return false
}
