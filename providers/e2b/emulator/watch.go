package emulator

import (
	"context"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/sandbox/providers/e2b/wire"
	"github.com/agentbox/sandbox/providers/emulator/httpguard"
)

// Directory watching. envd watches with inotify; the backends have no
// such call, so the emulator lists the directory (recursively when asked)
// every watchInterval and reports the differences: a new path is CREATE
// (followed by WRITE for a file with contents), a path gone is REMOVE, a
// file whose size or modification time changed is WRITE, a path whose
// permissions changed is CHMOD. Renames show as a REMOVE and a CREATE.
const (
	watchInterval = 150 * time.Millisecond
	// settleWait bounds how long a file operation of the API waits for
	// the watches to report it.
	settleWait = 2 * time.Second
	// watchDepth bounds a recursive watch.
	watchDepth = 32
	// maxWatcherEvents bounds the events a polling watcher keeps between
	// two GetWatcherEvents calls.
	maxWatcherEvents = 10000
)

// pathState is what the watcher compares of one path.
type pathState struct {
	size  int64
	mod   time.Time
	mode  fs.FileMode
	entry wire.EntryInfo
}

// watcher is one watch: a WatchDir stream or a polling watcher.
type watcher struct {
	root      string
	recursive bool
	include   bool
	cancel    context.CancelFunc

	// poke asks the watch for a look at once; it closes the channel
	// it got once the differences are out.
	poke chan chan struct{}

	// mu guards events and err (polling watchers).
	mu     sync.Mutex
	events []wire.FilesystemEvent
	err    error
}

// covers says whether a change of p is one the watch reports.
func (w *watcher) covers(p string) bool {
	if w.recursive {
		return p == w.root || strings.HasPrefix(p, strings.TrimSuffix(w.root, "/")+"/")
	}
	return p == w.root || path.Dir(p) == w.root
}

// settleWatches makes the watches of sb that cover one of paths look at
// once, and waits (a while at most) until they reported what they saw.
// The file operations of the API call it when they are done: polling
// alone would miss what a file went through between two looks (a write
// then a remove), which envd, watching with inotify, reports.
func (sb *sandbox) settleWatches(ctx context.Context, paths ...string) {
	sb.watchMu.Lock()
	var ws []*watcher
	for w := range sb.running {
		if slices.ContainsFunc(paths, w.covers) {
			ws = append(ws, w)
		}
	}
	sb.watchMu.Unlock()
	for _, w := range ws {
		done := make(chan struct{})
		t := time.NewTimer(settleWait)
		select {
		case w.poke <- done:
			select {
			case <-done:
			case <-t.C:
			case <-ctx.Done():
			}
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// startWatch checks that req's path is a directory, takes the first
// snapshot and starts polling; each batch of events goes to emit until
// ctx ends or polling fails (the error goes to emit's caller through
// fail).
func (s *Server) startWatch(ctx context.Context, sb *sandbox, who identity, req wire.WatchRequest, emit func([]wire.FilesystemEvent), fail func(error)) (*watcher, error) {
	root, err := who.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := s.backend.Stat(ctx, sb.backendID, root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, newRPCError(wire.CodeInvalidArgument, "path "+root+" is not a directory")
	}
	w := &watcher{root: root, recursive: req.Recursive, include: req.IncludeEntry, poke: make(chan chan struct{})}
	prev, err := s.snapshot(ctx, sb, w)
	if err != nil {
		return nil, err
	}
	ctx, w.cancel = context.WithCancel(ctx)
	sb.watchMu.Lock()
	if sb.running == nil {
		sb.running = map[*watcher]bool{}
	}
	sb.running[w] = true
	sb.watchMu.Unlock()
	go func() {
		defer func() {
			sb.watchMu.Lock()
			delete(sb.running, w)
			sb.watchMu.Unlock()
		}()
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			var done chan struct{}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case done = <-w.poke:
			}
			next, err := s.snapshot(ctx, sb, w)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				fail(err)
				return
			}
			if evs := diffStates(prev, next, w.include); len(evs) > 0 {
				emit(evs)
			}
			prev = next
			if done != nil {
				close(done)
			}
		}
	}()
	return w, nil
}

// snapshot lists the watched tree by path relative to its root.
func (s *Server) snapshot(ctx context.Context, sb *sandbox, w *watcher) (map[string]pathState, error) {
	depth := 1
	if w.recursive {
		depth = watchDepth
	}
	list, err := s.backend.ListDir(ctx, sb.backendID, w.root, depth)
	if err != nil {
		return nil, err
	}
	out := make(map[string]pathState, len(list))
	for _, fi := range list {
		rel := strings.TrimPrefix(strings.TrimPrefix(fi.Path, w.root), "/")
		if rel == "" {
			continue
		}
		out[rel] = pathState{size: fi.Size, mod: fi.ModTime, mode: fi.Mode, entry: entryOf(fi)}
	}
	return out, nil
}

// diffStates lists the events that turn prev into next, in path order.
func diffStates(prev, next map[string]pathState, include bool) []wire.FilesystemEvent {
	var evs []wire.FilesystemEvent
	add := func(name string, t wire.EventType, st *pathState) {
		ev := wire.FilesystemEvent{Name: name, Type: t}
		if include && st != nil {
			e := st.entry
			ev.Entry = &e
		}
		evs = append(evs, ev)
	}
	for _, name := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := next[name]; !ok {
			add(name, wire.EventRemove, nil)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(next)) {
		st := next[name]
		old, ok := prev[name]
		switch {
		case !ok:
			add(name, wire.EventCreate, &st)
			if !st.mode.IsDir() && st.size > 0 {
				add(name, wire.EventWrite, &st)
			}
		case old.mode.Type() != st.mode.Type():
			add(name, wire.EventRemove, nil)
			add(name, wire.EventCreate, &st)
		case !st.mode.IsDir() && (old.size != st.size || !old.mod.Equal(st.mod)):
			add(name, wire.EventWrite, &st)
		case old.mode.Perm() != st.mode.Perm():
			add(name, wire.EventChmod, &st)
		}
	}
	return evs
}

// handleWatchDir serves the WatchDir stream: a start message once the
// first snapshot is taken, then the events, with keepalives when the
// client asks for them.
func (s *Server) handleWatchDir(w http.ResponseWriter, r *http.Request, sb *sandbox, who identity) {
	httpguard.AllowIdleBody(r)
	var req wire.WatchRequest
	if rerr := readStreamRequest(r, &req); rerr != nil {
		writeStreamError(w, rerr)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	batches := make(chan []wire.FilesystemEvent, 16)
	failed := make(chan error, 1)
	wt, err := s.startWatch(ctx, sb, who, req, func(evs []wire.FilesystemEvent) {
		select {
		case batches <- evs:
		case <-ctx.Done():
		}
	}, func(err error) { failed <- err })
	if err != nil {
		writeStreamError(w, rpcErrorOf(err))
		return
	}
	defer wt.cancel()
	w.Header().Set("Content-Type", wire.ContentTypeStream)
	w.WriteHeader(http.StatusOK)
	send := func(ev wire.WatchEvent) bool {
		if err := wire.WriteMessage(w, ev); err != nil {
			return false
		}
		return http.NewResponseController(w).Flush() == nil
	}
	if !send(wire.WatchEvent{Start: &struct{}{}}) {
		return
	}
	tick, stopTick := keepalives(r)
	defer stopTick()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sb.killed:
			panic(http.ErrAbortHandler)
		case err := <-failed:
			writeEnd(w, rpcErrorOf(err))
			return
		case <-tick:
			if !send(wire.WatchEvent{Keepalive: &struct{}{}}) {
				return
			}
		case evs := <-batches:
			for i := range evs {
				if !send(wire.WatchEvent{Filesystem: &evs[i]}) {
					return
				}
			}
		}
	}
}

// rpcErrorOf is err as a Connect error: an *rpcError as it is, another
// error mapped by its kind.
func rpcErrorOf(err error) *rpcError {
	if e, ok := err.(*rpcError); ok {
		return e
	}
	return errorFrom(err)
}

// createWatcher starts a polling watcher, which keeps its events until
// GetWatcherEvents takes them; it lives as long as the sandbox in the
// emulator, or until RemoveWatcher.
func (s *Server) createWatcher(ctx context.Context, sb *sandbox, who identity, req wire.WatchRequest) (any, error) {
	id := randomString(16)
	var wt *watcher
	var ready sync.WaitGroup
	ready.Add(1)
	wt, err := s.startWatch(s.ctx, sb, who, req, func(evs []wire.FilesystemEvent) {
		ready.Wait()
		wt.mu.Lock()
		defer wt.mu.Unlock()
		if len(wt.events)+len(evs) <= maxWatcherEvents {
			wt.events = append(wt.events, evs...)
		}
	}, func(err error) {
		ready.Wait()
		wt.mu.Lock()
		wt.err = err
		wt.mu.Unlock()
	})
	ready.Done()
	if err != nil {
		return nil, err
	}
	sb.watchMu.Lock()
	if sb.watchers == nil {
		sb.watchers = map[string]*watcher{}
	}
	sb.watchers[id] = wt
	sb.watchMu.Unlock()
	return wire.CreateWatcherResponse{WatcherID: id}, nil
}

// watcher finds a polling watcher.
func (sb *sandbox) watcher(id string) (*watcher, error) {
	sb.watchMu.Lock()
	defer sb.watchMu.Unlock()
	if wt, ok := sb.watchers[id]; ok {
		return wt, nil
	}
	return nil, newRPCError(wire.CodeNotFound, "watcher with id "+id+" not found")
}

// watcherEvents hands over the events a polling watcher collected.
func (sb *sandbox) watcherEvents(id string) (any, error) {
	wt, err := sb.watcher(id)
	if err != nil {
		return nil, err
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.err != nil {
		return nil, wt.err
	}
	evs := wt.events
	wt.events = nil
	if evs == nil {
		evs = []wire.FilesystemEvent{}
	}
	return wire.GetWatcherEventsResponse{Events: evs}, nil
}

// removeWatcher stops a polling watcher.
func (sb *sandbox) removeWatcher(id string) error {
	wt, err := sb.watcher(id)
	if err != nil {
		return err
	}
	sb.watchMu.Lock()
	delete(sb.watchers, id)
	sb.watchMu.Unlock()
	wt.cancel()
	return nil
}

// stopWatchers ends the polling watchers of a killed sandbox.
func (sb *sandbox) stopWatchers() {
	sb.watchMu.Lock()
	defer sb.watchMu.Unlock()
	for id, wt := range sb.watchers {
		wt.cancel()
		delete(sb.watchers, id)
	}
}
