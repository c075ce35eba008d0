package providertest_test

import (
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/fake"
	"github.com/agentbox/sandbox/providers/providertest"
)

// TestFake proves the suite against the in-memory fake provider.
func TestFake(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Options{
		New: func(*testing.T) providers.Provider { return fake.New() },
		Spec: providers.Spec{
			Labels: map[string]string{"suite": "self-test"},
			Env:    map[string]string{"BASE_VAR": "base"},
		},
	})
}

// TestFakeShared runs the suite twice against one provider at the same
// time: the run labels must keep the two runs apart.
func TestFakeShared(t *testing.T) {
	t.Parallel()
	p := fake.New()
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, providertest.Options{New: func(*testing.T) providers.Provider { return p }})
		})
	}
}
