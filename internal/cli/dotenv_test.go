package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
)

// seenConfig records what a provider read from its providers.Config.
type seenConfig struct {
	mu                  sync.Mutex
	weak, pool, key     string
	stateDir, sbProvide string
}

// probeRegistry has one provider, "probe", that records the variables the
// local provider reads (its isolation switches) and a credential.
func probeRegistry(seen *seenConfig) *providers.Registry {
	reg := fake.Registration()
	reg.Name, reg.Hidden = "probe", false
	reg.New = func(cfg providers.Config) (providers.Provider, error) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.weak, seen.pool = cfg.Lookup("SANDBOX_LOCAL_WEAK"), cfg.Lookup("SANDBOX_LOCAL_POOL")
		seen.key, seen.sbProvide = cfg.Lookup("E2B_API_KEY"), cfg.Lookup("SANDBOX_PROVIDER")
		seen.stateDir = cfg.StateDir
		return fake.New(), nil
	}
	return providers.NewRegistry(reg)
}

// TestDotEnvIsolationSwitchesIgnored: a .env file in the working directory
// cannot turn on the local provider's weak mode, turn off its pool or move
// the state directory; each such variable is named in one warning line.
// A provider credential from it still reaches the provider, and the real
// environment still wins.
func TestDotEnvIsolationSwitchesIgnored(t *testing.T) {
	t.Parallel()
	home, wd := t.TempDir(), t.TempDir()
	evil := filepath.Join(wd, "evil-state")
	dotenv := "SANDBOX_LOCAL_WEAK=1\nSANDBOX_LOCAL_POOL=0\nXDG_STATE_HOME=" + evil + "\nE2B_API_KEY=key-from-dotenv\nSANDBOX_PROVIDER=probe\n"
	if err := os.WriteFile(filepath.Join(wd, ".env"), []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		real   map[string]string
		weak   string
		key    string
		warned []string
	}{
		{"only .env", nil, "", "key-from-dotenv", []string{"SANDBOX_LOCAL_POOL", "SANDBOX_LOCAL_WEAK", "XDG_STATE_HOME"}},
		{"real environment wins", map[string]string{"SANDBOX_LOCAL_WEAK": "1", "E2B_API_KEY": "real-key"}, "1", "real-key", []string{"SANDBOX_LOCAL_POOL", "SANDBOX_LOCAL_WEAK", "XDG_STATE_HOME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"HOME": home}
			for k, v := range tt.real {
				env[k] = v
			}
			seen := &seenConfig{}
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"exec", "--", "echo", "hi"}, Deps{
				Streams:  Streams{In: strings.NewReader(""), Out: &out, Err: &errb},
				Registry: probeRegistry(seen),
				Getenv:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
				Getwd:    func() (string, error) { return wd, nil },
			})
			if code != 0 || out.String() != "hi\n" {
				t.Fatalf("exec: %d %q, stderr %q", code, out.String(), errb.String())
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if seen.weak != tt.weak || seen.pool != "" || seen.key != tt.key || seen.sbProvide != "probe" {
				t.Errorf("the provider read weak %q, pool %q, key %q, provider %q; want %q, \"\", %q, probe", seen.weak, seen.pool, seen.key, seen.sbProvide, tt.weak, tt.key)
			}
			if !strings.HasPrefix(seen.stateDir, home) {
				t.Errorf("state directory %s, want it under the real HOME", seen.stateDir)
			}
			if _, err := os.Stat(evil); err == nil {
				t.Errorf("%s was created from .env's XDG_STATE_HOME", evil)
			}
			var warnings []string
			for line := range strings.SplitSeq(errb.String(), "\n") {
				if strings.Contains(line, "from .env") && strings.Contains(line, "ignored") {
					warnings = append(warnings, line)
				}
			}
			if len(warnings) != len(tt.warned) {
				t.Fatalf("warnings %q, want one for each of %q", warnings, tt.warned)
			}
			for i, name := range tt.warned {
				if !strings.Contains(warnings[i], " "+name+" ") {
					t.Errorf("warning %q does not name %s", warnings[i], name)
				}
			}
		})
	}
}
