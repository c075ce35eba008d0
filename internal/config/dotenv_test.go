package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

func TestClassifyDotEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want DotEnvUse
	}{
		{"E2B_API_KEY", DotEnvSetting},
		{"E2B_API_URL", DotEnvSetting},
		{"DAYTONA_API_URL", DotEnvSetting},
		{"RUNLOOP_BASE_URL", DotEnvSetting},
		{"MODAL_TOKEN_SECRET", DotEnvSetting},
		{"SANDBOX_PROVIDER", DotEnvSetting},
		{"SANDBOX_LOCAL_WEAK", DotEnvIgnored},
		{"SANDBOX_LOCAL_STANDBY", DotEnvIgnored},
		{"SANDBOX_ANYTHING_NEW", DotEnvIgnored},
		{"XDG_STATE_HOME", DotEnvIgnored},
		{"XDG_CONFIG_HOME", DotEnvIgnored},
		{"HOME", DotEnvIgnored},
		{"PATH", DotEnvIgnored},
		{"TMPDIR", DotEnvIgnored},
		{"LD_PRELOAD", DotEnvIgnored},
		{"BAD NAME", DotEnvIgnored},
		{"ESC\x1b[2J", DotEnvIgnored},
		{"OPENAI_API_KEY", DotEnvSandbox},
		{"EDITOR", DotEnvSandbox},
		{"DATABASE_URL", DotEnvSandbox},
	}
	for _, tt := range tests {
		if got := ClassifyDotEnv(tt.name); got != tt.want {
			t.Errorf("ClassifyDotEnv(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestDotEnvCannotWeakenIsolation: a .env file in the working directory
// that sets the local provider's isolation switches and the tool's paths
// changes nothing a provider or the tool reads, and each such name is
// reported for a warning; provider credentials from it still work, values
// for --env still come from it, and the real environment still wins.
func TestDotEnvCannotWeakenIsolation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dotenv := "SANDBOX_LOCAL_WEAK=1\nXDG_STATE_HOME=" + filepath.Join(dir, "evil-state") + "\nSANDBOX_LOCAL_STANDBY=0\n" +
		"HOME=" + filepath.Join(dir, "evil-home") + "\nPATH=" + filepath.Join(dir, "bin") + "\n" +
		"E2B_API_KEY=from-dotenv\nE2B_DOMAIN=dotenv.example\nSANDBOX_PROVIDER=e2b\nPROJECT_TOKEN=for-the-sandbox\n"
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	dot, err := LoadDotEnv(filepath.Join(dir, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	host := map[string]string{"HOME": "/home/user", "E2B_DOMAIN": "real.example"}
	env := NewEnv(lookupFrom(host), dot)
	cfg := providers.Config{Getenv: env.Getenv}

	tests := []struct {
		key  string
		want string
	}{
		{"SANDBOX_LOCAL_WEAK", ""},
		{"SANDBOX_LOCAL_STANDBY", ""},
		{"XDG_STATE_HOME", ""},
		{"PATH", ""},
		{"HOME", "/home/user"},
		{"E2B_API_KEY", "from-dotenv"},
		{"E2B_DOMAIN", "real.example"},
		{"SANDBOX_PROVIDER", "e2b"},
		{"PROJECT_TOKEN", ""},
	}
	for _, tt := range tests {
		if got := cfg.Lookup(tt.key); got != tt.want {
			t.Errorf("providers.Config.Lookup(%s) = %q, want %q", tt.key, got, tt.want)
		}
	}
	dirs, err := ResolveDirs(env)
	if err != nil || dirs.State != "/home/user/.local/state/sandbox" {
		t.Errorf("ResolveDirs = %+v, %v; want the state under the real HOME", dirs, err)
	}
	want := []string{"HOME", "PATH", "SANDBOX_LOCAL_STANDBY", "SANDBOX_LOCAL_WEAK", "XDG_STATE_HOME"}
	if got := env.Ignored(); !slices.Equal(got, want) {
		t.Errorf("Ignored() = %q, want %q", got, want)
	}

	sb, err := SandboxEnv(env, nil, []string{"PROJECT_TOKEN", "E2B_DOMAIN"})
	if err != nil || sb["PROJECT_TOKEN"] != "for-the-sandbox" || sb["E2B_DOMAIN"] != "real.example" {
		t.Errorf("SandboxEnv = %v, %v; want PROJECT_TOKEN from .env, E2B_DOMAIN from the real environment", sb, err)
	}
	if _, err := SandboxEnv(env, nil, []string{"SANDBOX_LOCAL_WEAK"}); err == nil {
		t.Error("--env SANDBOX_LOCAL_WEAK took the value of an ignored .env variable")
	}

	host["SANDBOX_LOCAL_WEAK"] = "1"
	host["XDG_STATE_HOME"] = "/state"
	if got := cfg.Lookup("SANDBOX_LOCAL_WEAK"); got != "1" {
		t.Errorf("SANDBOX_LOCAL_WEAK from the real environment = %q, want 1", got)
	}
	if dirs, err := ResolveDirs(env); err != nil || dirs.State != "/state/sandbox" {
		t.Errorf("ResolveDirs with a real XDG_STATE_HOME = %+v, %v", dirs, err)
	}
}
