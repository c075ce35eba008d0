//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// Name is the registry name of the provider.
const Name = "local"

// capabilities is what the provider supports; TTL is left to the engine.
var capabilities = providers.Capabilities{Network: true, Labels: true, Stdin: true, Resources: true, EndsWithCaller: true}

// Registration describes the provider to the registry.
func Registration() providers.Registration { return RegistrationWith(nil) }

// RegistrationWith is Registration for a program that links more than its
// inits need (sandbox-cloud links the cloud providers' clients and Modal's
// SDK, whose size and package initialisers would cost every init and
// runner): the provider starts its inits, runners and reapers from the
// program exe names as it is made, another program of the release (the
// program sandbox, when its build matches this one's: see builds.Same);
// when exe is nil or names none, from this program.
func RegistrationWith(exe func() string) providers.Registration {
	return providers.Registration{
		Name:         Name,
		Description:  "sandboxes on this Linux machine: namespaces, overlayfs, Landlock, seccomp, limits; no daemon",
		Capabilities: capabilities,
		New: func(cfg providers.Config) (providers.Provider, error) {
			p, err := New(cfg)
			if err != nil {
				return nil, err
			}
			if exe != nil {
				if e := exe(); e != "" {
					p.exe = e
				}
			}
			return p, nil
		},
	}
}

// Compile-time checks of the interfaces the provider implements.
var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Grepper  = (*Provider)(nil)
	_ providers.Closer   = (*Provider)(nil)
	_ providers.Machine  = (*Provider)(nil)
)

// Provider runs sandboxes as machines whose files live under its state
// directory (see machine.go). It is safe for concurrent use.
type Provider struct {
	// dir holds one directory per sandbox.
	dir string
	// uid and gid are the invoking user's ids, mapped 1:1 into the sandbox.
	uid, gid int
	// home is the home directory inside the sandbox.
	home string
	// host is what the provider learns of the host to build machines,
	// found when first needed (see hostFacts).
	host func() *hostFacts
	// exe is the program started as the sandboxes' inits (and so their
	// runners) and as reapers: this one (/proc/self/exe) unless
	// RegistrationWith named another build of it; identity names its
	// standby machines (exeIdentity), which only a start by the same
	// build claims, found when first needed (exeID): an operation on a
	// running machine needs none. A running machine is reached by any
	// build of its protocol version (machineSockName).
	exe, identity string
	identityOnce  sync.Once
	// spread says that the file system spreads the directories made in
	// dir and in the work slots across its block groups (see
	// spreadChildren).
	spread bool
	// trashed says that an init may have put work directories in the
	// trash since the last reaper was started (see retireWork).
	trashed atomic.Bool
	// bg is work started beside the callers' (reapers, cgroups).
	bg background
	// cg is what this host lets the provider do with cgroups (an
	// operation's info needs it: its memory limit's default).
	cg cgroups
	// masks are host paths hidden in every sandbox (see hostMasks and
	// stateMasks), set by loadMasks when a machine first starts; mask
	// is the rest of that work (see maskState).
	masks []string
	mask  maskState
	// hostHome is the invoking user's HOME on the host, and stateDir the
	// tool's state directory (Config.StateDir), both hidden in every
	// sandbox wherever they lie.
	hostHome, stateDir string
	// weak runs commands without namespaces (see weak.go), by request.
	weak bool
	// notes are what TakeNote has to tell, by sandbox.
	notes notes
	// base is the layer laid over the host's /etc (see etcBase).
	base etcBase
	// diskReserve, when not zero, replaces the reserve of the state
	// directory's file system kept from the sandboxes (see reserve).
	diskReserve int64
	// standby says to keep a standby machine (see standby.go);
	// standbyTimer, once a start asked for the next one, starts it;
	// oldWatch is the watch a claimed standby handed over, for the next
	// one to close (see maskWatch.handTo).
	standby      bool
	standbyMu    sync.Mutex
	standbyTimer *time.Timer
	oldWatch     *os.File
}

// New returns a provider storing its sandboxes under cfg.StateDir/local.
func New(cfg providers.Config) (*Provider, error) {
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("local: no state directory configured: %w", providers.ErrInvalid)
	}
	dir, err := filepath.Abs(filepath.Join(cfg.StateDir, Name))
	if err != nil {
		return nil, fmt.Errorf("local: state directory: %w", err)
	}
	for _, d := range []string{rootMount, workPool, trashDir, skelDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("local: create state directory: %w", err)
		}
	}
	p := &Provider{dir: dir, uid: os.Getuid(), gid: os.Getgid(), exe: selfExe, weak: cfg.Lookup(weakEnvVar) == "1",
		standby: cfg.Lookup(standbyEnvVar) != "0"}
	p.spread = spreadChildren(dir)
	p.home = homeDir(p.uid)
	p.host = sync.OnceValue(func() *hostFacts { return findHostFacts(p.uid, p.gid) })
	p.cg = detectCgroups()
	p.hostHome = os.Getenv("HOME")
	p.stateDir = cfg.StateDir
	return p, nil
}

// exeID is identity, found once first needed (unless set before).
func (p *Provider) exeID() string {
	p.identityOnce.Do(func() {
		if p.identity == "" {
			p.identity = exeIdentity(p.exe)
		}
	})
	return p.identity
}

// hostFacts are what the provider learns of the host to build machines.
// An operation on a running machine needs none of it, so it is found when
// first needed: at every CLI call it was a fiftieth of a cold exec.
type hostFacts struct {
	// uids and gids are the sandbox's id mappings (see idMapping).
	uids, gids idMapping
	// layers are the host system directories overlaid read-only.
	layers []layer
	// links are host top-level symlinks reproduced in the new root
	// (merged-/usr systems: /bin -> usr/bin, ...).
	links []link
}

// findHostFacts learns them for the invoking user's ids.
func findHostFacts(uid, gid int) *hostFacts {
	h := &hostFacts{}
	h.uids, h.gids = hostIDMappings(uid, gid)
	h.layers, h.links = hostLayout("/")
	return h
}

// Close waits for the work started beside its callers (see background),
// then starts a reaper, unless one was started since, for the work
// directories this provider's machines put in the trash.
func (p *Provider) Close() error {
	p.standbyNow()
	p.bg.wg.Wait()
	if w := p.takeWatch(); w != nil {
		w.Close() // no standby took it
	}
	if p.trashed.Load() {
		p.startReaper(filepath.Join(p.dir, trashDir))
	}
	return nil
}

// homeDir is HOME inside the sandbox: /root for uid 0, else /home/<name>.
func homeDir(uid int) string {
	if uid == 0 {
		return "/root"
	}
	name := "user"
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && validUserName(u.Username) {
		name = u.Username
	}
	return "/home/" + name
}

// validUserName accepts names that are safe as one path element.
func validUserName(s string) bool {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// Capabilities reports network, labels and stdin support.
func (p *Provider) Capabilities() providers.Capabilities { return capabilities }

// meta is the metadata file of one sandbox.
type meta struct {
	ID        string              `json:"id"`
	CreatedAt time.Time           `json:"created_at"`
	Labels    map[string]string   `json:"labels,omitempty"`
	Env       map[string]string   `json:"env,omitempty"`
	Network   providers.Network   `json:"network"`
	Resources providers.Resources `json:"resources,omitempty"`
	// AutoStopNS stops the machine after this long without an
	// operation: zero is DefaultAutoStop, negative never.
	AutoStopNS int64 `json:"auto_stop_ns,omitempty"`
	// Weak records that the sandbox was used in the weak mode.
	Weak bool `json:"weak,omitempty"`
	// User is the default user of commands and file operations.
	User string `json:"user,omitempty"`
}

// autoStop is how long the machine stays without operations; zero means
// until it is stopped.
func (m meta) autoStop() time.Duration {
	switch {
	case m.AutoStopNS == 0:
		return DefaultAutoStop
	case m.AutoStopNS < 0:
		return 0
	}
	return time.Duration(m.AutoStopNS)
}

func (m meta) info() providers.Info {
	labels := maps.Clone(m.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return providers.Info{
		ID:        m.ID,
		Provider:  Name,
		State:     providers.StateRunning,
		Labels:    labels,
		CreatedAt: m.CreatedAt,
		Network:   m.Network,
		Isolation: m.isolation(),
	}
}

// isolation names the weak mode when the sandbox was created in it.
func (m meta) isolation() string {
	if m.Weak {
		return isolationWeak
	}
	return ""
}

// info describes a sandbox as this provider runs it, in the state its
// machine is in now: a sandbox used in the weak mode (which has no
// machine, and is always ready) is labelled so, whatever mode created it.
func (p *Provider) info(m meta, dir string) providers.Info {
	info := m.info()
	info.Resources = p.effectiveResources(m.Resources)
	info.AutoStop = m.autoStop()
	info.User = m.User
	if p.weak {
		info.Isolation = isolationWeak
	} else {
		info.State = machineState(dir)
	}
	return info
}

// Paths inside one sandbox directory.
const (
	metaFile = "meta.json"
	upperDir = "upper" // overlay upper layers: the root's and one per system directory
	// legacyWorkspace and legacyHome held /workspace and HOME, bound
	// from there, in sandboxes made before both moved into the root
	// layer (see workspacePath); a start moves them (adoptLegacyLayout).
	legacyWorkspace = "workspace"
	legacyHome      = "home"
)

// workspacePath is the host directory of the sandbox in dir's /workspace,
// and homePath that of its HOME: both are directories of its root layer,
// not mounts of their own, so that the sandbox's mount table names no host
// path (a bind mount's entry shows where its source lies on the host).
func workspacePath(dir string) string {
	return filepath.Join(dir, upperDir, rootLayerName, "workspace")
}

// homePath is the host directory of HOME in the sandbox in dir (see
// workspacePath).
func (p *Provider) homePath(dir string) string {
	return filepath.Join(dir, upperDir, rootLayerName, strings.TrimPrefix(p.home, "/"))
}

// adoptLegacyLayout moves the workspace and HOME of a sandbox made before
// they lived in its root layer into it. A failure leaves them where they
// are, and the sandbox starts with them empty, which the error says.
func (p *Provider) adoptLegacyLayout(dir string) error {
	for _, m := range [][2]string{{legacyWorkspace, workspacePath(dir)}, {legacyHome, p.homePath(dir)}} {
		old := filepath.Join(dir, m[0])
		if _, err := os.Lstat(old); err != nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(m[1]), 0o755); err != nil {
			return fmt.Errorf("move %s into the root layer: %w", m[0], err)
		}
		_ = os.Remove(m[1]) // an empty one made meanwhile
		if err := os.Rename(old, m[1]); err != nil {
			return fmt.Errorf("move %s into the root layer: %w", m[0], err)
		}
	}
	return nil
}

// sandboxDir returns the directory of id after checking the id's form.
func (p *Provider) sandboxDir(id string) (string, error) {
	if !validID(id) {
		return "", providers.Errorf(providers.ErrNotFound, Name, "sandbox "+strconv.Quote(id), "no such sandbox (local ids look like sb-xxxxxxxxxx)")
	}
	return filepath.Join(p.dir, id), nil
}

// load reads the metadata of id; a missing sandbox matches ErrNotFound.
func (p *Provider) load(id string) (meta, string, error) {
	dir, err := p.sandboxDir(id)
	if err != nil {
		return meta{}, "", err
	}
	b, err := readFile(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return meta{}, "", providers.Errorf(providers.ErrNotFound, Name, "sandbox "+id, "no such sandbox")
	}
	if err != nil {
		return meta{}, "", fmt.Errorf("local: sandbox %s: %w", id, err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, "", fmt.Errorf("local: sandbox %s: corrupt metadata: %w", id, err)
	}
	return m, dir, nil
}

// Create makes the sandbox's directories and writes its metadata last, so
// that a sandbox exists exactly when its metadata does.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Info, error) {
	if err := ctx.Err(); err != nil {
		return providers.Info{}, err
	}
	if spec.Image != "" {
		return providers.Info{}, providers.Errorf(providers.ErrUnsupported, Name, "create", "images are not supported (got %q): the sandbox is built from the host's system directories", spec.Image)
	}
	if !p.weak {
		if err := usernsOff(p.uid); err != nil {
			return providers.Info{}, &providers.Error{Kind: providers.ErrUnavailable, Provider: Name, Op: "create", Msg: err.Error()}
		}
	}
	if p.weak && p.uid == 0 {
		return providers.Info{}, providers.Errorf(providers.ErrUnavailable, Name, "create", "%s=1 (the weak mode) is only for unprivileged users: without a user namespace root would read every file of the host; enable user namespaces instead", weakEnvVar)
	}
	if err := p.cg.check(spec.Resources); err != nil {
		return providers.Info{}, err
	}
	if p.weak && spec.Resources.DiskMB > 0 {
		return providers.Info{}, providers.Errorf(providers.ErrUnsupported, Name, "create", "--disk needs the isolated mode: the weak mode (%s=1) has no machine to keep the quota", weakEnvVar)
	}
	if err := p.checkHostDisk(); err != nil {
		return providers.Info{}, err
	}
	if err := p.checkUser("create", spec.User); err != nil {
		return providers.Info{}, err
	}
	if err := p.checkOwnUser(spec.User); err != nil {
		return providers.Info{}, err
	}
	// The machine's init is moved into cgroups, unless it is a standby
	// one: start the wait that move involves now (see prewarm).
	if !p.haveStandby() {
		p.cg.prewarm()
	}

	switch spec.Network {
	case providers.NetworkDefault, providers.NetworkOn, providers.NetworkOff:
	default:
		return providers.Info{}, providers.Errorf(providers.ErrInvalid, Name, "create", "unknown network mode %q (want on or off)", spec.Network)
	}
	var id, dir string
	for range 5 {
		id = newID(rand.Reader)
		dir = filepath.Join(p.dir, id)
		err := p.makeSandboxDir(dir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return providers.Info{}, fmt.Errorf("local: create sandbox directory: %w", err)
		}
		dir = ""
	}
	if dir == "" {
		return providers.Info{}, fmt.Errorf("local: could not pick an unused sandbox id")
	}
	m := meta{
		ID:        id,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond),
		Labels:    maps.Clone(spec.Labels),
		Env:       maps.Clone(spec.Env),
		User:      spec.User,
		Network:   spec.Network,
		Resources: spec.Resources,
		Weak:      p.weak,
	}
	switch {
	case spec.AutoStop < 0:
		m.AutoStopNS = -1
	case spec.AutoStop > 0:
		m.AutoStopNS = int64(spec.AutoStop)
	}
	if m.Network == providers.NetworkDefault {
		m.Network = providers.NetworkOff
	}
	if err := p.populate(dir); err != nil {
		_ = removeTree(dir)
		return providers.Info{}, fmt.Errorf("local: create sandbox %s: %w", id, err)
	}
	if err := writeJSONAtomic(filepath.Join(dir, metaFile), m); err != nil {
		_ = removeTree(dir)
		return providers.Info{}, fmt.Errorf("local: create sandbox %s: %w", id, err)
	}
	// A sandbox is created running, as every provider's is: a host
	// that refuses it fails here (exit 125, with the fix), not at
	// every command afterwards.
	if !p.weak {
		if err := p.ensureMachine(dir, id, machineStart{warmed: true, transient: spec.Transient}); err != nil {
			_ = os.Remove(filepath.Join(dir, metaFile))
			_ = p.killMachine(dir)
			_ = removeTree(dir)
			return providers.Info{}, err
		}
	}
	return p.info(m, dir), nil
}

// populate creates the directory skeleton of a new sandbox.
func (p *Provider) populate(dir string) error {
	dirs := []string{workspacePath(dir), p.homePath(dir)}
	for _, l := range p.host().layers {
		dirs = append(dirs, filepath.Join(dir, upperDir, l.Name))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(p.homePath(dir), 0o700); err != nil {
		return err
	}
	if err := p.ownAccounts(dir); err != nil {
		return err
	}
	// The sandbox names itself: /etc/hostname, from the base layer or
	// else in its own layer.
	if base, _ := p.etcBaseDir(); base != "" {
		return nil
	}
	for _, l := range p.host().layers {
		if l.Name == "etc" {
			if err := os.WriteFile(filepath.Join(dir, upperDir, "etc", "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownAccounts gives the sandbox in dir copies of the host's /etc/passwd
// and /etc/group in its /etc layer when an unprivileged user's
// subordinate ids map its root: the host's files belong to the host's
// root, unmapped inside, so not even the sandbox's root could add a user
// (create --user) to them; copies of the invoking user's belong to an id
// mapped inside, which its root may write.
func (p *Provider) ownAccounts(dir string) error {
	if p.uid == 0 || !p.host().uids.ranged() || !slices.ContainsFunc(p.host().layers, func(l layer) bool { return l.Name == "etc" }) {
		return nil
	}
	for _, name := range []string{"passwd", "group"} {
		b, err := readFile(filepath.Join("/etc", name))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, upperDir, "etc", name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeJSONAtomic writes v as JSON through a temporary file and a rename.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// writeFileAtomic writes b through a temporary file and a rename. The file
// is readable by its owner alone (0600): a sandbox's metadata holds the
// values of its --env variables.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	werr := f.Chmod(0o600)
	if werr == nil {
		_, werr = f.Write(b)
	}
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}

// Get describes one sandbox.
func (p *Provider) Get(ctx context.Context, id string) (providers.Info, error) {
	if err := ctx.Err(); err != nil {
		return providers.Info{}, err
	}
	m, dir, err := p.load(id)
	if err != nil {
		return providers.Info{}, err
	}
	return p.info(m, dir), nil
}

// List returns the sandboxes whose labels match filter, oldest first.
func (p *Provider) List(ctx context.Context, filter providers.Filter) ([]providers.Info, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("local: list sandboxes: %w", err)
	}
	var out []providers.Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		m, dir, err := p.load(e.Name())
		if err != nil {
			// Half-created or half-deleted: not a sandbox.
			continue
		}
		if filter.Matches(m.Labels) {
			out = append(out, p.info(m, dir))
		}
	}
	slices.SortFunc(out, func(a, b providers.Info) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Delete removes the sandbox directory. The metadata goes first so that a
// sandbox whose removal fails half-way no longer counts as one; the tree is
// removed without following symlinks, so links to host directories planted
// in the workspace only lose the link.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, dir, err := p.load(id)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, metaFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	// The machine goes, with every process of the sandbox, before its
	// directories do; a start that waited for the lock meanwhile finds
	// the metadata gone.
	if err := p.killMachine(dir); err != nil {
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	endWeakRuns(dir)
	if err := p.discard(dir, id); err != nil {
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	// Every process of the sandbox is gone: its cgroups can go.
	p.cg.removeSandbox(id)
	return nil
}
