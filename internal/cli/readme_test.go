package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestReadmeGlobalFlags checks that the README's list of global flags
// names exactly the root command's persistent flags, and the variable
// that picks the default provider.
func TestReadmeGlobalFlags(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "Global flags (before or after the verb)")
	if start < 0 {
		t.Fatal("README has no list of global flags")
	}
	para := text[start:]
	para = para[:strings.Index(para, "\n\n")]
	root := newRootCmd(&App{deps: Deps{Registry: providers.NewRegistry()}})
	listed := flagNames(para, `--([a-z][a-z-]*)`)
	flags := flagNames(root.PersistentFlags().FlagUsages(), `(?m)^ *(?:-[a-zA-Z], )?--([a-z][a-z-]*)`)
	if !slices.Equal(listed, flags) {
		t.Errorf("README lists %v,\nthe root command has %v", listed, flags)
	}
	if !strings.Contains(para, "SANDBOX_PROVIDER") {
		t.Error("README's global flags do not name SANDBOX_PROVIDER")
	}
}

// flagNames returns the names pattern finds in text (its first group),
// sorted, each once.
func flagNames(text, pattern string) []string {
	var out []string
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}
