// Package config resolves where the tool keeps its state and configuration,
// loads .env files, parses --env flags, and masks secret values.
//
// Precedence for provider settings: the real environment, then the .env file
// in the working directory (or --env-file for the host side), then defaults.
// Nothing here changes the process environment.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/joho/godotenv"
	"gopkg.in/yaml.v3"
)

// Env is a read-only view of the host environment merged with a .env file,
// where the real environment wins.
type Env struct {
	lookup func(string) (string, bool)
	dotenv map[string]string
}

// NewEnv builds an Env from a lookup function (os.LookupEnv in the program)
// and the parsed contents of a .env file (may be nil).
func NewEnv(lookup func(string) (string, bool), dotenv map[string]string) *Env {
	return &Env{lookup: lookup, dotenv: dotenv}
}

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

// Getenv returns the variable from the real environment, else from .env.
func (e *Env) Getenv(key string) (string, bool) {
	if e.lookup != nil {
		if v, ok := e.lookup(key); ok {
			return v, true
		}
	}
	v, ok := e.dotenv[key]
	return v, ok
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
