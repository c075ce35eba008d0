package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
	"github.com/agentbox/sandbox/setup"
)

type fixture struct {
	fake   *fake.Provider
	engine *Engine
	events []Event
	now    time.Time
}

func newFixture(t *testing.T, caps func(*providers.Capabilities)) *fixture {
	t.Helper()
	fx := &fixture{fake: fake.New(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fx.fake.SetClock(func() time.Time { return fx.now })
	reg := fake.Registration()
	if caps != nil {
		caps(&reg.Capabilities)
	}
	reg.New = func(providers.Config) (providers.Provider, error) { return fx.fake, nil }
	fx.engine = New(Options{
		Registry:        providers.NewRegistry(reg),
		StateDir:        t.TempDir(),
		DefaultProvider: "fake",
		Events:          func(ev Event) { fx.events = append(fx.events, ev) },
		Now:             func() time.Time { return fx.now },
	})
	return fx
}

func (fx *fixture) sandboxes(t *testing.T) []string {
	t.Helper()
	infos, err := fx.fake.List(context.Background(), providers.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	return ids
}

func (fx *fixture) actions() []string {
	var out []string
	for _, ev := range fx.events {
		if ev.Type == "lifecycle" || ev.Type == "setup" {
			out = append(out, ev.Type+":"+ev.Action)
		}
	}
	return out
}

func TestOpenCreateAndClose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		keep        bool
		wantLeft    int
		wantActions []string
	}{
		{"deleted on close", false, 0, []string{"lifecycle:created", "lifecycle:deleted"}},
		{"kept with --keep", true, 1, []string{"lifecycle:created", "lifecycle:kept"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, nil)
			ctx := context.Background()
			s, err := fx.engine.Open(ctx, OpenOptions{Keep: tt.keep, Spec: providers.Spec{Labels: map[string]string{"a": "b"}}})
			if err != nil {
				t.Fatal(err)
			}
			if !s.Created() || s.Info().Labels["a"] != "b" || s.Info().Labels[RunLabel] == "" {
				t.Fatalf("info = %+v", s.Info())
			}
			if rec, ok, _ := fx.engine.Store().Get(s.ID()); !ok || rec.Provider != "fake" {
				t.Fatalf("not recorded: %+v %v", rec, ok)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(fx.sandboxes(t)); got != tt.wantLeft {
				t.Fatalf("%d sandboxes left, want %d", got, tt.wantLeft)
			}
			_, recorded, _ := fx.engine.Store().Get(s.ID())
			if recorded != tt.keep {
				t.Fatalf("recorded = %v after close, want %v", recorded, tt.keep)
			}
			if !slices.Equal(fx.actions(), tt.wantActions) {
				t.Fatalf("events = %v, want %v", fx.actions(), tt.wantActions)
			}
			if tt.keep && !strings.Contains(s.ReattachCommand(), "--sandbox fake --sandbox-id "+s.ID()) {
				t.Fatalf("reattach = %q", s.ReattachCommand())
			}
		})
	}
}

func TestOpenReuse(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	ctx := context.Background()
	first, err := fx.engine.Open(ctx, OpenOptions{Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	first.Close(ctx)
	// The provider is found from the registry, and a reused sandbox is kept.
	fx.engine.opts.DefaultProvider = "nonexistent"
	s, err := fx.engine.Open(ctx, OpenOptions{ID: first.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if s.Created() || s.ID() != first.ID() {
		t.Fatalf("reuse: created=%v id=%s", s.Created(), s.ID())
	}
	s.Close(ctx)
	if ids := fx.sandboxes(t); len(ids) != 1 {
		t.Fatalf("reused sandbox deleted: %v", ids)
	}
	_, err = fx.engine.Open(ctx, OpenOptions{Provider: "fake", ID: "sb-missing"})
	var nf *NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "sandbox sb-missing not found") {
		t.Fatalf("missing id: %v", err)
	}
}

func TestOpenLabelFindOrCreate(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	ctx := context.Background()
	label := map[string]string{"conv": "7"}
	a, err := fx.engine.Open(ctx, OpenOptions{Label: label})
	if err != nil {
		t.Fatal(err)
	}
	a.Close(ctx)
	b, err := fx.engine.Open(ctx, OpenOptions{Label: label})
	if err != nil {
		t.Fatal(err)
	}
	b.Close(ctx)
	if a.ID() != b.ID() || !a.Created() || b.Created() {
		t.Fatalf("a=%s (created %v) b=%s (created %v)", a.ID(), a.Created(), b.ID(), b.Created())
	}
	if ids := fx.sandboxes(t); len(ids) != 1 {
		t.Fatalf("sandboxes = %v", ids)
	}
}

func TestOpenFailuresLeaveNothing(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "setup.sh")
	os.WriteFile(script, []byte("exit 3\n"), 0o644)
	sc, err := setup.Load(script)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		prep   func(fx *fixture)
		opts   OpenOptions
		check  func(error) bool
		create bool
	}{
		{
			name: "create fails",
			prep: func(fx *fixture) {
				fx.fake.FailNext("Create", providers.Errorf(providers.ErrQuota, "fake", "create", "too many"))
			},
			check: func(err error) bool {
				var ce *CreateError
				return errors.As(err, &ce) && errors.Is(err, providers.ErrQuota)
			},
		},
		{
			name: "credentials rejected",
			prep: func(fx *fixture) {
				fx.fake.FailNext("Create", &providers.CredentialError{Provider: "fake", Var: "FAKE_KEY", Rejected: true})
			},
			check: func(err error) bool {
				return errors.Is(err, providers.ErrAuth) && strings.Contains(err.Error(), "FAKE_KEY")
			},
		},
		{
			name:   "setup fails",
			opts:   OpenOptions{Setup: sc},
			check:  func(err error) bool { var se *SetupError; return errors.As(err, &se) },
			create: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, nil)
			if tt.prep != nil {
				tt.prep(fx)
			}
			_, err := fx.engine.Open(context.Background(), tt.opts)
			if !tt.check(err) {
				t.Fatalf("unexpected error: %v", err)
			}
			if ids := fx.sandboxes(t); len(ids) != 0 {
				t.Fatalf("leaked %v", ids)
			}
			if recs, _ := fx.engine.Store().All(); len(recs) != 0 {
				t.Fatalf("registry leaked %v", recs)
			}
			if tt.create && !slices.Contains(fx.actions(), "lifecycle:deleted") {
				t.Fatalf("events = %v", fx.actions())
			}
		})
	}
}

func TestSetupIsAuditedAsSetup(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	script := filepath.Join(t.TempDir(), "s.sh")
	os.WriteFile(script, []byte("echo hi\n"), 0o644)
	sc, _ := setup.Load(script)
	// Non-interactive run with the default policy: a setup named on the
	// command line must still run (and fails here only because the fake
	// has no shell), never be denied.
	_, err := fx.engine.Open(context.Background(), OpenOptions{Setup: sc})
	if approval.IsDenied(err) {
		t.Fatalf("setup was denied: %v", err)
	}
	var sawSetup bool
	for _, ev := range fx.events {
		if ev.Gate != nil && ev.Gate.Request.Source == approval.SourceSetup && ev.Gate.Decision.Allow {
			sawSetup = true
		}
	}
	if !sawSetup {
		t.Fatal("no allowed setup-source decision recorded")
	}
}

func TestCheckCapabilities(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, func(c *providers.Capabilities) { *c = providers.Capabilities{} })
	_, err := fx.engine.Open(context.Background(), OpenOptions{Spec: providers.Spec{Network: providers.NetworkOn}, Label: map[string]string{"a": "b"}})
	if !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), "--network, --sandbox-label") {
		t.Fatalf("err = %v", err)
	}
	if calls := fx.fake.Calls(); len(calls) != 0 {
		t.Fatalf("provider reached before refusing flags: %v", calls)
	}
}

func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	ctx := context.Background()
	short, _ := fx.engine.Open(ctx, OpenOptions{Keep: true, Spec: providers.Spec{TTL: time.Minute}})
	short.Close(ctx)
	long, _ := fx.engine.Open(ctx, OpenOptions{Keep: true, Spec: providers.Spec{TTL: time.Hour}})
	long.Close(ctx)
	forever, _ := fx.engine.Open(ctx, OpenOptions{Keep: true})
	forever.Close(ctx)
	fx.now = fx.now.Add(2 * time.Minute)
	deleted, err := fx.engine.DeleteExpired(ctx)
	if err != nil || !slices.Equal(deleted, []string{short.ID()}) {
		t.Fatalf("deleted %v, %v; want [%s]", deleted, err, short.ID())
	}
	ids := fx.sandboxes(t)
	slices.Sort(ids)
	want := []string{long.ID(), forever.ID()}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("left %v, want %v", ids, want)
	}
}

// TestExpiredRefusedAndDeleted: a sandbox past its --ttl is deleted by the
// next run, which refuses to reuse it with a clear error; one not yet
// expired is reused.
func TestExpiredRefusedAndDeleted(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	ctx := context.Background()
	short, _ := fx.engine.Open(ctx, OpenOptions{Keep: true, Spec: providers.Spec{TTL: time.Second}})
	short.Close(ctx)
	long, _ := fx.engine.Open(ctx, OpenOptions{Keep: true, Spec: providers.Spec{TTL: time.Hour}})
	long.Close(ctx)
	fx.now = fx.now.Add(time.Minute)
	s, err := fx.engine.Open(ctx, OpenOptions{ID: long.ID()})
	if err != nil {
		t.Fatalf("reusing a sandbox within its TTL: %v", err)
	}
	s.Close(ctx)
	// The run above deleted the expired one already.
	if ids := fx.sandboxes(t); !slices.Equal(ids, []string{long.ID()}) {
		t.Fatalf("left %v, want only %s", ids, long.ID())
	}
	_, err = fx.engine.Open(ctx, OpenOptions{ID: short.ID()})
	if !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("reusing a deleted expired sandbox: %v", err)
	}
	// One that expires between two runs: the run that finds it says so.
	short2, _ := fx.engine.Open(ctx, OpenOptions{Keep: true, Spec: providers.Spec{TTL: time.Second}})
	short2.Close(ctx)
	fx.now = fx.now.Add(time.Minute)
	_, err = fx.engine.Open(ctx, OpenOptions{ID: short2.ID()})
	var ee *ExpiredError
	if !errors.As(err, &ee) || !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("reusing an expired sandbox: %v", err)
	}
	if ids := fx.sandboxes(t); !slices.Equal(ids, []string{long.ID()}) {
		t.Fatalf("left %v, want only %s", ids, long.ID())
	}
}

func TestSessionWriteRefusesOverwrite(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, nil)
	ctx := context.Background()
	s, err := fx.engine.Open(ctx, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Write(ctx, "a.txt", strings.NewReader("one\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "a.txt", strings.NewReader("two\n"), false); !errors.Is(err, providers.ErrExists) {
		t.Fatalf("overwrite without force: %v", err)
	}
	var diff string
	fx.engine.opts.Events = func(ev Event) {
		if ev.Gate != nil && ev.Gate.Request.Kind == approval.KindWrite {
			diff = ev.Gate.Request.Details.Diff
		}
	}
	if err := s.Write(ctx, "a.txt", strings.NewReader("two\n"), true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff, "-one") || !strings.Contains(diff, "+two") {
		t.Fatalf("diff for approval = %q", diff)
	}
	var b strings.Builder
	if err := s.Read(ctx, "/workspace/a.txt", &b); err != nil || b.String() != "two\n" {
		t.Fatalf("read = %q, %v", b.String(), err)
	}
	if err := s.Read(ctx, "../x", &b); !errors.Is(err, providers.ErrInvalid) {
		t.Fatalf(".. path: %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := WithCallTimeout(context.Background(), time.Millisecond, "--timeout 1ms")
	defer cancel()
	<-ctx.Done()
	err := CallError(ctx, fmt.Errorf("read: %w", ctx.Err()))
	if !errors.Is(err, providers.ErrTimeout) || !strings.Contains(err.Error(), "--timeout 1ms elapsed") {
		t.Fatalf("CallError = %v", err)
	}
	other := errors.New("boom")
	if CallError(ctx, other) != other {
		t.Fatal("unrelated errors must pass unchanged")
	}
	free, cancel2 := WithCallTimeout(context.Background(), 0, "none")
	defer cancel2()
	if _, ok := free.Deadline(); ok {
		t.Fatal("zero duration must not set a deadline")
	}
}

// directFake is the fake provider with a direct file copy
// (providers.FileDownloader) that counts its calls and, when cut is set,
// fails half-way through a file.
type directFake struct {
	*fake.Provider
	calls int
	cut   bool
}

func (d *directFake) DownloadFile(ctx context.Context, id, src string, dst *os.File) error {
	d.calls++
	rc, err := d.ReadFile(ctx, id, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if d.cut {
		_, _ = dst.Write(data[:len(data)/2])
		return errors.New("cut")
	}
	_, err = dst.Write(data)
	return err
}

func (d *directFake) UploadFile(ctx context.Context, id, dst string, src *os.File, perm fs.FileMode, mtime time.Time) error {
	d.calls++
	data, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	if d.cut {
		return errors.New("cut")
	}
	return d.WriteFile(ctx, id, dst, bytes.NewReader(data), perm)
}

// directSession opens a session on the fake provider with direct copies;
// it is closed when t ends.
func directSession(t *testing.T) (*Session, *directFake) {
	t.Helper()
	fx := newFixture(t, nil)
	d := &directFake{Provider: fx.fake}
	reg := fake.Registration()
	reg.New = func(providers.Config) (providers.Provider, error) { return d, nil }
	fx.engine = New(Options{Registry: providers.NewRegistry(reg), StateDir: t.TempDir(), DefaultProvider: "fake"})
	s, err := fx.engine.Open(context.Background(), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, d
}

// TestUploadFileDirect: a provider that copies a host file into a sandbox
// directly gets the upload of a single regular file, to the same target
// as the tar stream's (a name given, or into a directory), under the same
// no-overwrite rule and with progress; a directory still goes through the
// tar stream.
func TestUploadFileDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := directSession(t)
	host := t.TempDir()
	body := strings.Repeat("upload\n", 1000)
	local := filepath.Join(host, "u.txt")
	if err := os.WriteFile(local, []byte(body), 0o640); err != nil {
		t.Fatal(err)
	}
	var done int64
	if err := s.Upload(ctx, local, "/workspace/in/named.txt", TransferOptions{Progress: func(n, _ int64) { done = n }}); err != nil {
		t.Fatal(err)
	}
	if err := s.gate.Mkdir(ctx, s.info.ID, "/workspace/dir"); err != nil {
		t.Fatal(err)
	}
	if err := s.Upload(ctx, local, "/workspace/dir", TransferOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/workspace/in/named.txt", "/workspace/dir/u.txt"} {
		var b strings.Builder
		if err := s.Read(ctx, p, &b); err != nil || b.String() != body {
			t.Errorf("%s after the upload: %d bytes, %v", p, b.Len(), err)
		}
	}
	if d.calls != 2 || done != int64(len(body)) {
		t.Errorf("direct copies %d, progress %d; want 2, %d", d.calls, done, len(body))
	}
	if err := s.Upload(ctx, local, "/workspace/in/named.txt", TransferOptions{}); !errors.Is(err, providers.ErrExists) {
		t.Errorf("a second upload without Force: %v, want ErrExists", err)
	}
	d.cut = true
	if err := s.Upload(ctx, local, "/workspace/in/cut.txt", TransferOptions{}); err == nil {
		t.Error("a copy that failed succeeded")
	}
	d.cut = false
	calls := d.calls
	if err := s.Upload(ctx, host, "/workspace/tree", TransferOptions{}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.Read(ctx, "/workspace/tree/u.txt", &b); err != nil || b.String() != body || d.calls != calls {
		t.Errorf("a directory's upload: %d bytes, %v, direct copies %d (want the tar stream)", b.Len(), err, d.calls-calls)
	}
}

// TestDownloadFileDirect: a provider that copies a file into a host file
// directly gets the download of a single regular file, which lands whole,
// with the remote file's mode, under the rules of the tar path (no
// overwrite without Force, nothing left after a failure); a directory
// still goes through the tar stream.
func TestDownloadFileDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := directSession(t)
	body := strings.Repeat("direct\n", 1000)
	if err := s.Write(ctx, "d/a.txt", strings.NewReader(body), false); err != nil {
		t.Fatal(err)
	}
	fi, err := s.gate.Stat(ctx, s.info.ID, "/workspace/d/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	host := t.TempDir()
	local := filepath.Join(host, "a.txt")
	var done, total int64
	if err := s.Download(ctx, "/workspace/d/a.txt", local, TransferOptions{Progress: func(n, t int64) { done, total = n, t }}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(local)
	if err != nil || string(got) != body {
		t.Fatalf("downloaded %d bytes, %v; want %d", len(got), err, len(body))
	}
	if st, _ := os.Stat(local); st.Mode().Perm() != fi.Mode.Perm() {
		t.Errorf("mode %v, want the remote file's %v", st.Mode().Perm(), fi.Mode.Perm())
	}
	if d.calls != 1 || done != int64(len(body)) || total != int64(len(body)) {
		t.Errorf("direct copies %d, progress %d of %d; want 1, %d of %d", d.calls, done, total, len(body), len(body))
	}
	if err := s.Download(ctx, "/workspace/d/a.txt", local, TransferOptions{}); !errors.Is(err, providers.ErrExists) {
		t.Errorf("a second download without Force: %v, want ErrExists", err)
	}
	if err := s.Download(ctx, "/workspace/d/a.txt", local, TransferOptions{Force: true}); err != nil {
		t.Errorf("a second download with Force: %v", err)
	}
	d.cut = true
	cut := filepath.Join(host, "cut.txt")
	if err := s.Download(ctx, "/workspace/d/a.txt", cut, TransferOptions{}); err == nil {
		t.Error("a download cut half-way succeeded")
	}
	entries, _ := os.ReadDir(host)
	if len(entries) != 1 || entries[0].Name() != "a.txt" {
		t.Errorf("after a cut download the directory holds %v, want only a.txt", entries)
	}
	d.cut = false
	calls := d.calls
	if err := s.Download(ctx, "/workspace/d", filepath.Join(host, "dir"), TransferOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(host, "dir", "a.txt")); err != nil || string(got) != body || d.calls != calls {
		t.Errorf("a directory's download: %d bytes, %v, direct copies %d (want the tar stream)", len(got), err, d.calls-calls)
	}
}

// TestHandOver checks the hand-over of a run to the program that has a
// provider built in: the program is asked for by name before anything is
// done, and when it cannot take the run, or the run has already used
// another provider, the error says what to run or install, and is an
// UnavailableError (exit 125).
func TestHandOver(t *testing.T) {
	elsewhere := providers.Registration{Name: "far", Program: "sandbox-far"}
	tests := []struct {
		name    string
		handoff func(string) error
		first   bool // use the fake provider first
		want    string
		asked   bool
	}{
		{name: "no hand-over", want: "the far provider is built into the program sandbox-far, not this one: run the same command with sandbox-far"},
		{name: "program missing", handoff: func(string) error { return errors.New("not found") }, asked: true,
			want: "which could not be started (not found): install sandbox-far beside this program or on PATH"},
		{name: "run begun", handoff: func(string) error { return nil }, first: true,
			want: "this run has used another provider already: run the same command with sandbox-far"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			opts := Options{
				Registry:        providers.NewRegistry(fake.Registration(), elsewhere),
				StateDir:        t.TempDir(),
				DefaultProvider: "fake",
			}
			if tt.handoff != nil {
				opts.Handoff = func(program string) error {
					asked = append(asked, program)
					return tt.handoff(program)
				}
			}
			e := New(opts)
			defer e.Close()
			if tt.first {
				if _, err := e.List(context.Background(), "fake", providers.Filter{}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.Open(context.Background(), OpenOptions{Provider: "far"})
			var ue *UnavailableError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want an UnavailableError saying %q", err, tt.want)
			}
			if herr := e.HandOver("far"); !errors.As(herr, &ue) {
				t.Errorf("HandOver: %v, want an UnavailableError", herr)
			}
			if got := len(asked) > 0; got != tt.asked || got && asked[0] != "sandbox-far" {
				t.Errorf("hand-over asked for %v", asked)
			}
			if err := e.HandOver("fake"); err != nil {
				t.Errorf("HandOver of a provider built in: %v, want nil", err)
			}
		})
	}
}

// specFake is the fake provider recording the specs it creates with.
type specFake struct {
	*fake.Provider
	specs []providers.Spec
}

func (s *specFake) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	s.specs = append(s.specs, spec)
	return s.Provider.Create(ctx, spec)
}

// TestOpenTransient: a sandbox made for this run alone (not kept, not
// labelled to be found again) is created Transient, so that the provider
// may keep it less durably; one that is to last is not.
func TestOpenTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    OpenOptions
		want bool
	}{
		{"one run", OpenOptions{}, true},
		{"kept with --keep", OpenOptions{Keep: true}, false},
		{"found again by label", OpenOptions{Label: map[string]string{"app": "x"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, nil)
			sf := &specFake{Provider: fx.fake}
			reg := fake.Registration()
			reg.New = func(providers.Config) (providers.Provider, error) { return sf, nil }
			e := New(Options{Registry: providers.NewRegistry(reg), StateDir: t.TempDir(), DefaultProvider: "fake"})
			s, err := e.Open(context.Background(), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			if len(sf.specs) != 1 || sf.specs[0].Transient != tt.want {
				t.Fatalf("created with %+v, want one create with Transient %v", sf.specs, tt.want)
			}
		})
	}
}

func TestNewRunID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 10000 {
		id := NewRunID()
		if len(id) != 12 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("run id %q: want 12 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("run id %q repeated", id)
		}
		seen[id] = true
	}
}
