package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/joho/godotenv"
)

// validEnvName reports whether name is a variable name: a letter or an
// underscore, then letters, digits and underscores (ASCII). (A function,
// not a regular expression: those are compiled when the program starts,
// which every run of the CLI, and every init and runner of a local
// sandbox, would pay.)
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return true
}

// SandboxEnv builds the environment passed into a sandbox from --env-file
// files (in order) and --env values (later wins). `--env KEY` alone copies
// the host value (real environment, then .env; see Env.SandboxValue) and is
// an error when unset.
// Host variables never enter a sandbox unless named here.
func SandboxEnv(env *Env, files []string, flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--env-file: %w", err)
		}
		m, err := ParseEnvFile(string(data))
		if err != nil {
			return nil, fmt.Errorf("--env-file %s: %w", f, err)
		}
		for k, v := range m {
			out[k] = v
		}
	}
	for _, fl := range flags {
		k, v, hasVal := strings.Cut(fl, "=")
		if !validEnvName(k) {
			return nil, fmt.Errorf("--env %q: %q is not a valid variable name (use KEY=VALUE or KEY)", fl, k)
		}
		if !hasVal {
			hv, ok := env.SandboxValue(k)
			if !ok {
				return nil, fmt.Errorf("--env %s: %s is not set on the host (give a value with --env %s=VALUE)", k, k, k)
			}
			v = hv
		}
		out[k] = v
	}
	return out, nil
}

// ParseEnvFile parses the contents of an env file with godotenv's syntax and
// checks that every name is a valid variable name.
func ParseEnvFile(s string) (map[string]string, error) {
	m, err := godotenv.Unmarshal(s)
	if err != nil {
		return nil, fmt.Errorf("parse env file: %w", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !validEnvName(k) {
			return nil, fmt.Errorf("parse env file: %q is not a valid variable name", k)
		}
	}
	return m, nil
}

// secretWords are the parts of a variable name that say it holds a
// secret, in lower case.
func secretWords() []string {
	return []string{"key", "token", "secret", "passw", "pwd", "credential", "auth", "private", "session", "cookie"}
}

// IsSecretName reports whether a variable name looks like it holds a secret,
// so its value is masked in output, logs and JSON.
func IsSecretName(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range secretWords() {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}
