package fake

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/agentbox/sandbox/providers"
)

// ReadFile opens a regular file.
func (p *Provider) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	if err := p.enter("ReadFile"); err != nil {
		return nil, err
	}
	return p.readFile(ctx, id, path)
}

// WriteFile creates or replaces a file, creating missing parents. The
// reader is consumed before anything is stored, so a failing reader leaves
// no file behind.
func (p *Provider) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	if err := p.enter("WriteFile"); err != nil {
		return err
	}
	return p.writeFile(ctx, id, path, r, mode)
}

// Stat describes a path without following a symlink.
func (p *Provider) Stat(ctx context.Context, id, path string) (providers.FileInfo, error) {
	if err := p.enter("Stat"); err != nil {
		return providers.FileInfo{}, err
	}
	return p.stat(ctx, id, path)
}

// ListDir lists a directory down to depth levels, sorted by path.
func (p *Provider) ListDir(ctx context.Context, id, path string, depth int) ([]providers.FileInfo, error) {
	if err := p.enter("ListDir"); err != nil {
		return nil, err
	}
	return p.listDir(ctx, id, path, depth)
}

// Mkdir creates a directory and its missing parents.
func (p *Provider) Mkdir(ctx context.Context, id, path string) error {
	if err := p.enter("Mkdir"); err != nil {
		return err
	}
	return p.mkdir(ctx, id, path)
}

// Remove deletes a path; a non-empty directory only when recursive is set.
func (p *Provider) Remove(ctx context.Context, id, path string, recursive bool) error {
	if err := p.enter("Remove"); err != nil {
		return err
	}
	return p.remove(ctx, id, path, recursive)
}

// Rename moves a path and everything beneath it.
func (p *Provider) Rename(ctx context.Context, id, from, to string) error {
	if err := p.enter("Rename"); err != nil {
		return err
	}
	return p.rename(ctx, id, from, to)
}

// Symlink creates a symlink entry at path pointing to target, creating
// missing parents and replacing a file or symlink already there. It
// implements archive.Symlinker.
func (p *Provider) Symlink(ctx context.Context, id, target, path string) error {
	if err := p.enter("Symlink"); err != nil {
		return err
	}
	return p.symlink(ctx, id, target, path)
}

// Grep searches regular files with an RE2 pattern.
func (p *Provider) Grep(ctx context.Context, id string, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	if err := p.enter("Grep"); err != nil {
		return nil, err
	}
	return p.grep(ctx, id, req)
}

// cleanPath makes a request path absolute and clean.
func cleanPath(p string) (string, error) {
	return providers.CleanPath(p, providers.DefaultWorkdir)
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// lookup returns the box and the clean path. The caller holds p.mu.
func (p *Provider) lookup(id, op, name string) (*box, string, error) {
	b, err := p.box(id, op)
	if err != nil {
		return nil, "", err
	}
	p.wake(b)
	clean, err := cleanPath(name)
	if err != nil {
		return nil, "", err
	}
	return b, clean, nil
}

func (p *Provider) readFile(ctx context.Context, id, name string) (io.ReadCloser, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Under the lock: a background command is cancelled under it when
	// it is signalled or stopped, and then reads nothing (nor starts
	// the stopped sandbox again).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, name, err := p.lookup(id, "read", name)
	if err != nil {
		return nil, err
	}
	e, ok := b.files[name]
	switch {
	case !ok:
		return nil, notFound("read", name)
	case e.mode.IsDir():
		return nil, invalid("read", "%s is a directory", name)
	case e.mode&fs.ModeSymlink != 0:
		return nil, invalid("read", "%s is a symlink, which the fake does not follow", name)
	}
	return io.NopCloser(bytes.NewReader(e.data)), nil
}

func (p *Provider) writeFile(ctx context.Context, id, name string, r io.Reader, mode fs.FileMode) error {
	p.mu.Lock()
	_, clean, err := p.lookup(id, "write", name)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if clean == "/" {
		return invalid("write", "cannot write the root directory")
	}
	data, err := io.ReadAll(ctxReader{ctx, r})
	if err != nil {
		return err
	}
	if mode.Perm() == 0 {
		mode = 0o644
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.box(id, "write")
	if err != nil {
		return err
	}
	return p.put(b, "write", clean, &entry{mode: mode.Perm(), data: data, mtime: p.now()})
}

// put stores e at name, creating parents; it refuses to replace a
// directory. The caller holds p.mu.
func (p *Provider) put(b *box, op, name string, e *entry) error {
	if err := p.mkdirAll(b, op, path.Dir(name)); err != nil {
		return err
	}
	if old, ok := b.files[name]; ok && old.mode.IsDir() {
		return invalid(op, "%s is a directory", name)
	}
	b.files[name] = e
	return nil
}

// mkdirAll creates dir and its parents. The caller holds p.mu.
func (p *Provider) mkdirAll(b *box, op, dir string) error {
	cur := "/"
	for part := range strings.SplitSeq(strings.TrimPrefix(dir, "/"), "/") {
		if part == "" {
			continue
		}
		cur = path.Join(cur, part)
		e, ok := b.files[cur]
		switch {
		case !ok:
			b.files[cur] = &entry{mode: fs.ModeDir | 0o755, mtime: p.now()}
		case e.mode&fs.ModeSymlink != 0:
			return invalid(op, "%s is a symlink, which the fake does not follow", cur)
		case !e.mode.IsDir():
			return invalid(op, "%s is not a directory", cur)
		}
	}
	return nil
}

func (p *Provider) stat(ctx context.Context, id, name string) (providers.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return providers.FileInfo{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, name, err := p.lookup(id, "stat", name)
	if err != nil {
		return providers.FileInfo{}, err
	}
	e, ok := b.files[name]
	if !ok {
		return providers.FileInfo{}, notFound("stat", name)
	}
	return info(name, e), nil
}

// info describes one entry.
func info(name string, e *entry) providers.FileInfo {
	return providers.FileInfo{
		Path:    name,
		Name:    path.Base(name),
		Size:    int64(len(e.data)),
		Mode:    e.mode,
		ModTime: e.mtime,
		Target:  e.target,
	}
}

// under returns the paths strictly beneath dir, sorted. The caller holds
// p.mu.
func under(b *box, dir string) []string {
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	var out []string
	for name := range b.files {
		if name != dir && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (p *Provider) listDir(ctx context.Context, id, dir string, depth int) ([]providers.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, dir, err := p.lookup(id, "list", dir)
	if err != nil {
		return nil, err
	}
	e, ok := b.files[dir]
	if !ok {
		return nil, notFound("list", dir)
	}
	if !e.mode.IsDir() {
		return nil, invalid("list", "%s is not a directory", dir)
	}
	depth = max(depth, 1)
	var out []providers.FileInfo
	for _, name := range under(b, dir) {
		rel := strings.TrimPrefix(strings.TrimPrefix(name, dir), "/")
		if strings.Count(rel, "/") < depth {
			out = append(out, info(name, b.files[name]))
		}
	}
	return out, nil
}

func (p *Provider) mkdir(ctx context.Context, id, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, dir, err := p.lookup(id, "mkdir", dir)
	if err != nil {
		return err
	}
	return p.mkdirAll(b, "mkdir", dir)
}

func (p *Provider) remove(ctx context.Context, id, name string, recursive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, name, err := p.lookup(id, "remove", name)
	if err != nil {
		return err
	}
	if name == "/" {
		return invalid("remove", "refusing to remove the root directory")
	}
	if _, ok := b.files[name]; !ok {
		return notFound("remove", name)
	}
	children := under(b, name)
	if len(children) > 0 && !recursive {
		return invalid("remove", "%s is a directory that is not empty (remove it recursively)", name)
	}
	for _, c := range children {
		delete(b.files, c)
	}
	delete(b.files, name)
	return nil
}

func (p *Provider) rename(ctx context.Context, id, from, to string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, from, err := p.lookup(id, "rename", from)
	if err != nil {
		return err
	}
	to, err = cleanPath(to)
	if err != nil {
		return err
	}
	src, ok := b.files[from]
	switch {
	case !ok:
		return notFound("rename", from)
	case from == "/" || to == "/":
		return invalid("rename", "cannot move the root directory")
	case from == to:
		return nil
	case strings.HasPrefix(to, from+"/"):
		return invalid("rename", "cannot move %s inside itself (%s)", from, to)
	}
	if parent, ok := b.files[path.Dir(to)]; !ok || !parent.mode.IsDir() {
		return notFound("rename", path.Dir(to))
	}
	if dst, ok := b.files[to]; ok {
		switch {
		case dst.mode.IsDir() && !src.mode.IsDir():
			return invalid("rename", "%s is a directory", to)
		case !dst.mode.IsDir() && src.mode.IsDir():
			return invalid("rename", "%s is not a directory", to)
		case dst.mode.IsDir() && len(under(b, to)) > 0:
			return invalid("rename", "%s is a directory that is not empty", to)
		}
	}
	children := under(b, from)
	delete(b.files, to)
	b.files[to] = src
	delete(b.files, from)
	for _, c := range children {
		b.files[to+strings.TrimPrefix(c, from)] = b.files[c]
		delete(b.files, c)
	}
	return nil
}

func (p *Provider) symlink(ctx context.Context, id, target, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if target == "" {
		return invalid("symlink", "empty symlink target")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, name, err := p.lookup(id, "symlink", name)
	if err != nil {
		return err
	}
	return p.put(b, "symlink", name, &entry{mode: fs.ModeSymlink | 0o777, target: target, mtime: p.now()})
}

func (p *Provider) grep(ctx context.Context, id string, req providers.GrepRequest) ([]providers.GrepMatch, error) {
	pattern := req.Pattern
	if req.IgnoreCase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, invalid("grep", "pattern %q: %v", req.Pattern, err)
	}
	if req.Glob != "" {
		if _, err := path.Match(req.Glob, ""); err != nil {
			return nil, invalid("grep", "glob %q: %v", req.Glob, err)
		}
	}
	limit := req.MaxMatches
	if limit <= 0 {
		limit = 1000
	}
	type file struct {
		name string
		data []byte
	}
	var files []file
	p.mu.Lock()
	b, root, err := p.lookup(id, "grep", req.Path)
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	e, ok := b.files[root]
	if !ok {
		p.mu.Unlock()
		return nil, notFound("grep", root)
	}
	names := []string{root}
	if e.mode.IsDir() {
		names = under(b, root)
	}
	for _, n := range names {
		if f := b.files[n]; f.mode.IsRegular() && globMatch(req.Glob, root, n) {
			files = append(files, file{n, f.data})
		}
	}
	p.mu.Unlock()

	var out []providers.GrepMatch
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(f.data))
		sc.Buffer(nil, len(f.data)+1)
		for line := 1; sc.Scan(); line++ {
			if re.Match(sc.Bytes()) {
				out = append(out, providers.GrepMatch{Path: f.name, Line: line, Text: sc.Text()})
				if len(out) >= limit {
					return out, nil
				}
			}
		}
	}
	return out, nil
}

// globMatch reports whether name (beneath root) matches glob by base name,
// by path relative to root, or by absolute path. An empty glob matches all.
func globMatch(glob, root, name string) bool {
	if glob == "" {
		return true
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(name, root), "/")
	for _, s := range []string{path.Base(name), rel, name} {
		if ok, _ := path.Match(glob, s); ok {
			return true
		}
	}
	return false
}
