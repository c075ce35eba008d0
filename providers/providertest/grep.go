package providertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// grepChecks checks the native search of providers that implement
// providers.Grepper.
func (s *suite) grepChecks(t *testing.T) {
	g, ok := s.p.(providers.Grepper)
	if !ok {
		t.Logf("provider %q does not implement providers.Grepper: the engine greps inside the sandbox instead; nothing to check", s.p.Name())
		return
	}
	id := s.create(t, "grep").ID
	const dir = "/workspace/pt-grep"
	s.mustWrite(t, id, dir+"/a.txt", []byte("alpha\nneedle one\nbeta\n"))
	s.mustWrite(t, id, dir+"/sub/b.md", []byte("Needle two\nneedle three\n"))
	s.mustWrite(t, id, dir+"/c.txt", []byte("nothing to see\n"))

	tests := []struct {
		name string
		req  providers.GrepRequest
		want []string // "path:line:text"
	}{
		{
			name: "recursive",
			req:  providers.GrepRequest{Pattern: "needle", Path: dir},
			want: []string{dir + "/a.txt:2:needle one", dir + "/sub/b.md:2:needle three"},
		},
		{
			name: "ignore-case",
			req:  providers.GrepRequest{Pattern: "needle", Path: dir, IgnoreCase: true},
			want: []string{dir + "/a.txt:2:needle one", dir + "/sub/b.md:1:Needle two", dir + "/sub/b.md:2:needle three"},
		},
		{
			name: "regexp",
			req:  providers.GrepRequest{Pattern: "^(alpha|beta)$", Path: dir},
			want: []string{dir + "/a.txt:1:alpha", dir + "/a.txt:3:beta"},
		},
		{
			name: "glob",
			req:  providers.GrepRequest{Pattern: "needle", Path: dir, Glob: "*.md"},
			want: []string{dir + "/sub/b.md:2:needle three"},
		},
		{
			name: "single-file",
			req:  providers.GrepRequest{Pattern: "needle", Path: dir + "/a.txt"},
			want: []string{dir + "/a.txt:2:needle one"},
		},
		{
			name: "no-match",
			req:  providers.GrepRequest{Pattern: "absent-from-every-file", Path: dir},
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := callCtx(t)
			defer cancel()
			matches, err := g.Grep(ctx, id, tc.req)
			if err != nil {
				t.Fatalf("Grep(%+v): %v", tc.req, err)
			}
			var got []string
			for _, m := range matches {
				got = append(got, fmt.Sprintf("%s:%d:%s", m.Path, m.Line, strings.TrimRight(m.Text, "\r\n")))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Grep(%+v) =\n  %s\nwant\n  %s", tc.req, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}

	t.Run("max-matches", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := callCtx(t)
		defer cancel()
		req := providers.GrepRequest{Pattern: "e", Path: dir, MaxMatches: 2}
		matches, err := g.Grep(ctx, id, req)
		if err != nil {
			t.Fatalf("Grep(%+v): %v", req, err)
		}
		if len(matches) != 2 {
			t.Errorf("Grep(%+v) returned %d matches, want exactly 2 (MaxMatches)", req, len(matches))
		}
	})
}
