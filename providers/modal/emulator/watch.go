package emulator

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// watchInterval is how often Watch looks at the watched paths.
const watchInterval = 100 * time.Millisecond

// watchDepth bounds how deep a recursive Watch looks.
const watchDepth = 64

// watchEntry is what Watch compares of a path between two looks.
type watchEntry struct {
	size  int64
	mode  uint32
	mtime time.Time
}

// watch serves the helper's Watch by polling: it lists the path (the
// entries of a directory, all levels down when recursive, or the file)
// every watchInterval and prints one JSON line per change, {"event_type",
// "paths"}: Create, Remove, Modify (a file's contents or mode changed) and a
// rename (one path gone and one come with the same size, mode and mtime)
// as Modify with both paths. It ends when the timeout passes or the
// client closes stdin. Unlike inotify it cannot tell a file moved in or
// out from one created or removed, and misses changes undone within one
// interval.
func (s *Server) watch(ctx context.Context, id string, req fsWatch, stdin io.Reader, stdout io.Writer) error {
	fi, err := s.backend.Stat(ctx, id, req.Path)
	if err != nil {
		return kindOf(err, "NotDirectory")
	}
	if req.TimeoutSecs != nil && *req.TimeoutSecs <= 0 {
		return nil
	}
	look := func() (map[string]watchEntry, error) {
		if !fi.IsDir() {
			st, err := s.backend.Stat(ctx, id, req.Path)
			if err != nil {
				return map[string]watchEntry{}, nil
			}
			return map[string]watchEntry{req.Path: entryKey(st)}, nil
		}
		depth := 1
		if req.Recursive {
			depth = watchDepth
		}
		infos, err := s.backend.ListDir(ctx, id, req.Path, depth)
		if err != nil {
			return nil, err
		}
		m := make(map[string]watchEntry, len(infos))
		for _, e := range infos {
			m[e.Path] = entryKey(e)
		}
		return m, nil
	}
	before, err := look()
	if err != nil {
		return kindOf(err, "NotDirectory")
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(closed)
	}()
	var deadline <-chan time.Time
	if req.TimeoutSecs != nil {
		timer := time.NewTimer(time.Duration(*req.TimeoutSecs) * time.Second)
		defer timer.Stop()
		deadline = timer.C
	}
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	enc := json.NewEncoder(stdout)
	emit := func(kind string, paths ...string) error {
		if req.Filter != nil && !slices.Contains(*req.Filter, kind) {
			return nil
		}
		return enc.Encode(map[string]any{"event_type": kind, "paths": paths})
	}
	for {
		select {
		case <-tick.C:
		case <-deadline:
			return nil
		case <-closed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		after, err := look()
		if err != nil {
			// The watched directory went away: nothing more to see.
			if isNotFound(err) {
				return nil
			}
			return kindOf(err, "NotDirectory")
		}
		for _, ev := range diffLooks(before, after) {
			if err := emit(ev.kind, ev.paths...); err != nil {
				return err
			}
		}
		before = after
	}
}

// entryKey is what counts as a change of fi: a directory changes with
// its entries, which inotify does not report on it, so only its mode
// counts.
func entryKey(fi providers.FileInfo) watchEntry {
	if fi.IsDir() {
		return watchEntry{mode: uint32(fi.Mode)}
	}
	return watchEntry{size: fi.Size, mode: uint32(fi.Mode), mtime: fi.ModTime}
}

// watchEvent is one change between two looks.
type watchEvent struct {
	kind  string
	paths []string
}

// diffLooks lists the changes from before to after, in path order.
func diffLooks(before, after map[string]watchEntry) []watchEvent {
	var gone, come []string
	var events []watchEvent
	for _, p := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[p]; !ok {
			gone = append(gone, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(after)) {
		old, ok := before[p]
		switch {
		case !ok:
			come = append(come, p)
		case old != after[p]:
			events = append(events, watchEvent{"Modify", []string{p}})
		}
	}
	// A path gone and one come alike is a rename.
	for _, g := range gone {
		if i := slices.IndexFunc(come, func(c string) bool { return before[g] == after[c] }); i >= 0 {
			events = append(events, watchEvent{"Modify", []string{g, come[i]}})
			come = slices.Delete(come, i, i+1)
			continue
		}
		events = append(events, watchEvent{"Remove", []string{g}})
	}
	for _, c := range come {
		events = append(events, watchEvent{"Create", []string{c}})
	}
	return events
}
