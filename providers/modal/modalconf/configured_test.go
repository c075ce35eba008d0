package modalconf_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/modal/modalconf"
)

// TestConfigured checks that Modal counts as configured only when the SDK
// will find credentials: a token in the configuration, or in the profile
// it would pick from the profile file, or OAuth credentials.
func TestConfigured(t *testing.T) {
	const profiles = `
[work]
token_id = "ak-work"
token_secret = "as-work"

[personal]
token_id = "ak-personal"
token_secret = "as-personal"
active = true

[half]
token_id = "ak-half"

[oauth]
oauth_refresh_token = "rt"
oauth_client_id = "cl"
`
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := write("modal.toml", profiles)
	noneActive := write("none-active.toml", "[work]\ntoken_id = \"ak\"\ntoken_secret = \"as\"\n")
	broken := write("broken.toml", "[work\ntoken_id = ")
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".modal.toml"), []byte(profiles), 0o600); err != nil {
		t.Fatal(err)
	}
	both := []string{modalconf.EnvTokenID, modalconf.EnvTokenSecret}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		ok      bool
		missing []string
	}{
		{name: "nothing", env: map[string]string{"HOME": filepath.Join(dir, "nobody")}, missing: both},
		{name: "no home", env: map[string]string{}, missing: both},
		{name: "token from the configuration", env: map[string]string{"MODAL_TOKEN_ID": "ak", "MODAL_TOKEN_SECRET": "as", "MODAL_CONFIG_PATH": filepath.Join(dir, "missing.toml")}, ok: true},
		{name: "secret only", env: map[string]string{"MODAL_TOKEN_SECRET": "as", "MODAL_CONFIG_PATH": filepath.Join(dir, "missing.toml")}, missing: []string{modalconf.EnvTokenID}},
		{name: "active profile of MODAL_CONFIG_PATH", env: map[string]string{"MODAL_CONFIG_PATH": file}, ok: true},
		{name: "active profile of ~/.modal.toml", env: map[string]string{"HOME": home}, ok: true},
		{name: "MODAL_PROFILE picks a profile", env: map[string]string{"MODAL_CONFIG_PATH": file, "MODAL_PROFILE": "work"}, ok: true},
		{name: "MODAL_PROFILE picks a half profile", env: map[string]string{"MODAL_CONFIG_PATH": file, "MODAL_PROFILE": "half"}, missing: []string{modalconf.EnvTokenSecret}},
		{name: "half profile completed by the configuration", env: map[string]string{"MODAL_CONFIG_PATH": file, "MODAL_PROFILE": "half", "MODAL_TOKEN_SECRET": "as"}, ok: true},
		{name: "MODAL_PROFILE names no profile", env: map[string]string{"MODAL_CONFIG_PATH": file, "MODAL_PROFILE": "nope"}, missing: both},
		{name: "OAuth profile", env: map[string]string{"MODAL_CONFIG_PATH": file, "MODAL_PROFILE": "oauth"}, ok: true},
		{name: "OAuth from the configuration", env: map[string]string{"HOME": filepath.Join(dir, "nobody"), "MODAL_OAUTH_REFRESH_TOKEN": "rt", "MODAL_OAUTH_CLIENT_ID": "cl"}, ok: true},
		{name: "no active profile", env: map[string]string{"MODAL_CONFIG_PATH": noneActive}, missing: both},
		{name: "unparsable file", env: map[string]string{"MODAL_CONFIG_PATH": broken}, missing: both},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := providers.Config{Getenv: func(k string) (string, bool) {
				v, ok := tc.env[k]
				return v, ok
			}}
			ok, missing := modalconf.Configured(cfg)
			if ok != tc.ok || !slices.Equal(missing, tc.missing) {
				t.Errorf("Configured = %v, %v; want %v, %v", ok, missing, tc.ok, tc.missing)
			}
		})
	}
}
