package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/internal/approval"
	"github.com/agentbox/sandbox/internal/engine"
	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
	"github.com/agentbox/sandbox/setup"
)

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), 1},
		{&UsageError{Err: errors.New("bad flag")}, 2},
		{fmt.Errorf("wrapped: %w", &approval.DeniedError{}), 3},
		{&providers.CredentialError{Provider: "e2b", Var: "E2B_API_KEY"}, 4},
		{providers.Errorf(providers.ErrTimeout, "local", "exec", "slow"), 124},
		{context.DeadlineExceeded, 124},
		{&engine.SetupError{Err: &setup.Error{ExitCode: 3}}, 125},
		{&engine.SetupError{Err: providers.ErrTimeout}, 125},
		{&engine.CreateError{Provider: "x", Err: errors.New("no")}, 125},
		{&engine.UnavailableError{Provider: "x", Err: providers.ErrUnavailable}, 125},
		{context.Canceled, 130},
		{&ExitStatus{Code: 42}, 42},
		{providers.ErrUnsupported, 2},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// keyedRegistry has one provider that needs FAKE_API_KEY, like a cloud one.
func keyedRegistry() *providers.Registry {
	reg := fake.Registration()
	reg.Hidden = false
	reg.Env = []providers.EnvKey{{Name: "FAKE_API_KEY", Help: "API key", Required: true, Secret: true}}
	reg.New = func(cfg providers.Config) (providers.Provider, error) {
		if cfg.Lookup("FAKE_API_KEY") == "" {
			return nil, &providers.CredentialError{Provider: "fake", Var: "FAKE_API_KEY"}
		}
		return fake.New(), nil
	}
	return providers.NewRegistry(reg)
}

func runMain(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	base := map[string]string{"HOME": t.TempDir()}
	for k, v := range env {
		base[k] = v
	}
	code := Main(context.Background(), args, Deps{
		Streams:  Streams{In: strings.NewReader(""), Out: &out, Err: &errb},
		Registry: keyedRegistry(),
		Getenv:   func(k string) (string, bool) { v, ok := base[k]; return v, ok },
		Getwd:    func() (string, error) { return t.TempDir(), nil },
	})
	return code, out.String(), errb.String()
}

func TestMissingCredentials(t *testing.T) {
	t.Parallel()
	code, _, stderr := runMain(t, nil, "--sandbox", "fake", "exec", "--", "true")
	if code != ExitCredentials || !strings.Contains(stderr, "set FAKE_API_KEY") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	code, out, _ := runMain(t, nil, "providers")
	if code != 0 || !strings.Contains(out, "set FAKE_API_KEY") {
		t.Fatalf("providers: %d %q", code, out)
	}
	code, out, _ = runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, "--sandbox", "fake", "exec", "--", "echo", "hi")
	if code != 0 || out != "hi\n" {
		t.Fatalf("with key: %d %q", code, out)
	}
}

func TestSecretsMaskedInErrors(t *testing.T) {
	t.Parallel()
	code, _, stderr := runMain(t, map[string]string{"FAKE_API_KEY": "k-supersecret"}, "--sandbox", "fake", "--sandbox-id", "k-supersecret", "exec", "--", "true")
	if code != ExitError || strings.Contains(stderr, "k-supersecret") || !strings.Contains(stderr, "***") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}

func TestExecRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		shell string
		args  []string
		argv  []string
		sh    string
		err   bool
	}{
		{args: []string{"ls", "-l"}, argv: []string{"ls", "-l"}},
		{args: []string{"ls"}, argv: []string{"ls"}},
		{args: []string{"ls -l | wc"}, sh: "ls -l | wc"},
		{shell: "echo $HOME", sh: "echo $HOME"},
		{shell: "x", args: []string{"y"}, err: true},
		{err: true},
	}
	for _, tt := range tests {
		req, err := execRequest(tt.shell, tt.args)
		if tt.err {
			if err == nil {
				t.Errorf("execRequest(%q, %q): want error", tt.shell, tt.args)
			}
			continue
		}
		if err != nil || req.Shell != tt.sh || strings.Join(req.Argv, "\x00") != strings.Join(tt.argv, "\x00") {
			t.Errorf("execRequest(%q, %q) = %+v, %v", tt.shell, tt.args, req, err)
		}
	}
}

// TestUnknownProvider checks that an unknown provider is a usage error
// told in one sentence.
func TestUnknownProvider(t *testing.T) {
	t.Parallel()
	code, _, stderr := runMain(t, nil, "--sandbox", "nope", "exec", "--", "true")
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	if first, _, _ := strings.Cut(stderr, "\n"); first != `sandbox: unknown provider "nope" (known: fake)` {
		t.Errorf("stderr %q", stderr)
	}
}

// TestUnreachableNamesVariables checks that an API that could not be
// reached names the provider's address variables in the message.
func TestUnreachableNamesVariables(t *testing.T) {
	t.Parallel()
	reg := fake.Registration()
	reg.Env = []providers.EnvKey{{Name: "FAKE_API_KEY", Secret: true}, {Name: "FAKE_API_URL"}, {Name: "FAKE_DOMAIN"}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"named", fmt.Errorf("could not create: %w", &providers.UnreachableError{Provider: fake.Name, Op: "create", URL: "http://127.0.0.1:1/x", Attempts: 5}),
			fake.Name + ": create: cannot reach http://127.0.0.1:1/x after 5 attempts: check FAKE_API_URL or FAKE_DOMAIN and the network"},
		{"unknown provider", &providers.UnreachableError{Provider: "other", Op: "list", URL: "http://h/"},
			"other: list: cannot reach http://h/: check the provider's API URL setting (see `sandbox providers`) and the network"},
	}
	for _, tt := range tests {
		err := explainUnreachable(tt.err, providers.NewRegistry(reg))
		if !errors.Is(err, providers.ErrUnavailable) {
			t.Errorf("%s: %v no longer matches ErrUnavailable", tt.name, err)
		}
		if got := err.Error(); !strings.HasSuffix(got, tt.want) {
			t.Errorf("%s: %q, want it to end in %q", tt.name, got, tt.want)
		}
	}
}

// TestImageFlag checks that --image reaches the provider, which shows it
// in the sandbox object.
func TestImageFlag(t *testing.T) {
	t.Parallel()
	code, out, stderr := runMain(t, map[string]string{"FAKE_API_KEY": "k-123456"}, "--sandbox", "fake", "--image", "base-v2", "create", "--json")
	if code != 0 || !strings.Contains(out, `"image": "base-v2"`) {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, stderr)
	}
}
