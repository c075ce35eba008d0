package emulatortest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/sandbox/providers/emulator/httpguard"
)

// Serve starts h on a loopback port for the length of the test and
// returns its base URL ("http://127.0.0.1:PORT").
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = nil
	srv.Config.Protocols = httpguard.Protocols()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// npmLocks serialises npm installs of one directory within a test binary.
type npmLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (l *npmLocks) lock(dir string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	m, ok := l.locks[dir]
	if !ok {
		m = &sync.Mutex{}
		l.locks[dir] = m
	}
	return m
}

// NodeProject is a node package in the repository (package.json and
// package-lock.json pinning an official SDK) whose scripts drive an
// emulator.
type NodeProject struct {
	// Dir holds package.json and package-lock.json.
	Dir   string
	locks npmLocks
}

// Install makes sure node_modules matches the lock file, running
// `npm ci` when it is missing or older than package-lock.json (the test
// script runs `npm ci` first, so CI normally finds it installed). Missing
// node or npm fails the test: the conformance tests are never skipped.
func (p *NodeProject) Install(t testing.TB) {
	t.Helper()
	m := p.locks.lock(p.Dir)
	m.Lock()
	defer m.Unlock()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: the official SDK conformance test needs node 20+ and npm (scripts/test installs them)", tool)
		}
	}
	lock, err := os.Stat(filepath.Join(p.Dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("node project %s: %v", p.Dir, err)
	}
	marker, err := os.Stat(filepath.Join(p.Dir, "node_modules", ".package-lock.json"))
	if err == nil && !marker.ModTime().Before(lock.ModTime()) {
		return
	}
	t.Logf("running npm ci in %s", p.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = p.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", p.Dir, err, out)
	}
}

// Run runs `node script args...` in the project with env added to the
// environment, streaming its output into the test log line by line, and
// returns the combined output. A non-zero exit is returned as an error.
func (p *NodeProject) Run(ctx context.Context, t testing.TB, env map[string]string, script string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = p.Dir
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.WaitDelay = 5 * time.Second
	var out lineLogger
	out.t = t
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	out.flush()
	if err != nil {
		return out.all.String(), fmt.Errorf("node %s: %w", script, err)
	}
	return out.all.String(), nil
}

// lineLogger logs whole lines to t and keeps everything.
type lineLogger struct {
	t       testing.TB
	mu      sync.Mutex
	partial []byte
	all     bytes.Buffer
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(b)
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.t.Log("node: " + strings.TrimRight(string(l.partial[:i]), "\r"))
		l.partial = l.partial[i+1:]
	}
	return len(b), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.t.Log("node: " + string(l.partial))
		l.partial = nil
	}
}
