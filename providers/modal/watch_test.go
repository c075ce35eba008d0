//go:build linux

package modal_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// TestFilesystemWatch drives the official Go SDK's Filesystem.Watch
// against the emulator: each case prepares a directory, changes it over
// and over in the background while a three-second watch runs, and checks
// the events.
func TestFilesystemWatch(t *testing.T) {
	h := newHarness(t)
	c := h.sdkClient(t)
	// The cases run in parallel, after this function returns: what they
	// share ends in cleanups.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	app, err := c.Apps.FromName(ctx, "watch", &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatalf("Apps.FromName: %v", err)
	}
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry("alpine:3.21", nil), nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _, _ = sb.Terminate(context.WithoutCancel(ctx), nil) })
	sh := func(t *testing.T, script string) {
		t.Helper()
		p, err := sb.Exec(ctx, []string{"sh", "-c", script}, nil)
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		_, _ = io.ReadAll(p.Stdout)
		if code, err := p.Wait(ctx, nil); err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v", script, code, err)
		}
	}
	watchFor := 3 * time.Second
	for _, tc := range []struct {
		name      string
		setup     string // run before the watch starts; $D is the directory
		change    string // run every 0.1 s while the watch runs
		path      string // watched, relative to $D ("" is $D)
		recursive bool
		filter    []modalsdk.FileWatchEventType
		// want are events that must be seen, as "Type:base names"
		// (sorted); nil wants no event at all.
		want []string
	}{
		{name: "create", change: "rm -f $D/new.txt; sleep 0.1; touch $D/new.txt", want: []string{"Create:new.txt"}},
		{name: "modify", setup: "echo v0 > $D/f.txt", change: "date +%N > $D/f.txt", want: []string{"Modify:f.txt"}},
		{name: "remove", change: "touch $D/f.txt; sleep 0.15; rm $D/f.txt", want: []string{"Remove:f.txt"}},
		{name: "rename is a modify of both", setup: "touch $D/before.txt",
			change: "if [ -f $D/before.txt ]; then mv $D/before.txt $D/after.txt; else mv $D/after.txt $D/before.txt; fi",
			want:   []string{"Modify:after.txt,before.txt"}},
		{name: "a watched file", setup: "echo v0 > $D/f.txt", path: "f.txt", change: "date +%N > $D/f.txt", want: []string{"Modify:f.txt"}},
		{name: "not recursive", setup: "mkdir $D/sub", change: "touch $D/sub/deep-$RANDOM.txt"},
		{name: "recursive", setup: "mkdir $D/sub", recursive: true, change: "rm -f $D/sub/deep.txt; sleep 0.1; touch $D/sub/deep.txt", want: []string{"Create:deep.txt"}},
		{name: "filter drops other types", filter: []modalsdk.FileWatchEventType{modalsdk.FileWatchEventTypeRemove}, change: "touch $D/new-$RANDOM.txt"},
		{name: "empty filter drops all", filter: []modalsdk.FileWatchEventType{}, change: "touch $D/new-$RANDOM.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := "/tmp/watch-" + strings.ReplaceAll(tc.name, " ", "-")
			sh(t, "mkdir -p "+dir+"; D="+dir+"; "+tc.setup)
			// The changes go on until the watch has ended (a stop file
			// beside the directory, or a minute at most): a loaded host
			// may take seconds to start the watch, and a loop of fixed
			// length was over before it began.
			stop := dir + ".stop"
			loop := "D=" + dir + "; end=$(($(date +%s)+60)); while [ ! -e " + stop + " ] && [ $(date +%s) -lt $end ]; do " + tc.change + "; sleep 0.1; done"
			bg, err := sb.Exec(ctx, []string{"sh", "-c", loop}, nil)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			seq, err := sb.Filesystem.Watch(ctx, strings.TrimSuffix(dir+"/"+tc.path, "/"),
				&modalsdk.SandboxFilesystemWatchParams{Recursive: tc.recursive, Filter: tc.filter, Timeout: &watchFor})
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			var got []string
			for ev, err := range seq {
				if err != nil {
					t.Fatalf("Watch: %v", err)
				}
				var names []string
				for _, p := range ev.Paths {
					names = append(names, p[strings.LastIndexByte(p, '/')+1:])
				}
				slices.Sort(names)
				got = append(got, string(ev.EventType)+":"+strings.Join(names, ","))
			}
			sh(t, "touch "+stop)
			_, _ = bg.Wait(ctx, nil)
			if tc.want == nil && len(got) > 0 {
				t.Errorf("events = %q, want none", got)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("events = %q, want %q among them", got, w)
				}
			}
		})
	}

	t.Run("missing path", func(t *testing.T) {
		t.Parallel()
		seq, err := sb.Filesystem.Watch(ctx, "/tmp/no-such-watch", nil)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		var nf modalsdk.SandboxFilesystemNotFoundError
		for _, err := range seq {
			if !errors.As(err, &nf) {
				t.Errorf("Watch(missing) yielded %v, want SandboxFilesystemNotFoundError", err)
			}
		}
	})
	t.Run("zero timeout and break return at once", func(t *testing.T) {
		t.Parallel()
		zero := time.Duration(0)
		start := time.Now()
		seq, err := sb.Filesystem.Watch(ctx, "/tmp", &modalsdk.SandboxFilesystemWatchParams{Timeout: &zero})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		for ev, err := range seq {
			t.Errorf("zero-timeout Watch yielded %v, %v", ev, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a zero-timeout Watch took %v", d)
		}
		sh(t, "mkdir -p /tmp/watch-break; (for i in $(seq 100); do touch /tmp/watch-break/f$i; sleep 0.1; done) >/dev/null 2>&1 &")
		long := time.Minute
		seq, err = sb.Filesystem.Watch(ctx, "/tmp/watch-break", &modalsdk.SandboxFilesystemWatchParams{Timeout: &long})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		var first time.Time
		for range seq {
			first = time.Now()
			break
		}
		if first.IsZero() {
			t.Fatalf("Watch saw no event in %v", long)
		}
		if d := time.Since(first); d > 5*time.Second {
			t.Errorf("leaving a Watch took %v", d)
		}
	})
}
