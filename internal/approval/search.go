package approval

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agentbox/sandbox/providers"
)

// globDepth is how deep Glob lists below its root.
const globDepth = 64

// Glob lists the paths below root that match a doublestar pattern, after
// one approval of kind KindList (target root). A relative pattern is
// matched against the path relative to root, an absolute one against the
// absolute path. Results are sorted by path.
func (g *Gate) Glob(ctx context.Context, id, root, pattern string) ([]providers.FileInfo, error) {
	r, err := g.clean(root)
	if err != nil {
		return nil, err
	}
	if pattern == "" || !doublestar.ValidatePattern(pattern) {
		return nil, fmt.Errorf("glob: bad pattern %q: %w", pattern, providers.ErrInvalid)
	}
	req := g.request(ctx, KindList, id, r)
	req.Details.Pattern = pattern
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return nil, err
	}
	var out []providers.FileInfo
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		entries, err := g.inner.ListDir(at.ctx(ctx), id, at.target, globDepth)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			e.Path = rebase(e.Path, at.target, r)
			name := e.Path
			if !strings.HasPrefix(pattern, "/") {
				rel, ok := relativeTo(r, e.Path)
				if !ok {
					continue
				}
				name = rel
			}
			if ok, _ := doublestar.Match(pattern, name); ok {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(a, b providers.FileInfo) int { return strings.Compare(a.Path, b.Path) })
		return nil, nil
	})
	return out, err
}

func relativeTo(root, p string) (string, bool) {
	if root == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	rel, ok := strings.CutPrefix(p, root+"/")
	return rel, ok && rel != ""
}

// defaultMaxMatches is the GrepRequest.MaxMatches used when it is zero.
const defaultMaxMatches = 1000

// maxGrepOutput bounds the output of the grep fallback.
const maxGrepOutput = 16 << 20

// Grep searches file contents after one approval of kind KindList (target
// req.Path). It uses the inner provider's providers.Grepper when there is
// one, and otherwise runs `grep -rnHIE` inside the sandbox as argv (no
// shell). At most MaxMatches (default 1000) matches are returned.
func (g *Gate) Grep(ctx context.Context, id string, gr providers.GrepRequest) ([]providers.GrepMatch, error) {
	if gr.Path == "" {
		gr.Path = g.workdir
	}
	p, err := g.clean(gr.Path)
	if err != nil {
		return nil, err
	}
	if gr.Pattern == "" {
		return nil, fmt.Errorf("grep: empty pattern: %w", providers.ErrInvalid)
	}
	gr.Path = p
	if gr.MaxMatches <= 0 {
		gr.MaxMatches = defaultMaxMatches
	}
	req := g.request(ctx, KindList, id, p)
	req.Details.Pattern = gr.Pattern
	at, err := g.resolve(ctx, &req, followFinal)
	if err != nil {
		return nil, err
	}
	gr.Path = at.target
	var out []providers.GrepMatch
	err = g.do(ctx, req, func(ctx context.Context) (*int, error) {
		var err error
		if gr2, ok := g.inner.(providers.Grepper); ok {
			out, err = gr2.Grep(at.ctx(ctx), id, gr)
		} else {
			// Best effort: grep itself follows the symlinks of its root.
			out, err = g.grepExec(ctx, id, gr)
		}
		if len(out) > gr.MaxMatches {
			out = out[:gr.MaxMatches]
		}
		for i := range out {
			out[i].Path = rebase(out[i].Path, at.target, p)
		}
		return nil, err
	})
	return out, err
}

// grepArgv builds the argv of the grep fallback.
func grepArgv(gr providers.GrepRequest) []string {
	argv := []string{"grep", "-rnHIE"}
	if gr.IgnoreCase {
		argv = append(argv, "-i")
	}
	if gr.Glob != "" {
		argv = append(argv, "--include="+gr.Glob)
	}
	return append(argv, "--", gr.Pattern, gr.Path)
}

func (g *Gate) grepExec(ctx context.Context, id string, gr providers.GrepRequest) ([]providers.GrepMatch, error) {
	stdout := &headBuffer{max: maxGrepOutput}
	stderr := &headBuffer{max: 4096}
	res, err := g.inner.Exec(ctx, id, providers.ExecRequest{Argv: grepArgv(gr), Cwd: "/", Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("grep: %w", err)
	}
	matches := parseGrep(stdout.buf.String(), gr.MaxMatches)
	switch {
	case res.ExitCode == 0, res.ExitCode == 1 && len(matches) == 0:
		return matches, nil
	case len(matches) > 0:
		// Some files could not be read; the matches found still count.
		return matches, nil
	default:
		msg := strings.TrimSpace(stderr.buf.String())
		if msg == "" {
			msg = "exit status " + strconv.Itoa(res.ExitCode)
		}
		return nil, &providers.Error{Kind: providers.ErrInvalid, Provider: g.inner.Name(), Op: "grep " + gr.Path, Msg: msg}
	}
}

// parseGrep parses `path:line:text` lines, stopping after max matches.
func parseGrep(out string, max int) []providers.GrepMatch {
	var ms []providers.GrepMatch
	for line := range strings.Lines(out) {
		if len(ms) >= max {
			break
		}
		if m, ok := parseGrepLine(strings.TrimSuffix(line, "\n")); ok {
			ms = append(ms, m)
		}
	}
	return ms
}

// parseGrepLine splits at the first ":DIGITS:".
func parseGrepLine(line string) (providers.GrepMatch, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(line) && line[j] >= '0' && line[j] <= '9' {
			j++
		}
		if j > i+1 && j < len(line) && line[j] == ':' {
			n, err := strconv.Atoi(line[i+1 : j])
			if err != nil {
				return providers.GrepMatch{}, false
			}
			return providers.GrepMatch{Path: line[:i], Line: n, Text: line[j+1:]}, true
		}
	}
	return providers.GrepMatch{}, false
}

// headBuffer keeps the first max bytes written to it and discards the
// rest: the head of an output.
type headBuffer struct {
	buf bytes.Buffer
	max int
}

func (w *headBuffer) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
