package config

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestEnvRealWins(t *testing.T) {
	t.Parallel()
	e := NewEnv(lookupFrom(map[string]string{"E2B_A": "real"}), map[string]string{"E2B_A": "dot", "E2B_B": "dot"})
	if got := e.Get("E2B_A"); got != "real" {
		t.Errorf("E2B_A = %q, want real", got)
	}
	if got := e.Get("E2B_B"); got != "dot" {
		t.Errorf("E2B_B = %q, want dot", got)
	}
	if _, ok := e.Getenv("C"); ok {
		t.Error("C should be unset")
	}
}

func TestLoadDotEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := LoadDotEnv(filepath.Join(dir, "missing"))
	if err != nil || len(m) != 0 {
		t.Fatalf("missing .env: %v %v", m, err)
	}
	p := filepath.Join(dir, ".env")
	os.WriteFile(p, []byte("# c\nE2B_API_KEY=abc\nexport X=\"y z\"\n"), 0o600)
	m, err = LoadDotEnv(p)
	if err != nil || m["E2B_API_KEY"] != "abc" || m["X"] != "y z" {
		t.Fatalf("LoadDotEnv = %v, %v", m, err)
	}
}

func TestResolveDirs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		env       map[string]string
		state     string
		cfg       string
		wantError bool
	}{
		{"xdg", map[string]string{"XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/c", "HOME": "/h"}, "/s/sandbox", "/c/sandbox", false},
		{"home", map[string]string{"HOME": "/h"}, "/h/.local/state/sandbox", "/h/.config/sandbox", false},
		{"relative xdg ignored", map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/h"}, "/h/.local/state/sandbox", "/h/.config/sandbox", false},
		{"nothing", map[string]string{}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := ResolveDirs(NewEnv(lookupFrom(tt.env), nil))
			if tt.wantError {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil || d.State != tt.state || d.Config != tt.cfg {
				t.Fatalf("got %+v, %v", d, err)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if f, err := LoadFile(dir); err != nil || f.Provider != "" {
		t.Fatalf("missing file: %+v %v", f, err)
	}
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(""), 0o600)
	if _, err := LoadFile(dir); err != nil {
		t.Fatalf("empty file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("provider: e2b\n"), 0o600)
	if f, err := LoadFile(dir); err != nil || f.Provider != "e2b" {
		t.Fatalf("got %+v %v", f, err)
	}
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("provder: e2b\n"), 0o600)
	if _, err := LoadFile(dir); err == nil || !strings.Contains(err.Error(), "provder") {
		t.Fatalf("unknown field must be reported, got %v", err)
	}
}

func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ef := filepath.Join(dir, "vars.env")
	os.WriteFile(ef, []byte("A=file\nB=file\n"), 0o600)
	host := NewEnv(lookupFrom(map[string]string{"HOSTVAR": "h", "OTHER": "o"}), nil)
	tests := []struct {
		name    string
		files   []string
		flags   []string
		want    map[string]string
		wantErr string
	}{
		{"flags", nil, []string{"X=1", "Y=a=b"}, map[string]string{"X": "1", "Y": "a=b"}, ""},
		{"copy host", nil, []string{"HOSTVAR"}, map[string]string{"HOSTVAR": "h"}, ""},
		{"file then flag", []string{ef}, []string{"B=flag"}, map[string]string{"A": "file", "B": "flag"}, ""},
		{"unset host", nil, []string{"NOPE"}, nil, "NOPE is not set on the host"},
		{"bad name", nil, []string{"1X=2"}, nil, "not a valid variable name"},
		{"missing file", []string{filepath.Join(dir, "nope")}, nil, nil, "--env-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := SandboxEnv(host, tt.files, tt.flags)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if _, leaked := got["OTHER"]; leaked {
				t.Error("unnamed host variable leaked")
			}
		})
	}
}

func TestMaskerWriterAcrossChunks(t *testing.T) {
	t.Parallel()
	m := NewMasker("s3cr3t-value", "abc", "s3cr3t")
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"whole", []string{"x s3cr3t-value y"}, "x *** y"},
		{"split", []string{"x s3c", "r3t-va", "lue y"}, "x *** y"},
		{"prefix secret", []string{"s3cr3t!"}, "***!"},
		{"pending at close", []string{"tail s3cr"}, "tail s3cr"},
		{"short ignored", []string{"abc"}, "abc"},
		{"byte by byte", strings.Split("as3cr3t-valueb", ""), "a***b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			w := m.Writer(&buf)
			for _, c := range tt.chunks {
				w.Write([]byte(c))
			}
			w.Close()
			if buf.String() != tt.want {
				t.Fatalf("got %q, want %q", buf.String(), tt.want)
			}
		})
	}
	if got := m.String("a s3cr3t-value b"); got != "a *** b" {
		t.Fatalf("String = %q", got)
	}
}

func TestIsSecretName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"E2B_API_KEY": true, "GITHUB_TOKEN": true, "DB_PASSWORD": true, "PATH": false, "HOME": false, "LANG": false} {
		if IsSecretName(name) != want {
			t.Errorf("IsSecretName(%s) != %v", name, want)
		}
	}
}

// TestNameChecksMatchTheirPatterns checks validEnvName and IsSecretName
// against the regular expressions they stand for.
func TestNameChecksMatchTheirPatterns(t *testing.T) {
	t.Parallel()
	env := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secret := regexp.MustCompile(`(?i)(key|token|secret|passw|pwd|credential|auth|private|session|cookie)`)
	names := []string{"", "A", "_", "a1", "1a", "A-B", "A B", "PATH", "é", "Aé", "_9", "x\n", "API_KEY", "my_Token", "PassWord",
		"OAUTH", "Cookie_jar", "SESSIONID", "PRIVATE", "credentials", "pwd", "KEYS", "monkey", "HOME", "LANG", "K\u212aY"}
	for _, n := range names {
		if got, want := validEnvName(n), env.MatchString(n); got != want {
			t.Errorf("validEnvName(%q) = %v, want %v", n, got, want)
		}
		if got, want := IsSecretName(n), secret.MatchString(n); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", n, got, want)
		}
	}
}

func FuzzParseEnvFile(f *testing.F) {
	for _, s := range []string{"A=1\n", "export B='x'\n# c\n", "C=\"multi\nline\"", "=", "A B=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseEnvFile(s)
		if err != nil {
			return
		}
		for k := range m {
			if !validEnvName(k) {
				t.Fatalf("invalid name %q accepted", k)
			}
		}
	})
}

func FuzzMaskWriter(f *testing.F) {
	f.Add("hello secret world", 3)
	f.Fuzz(func(t *testing.T, s string, cut int) {
		m := NewMasker("secret")
		var buf bytes.Buffer
		w := m.Writer(&buf)
		if cut < 0 {
			cut = -cut
		}
		if len(s) > 0 {
			cut %= len(s) + 1
		} else {
			cut = 0
		}
		w.Write([]byte(s[:cut]))
		w.Write([]byte(s[cut:]))
		w.Close()
		if buf.String() != m.String(s) {
			t.Fatalf("streamed %q != whole %q", buf.String(), m.String(s))
		}
	})
}
