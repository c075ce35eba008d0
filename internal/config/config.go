// Package config resolves where the tool keeps its state and configuration,
// loads .env files, parses --env flags, and masks secret values.
//
// Precedence for provider settings: the real environment, then the .env file
// in the working directory, then defaults. A .env file is often part of a
// checkout the user did not write, so it supplies only what cannot weaken
// the sandbox (see ClassifyDotEnv): values that `--env NAME` copies into a
// sandbox, and the providers' credentials and endpoints. The tool's own
// switches and the host's paths come only from the real environment or
// flags. Nothing here changes the process environment.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/joho/godotenv"
	"gopkg.in/yaml.v3"
)

// Env is a read-only view of the host environment merged with a .env file,
// where the real environment wins. What the .env file may supply depends
// on the name (see ClassifyDotEnv).
type Env struct {
	lookup func(string) (string, bool)
	// dotenv holds the .env values that were not ignored.
	dotenv map[string]string
	// ignored are the names the .env file set and may not set, sorted.
	ignored []string
}

// DotEnvUse says what a variable set in a .env file is used for.
type DotEnvUse int

const (
	// DotEnvSandbox is a value for sandboxes only: `--env NAME` copies it
	// into a sandbox, but the tool and its providers never read it.
	DotEnvSandbox DotEnvUse = iota
	// DotEnvSetting is a provider's credential or endpoint (E2B_*,
	// DAYTONA_*, RUNLOOP_*, MODAL_*) or SANDBOX_PROVIDER, the default
	// provider: every provider is a sandbox, so choosing one from a .env
	// cannot remove the isolation. Providers read it as well.
	DotEnvSetting
	// DotEnvIgnored is never taken from a .env file: the tool's own
	// switches (SANDBOX_* other than SANDBOX_PROVIDER, such as the local
	// provider's isolation switches SANDBOX_LOCAL_WEAK and
	// SANDBOX_LOCAL_POOL), the host's paths (HOME, PATH, TMPDIR, TMP,
	// TEMP, XDG_*), the dynamic loader's LD_* and names that are not
	// variable names. These come only from the real environment or flags.
	DotEnvIgnored
)

// ClassifyDotEnv says what a .env file's value of name is used for.
func ClassifyDotEnv(name string) DotEnvUse {
	switch {
	case !validEnvName(name):
		return DotEnvIgnored
	case name == "SANDBOX_PROVIDER", hasPrefix(name, "E2B_", "DAYTONA_", "RUNLOOP_", "MODAL_"):
		return DotEnvSetting
	case name == "HOME", name == "PATH", name == "TMPDIR", name == "TMP", name == "TEMP",
		hasPrefix(name, "SANDBOX_", "XDG_", "LD_"):
		return DotEnvIgnored
	}
	return DotEnvSandbox
}

// hasPrefix reports whether s starts with one of prefixes.
func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// NewEnv builds an Env from a lookup function (os.LookupEnv in the program)
// and the parsed contents of a .env file (may be nil). Names the .env file
// may not set are dropped; Ignored lists them.
func NewEnv(lookup func(string) (string, bool), dotenv map[string]string) *Env {
	e := &Env{lookup: lookup, dotenv: make(map[string]string, len(dotenv))}
	for k, v := range dotenv {
		if ClassifyDotEnv(k) == DotEnvIgnored {
			e.ignored = append(e.ignored, k)
			continue
		}
		e.dotenv[k] = v
	}
	sort.Strings(e.ignored)
	return e
}

// Ignored returns the names the .env file set that were ignored, sorted,
// so that the caller can warn about each.
func (e *Env) Ignored() []string { return slices.Clone(e.ignored) }

// LoadDotEnv reads a .env file with godotenv. A missing file is not an error
// and yields an empty map.
func LoadDotEnv(path string) (map[string]string, error) {
	m, err := godotenv.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return m, nil
}

// Getenv returns a setting of the tool or of a provider: the variable from
// the real environment, else from .env when the .env file may supply it
// (DotEnvSetting). This is what providers read through providers.Config,
// so a .env file cannot turn on the local provider's weak mode or move the
// tool's state.
func (e *Env) Getenv(key string) (string, bool) {
	if v, ok := e.real(key); ok {
		return v, true
	}
	if ClassifyDotEnv(key) != DotEnvSetting {
		return "", false
	}
	v, ok := e.dotenv[key]
	return v, ok
}

// SandboxValue returns the value `--env KEY` copies into a sandbox: the
// real environment's, else the .env file's unless ignored.
func (e *Env) SandboxValue(key string) (string, bool) {
	if v, ok := e.real(key); ok {
		return v, true
	}
	v, ok := e.dotenv[key]
	return v, ok
}

// real looks key up in the real environment.
func (e *Env) real(key string) (string, bool) {
	if e.lookup == nil {
		return "", false
	}
	return e.lookup(key)
}

// Get returns the variable or "".
func (e *Env) Get(key string) string {
	v, _ := e.Getenv(key)
	return v
}

// Dirs are the tool's directories.
type Dirs struct {
	// State holds the registry of created sandboxes, the audit log and the
	// local provider's sandboxes: $XDG_STATE_HOME/sandbox.
	State string
	// Config holds config.yaml: $XDG_CONFIG_HOME/sandbox.
	Config string
}

// ResolveDirs applies the XDG base directory rules.
func ResolveDirs(env *Env) (Dirs, error) {
	home := env.Get("HOME")
	pick := func(xdg, fallback string) (string, error) {
		if v := env.Get(xdg); v != "" && filepath.IsAbs(v) {
			return filepath.Join(v, "sandbox"), nil
		}
		if home == "" {
			return "", fmt.Errorf("neither %s nor HOME is set: set one of them so the tool knows where to keep its files", xdg)
		}
		return filepath.Join(home, fallback, "sandbox"), nil
	}
	state, err := pick("XDG_STATE_HOME", ".local/state")
	if err != nil {
		return Dirs{}, err
	}
	cfg, err := pick("XDG_CONFIG_HOME", ".config")
	if err != nil {
		return Dirs{}, err
	}
	return Dirs{State: state, Config: cfg}, nil
}

// File is the optional config file, config.yaml in the config directory.
type File struct {
	// Provider is the default provider name.
	Provider string `yaml:"provider"`
}

// LoadFile reads config.yaml from dir; a missing file yields the zero File.
func LoadFile(dir string) (File, error) {
	var f File
	path := filepath.Join(dir, "config.yaml")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
