package modalconf

import (
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/agentbox/sandbox/providers"
)

// Variables that select or replace the profile file, and the OAuth
// credentials the SDK accepts instead of a token.
const (
	EnvConfigPath        = "MODAL_CONFIG_PATH"
	EnvProfile           = "MODAL_PROFILE"
	EnvOAuthRefreshToken = "MODAL_OAUTH_REFRESH_TOKEN"
	EnvOAuthClientID     = "MODAL_OAUTH_CLIENT_ID"
)

// profile is what Configured reads of one profile of a Modal profile
// file: the credentials and whether it is the active one.
type profile struct {
	TokenID           string `toml:"token_id"`
	TokenSecret       string `toml:"token_secret"`
	OAuthRefreshToken string `toml:"oauth_refresh_token"`
	OAuthClientID     string `toml:"oauth_client_id"`
	Active            bool   `toml:"active"`
}

// Configured reports whether the SDK will find credentials: a token
// (MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, each from the configuration or
// else from the profile) or an OAuth refresh token with its client id.
// The profile is MODAL_PROFILE's, else the one marked active, in the file
// MODAL_CONFIG_PATH names or else ~/.modal.toml. When neither is found,
// missing names the token variables that are unset.
func Configured(cfg providers.Config) (ok bool, missing []string) {
	id, secret := cfg.Lookup(EnvTokenID), cfg.Lookup(EnvTokenSecret)
	refresh, client := cfg.Lookup(EnvOAuthRefreshToken), cfg.Lookup(EnvOAuthClientID)
	if prof, found := activeProfile(cfg); found {
		id = firstSet(id, prof.TokenID)
		secret = firstSet(secret, prof.TokenSecret)
		refresh = firstSet(refresh, prof.OAuthRefreshToken)
		client = firstSet(client, prof.OAuthClientID)
	}
	if (id != "" && secret != "") || (refresh != "" && client != "") {
		return true, nil
	}
	if id == "" {
		missing = append(missing, EnvTokenID)
	}
	if secret == "" {
		missing = append(missing, EnvTokenSecret)
	}
	return false, missing
}

// activeProfile returns the profile the SDK would use, if the profile
// file exists, parses and has it.
func activeProfile(cfg providers.Config) (profile, bool) {
	file := cfg.Lookup(EnvConfigPath)
	if file == "" {
		home := cfg.Lookup("HOME")
		if home == "" {
			return profile{}, false
		}
		file = filepath.Join(home, ".modal.toml")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return profile{}, false
	}
	var profiles map[string]profile
	if err := toml.Unmarshal(data, &profiles); err != nil {
		// The SDK refuses such a file too.
		return profile{}, false
	}
	name := cfg.Lookup(EnvProfile)
	if name == "" {
		for n, p := range profiles {
			if p.Active && (name == "" || n < name) {
				name = n
			}
		}
	}
	p, found := profiles[name]
	return p, found
}

// firstSet returns the first non-empty value.
func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
