package archive_test

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/sandbox/providers/archive"
)

// FuzzExtract feeds arbitrary bytes to Extract and checks that nothing is
// ever created outside the root: a sibling directory must stay empty and
// the parent must hold nothing new. Every input touches the disk, so
// minimising a new input is slow; run it with a short -fuzzminimizetime:
//
//	go test -run '^$' -fuzz FuzzExtract -fuzztime 60s -fuzzminimizetime 3s ./providers/archive
func FuzzExtract(f *testing.F) {
	seeds := [][]tent{
		{{name: "a.txt", body: "a"}},
		{{name: "d/", typ: tar.TypeDir}, {name: "d/b.txt", body: "b"}},
		{{name: "../outside/x", body: "x"}},
		{{name: "/tmp/x", body: "x"}},
		{{name: "l", typ: tar.TypeSymlink, linkname: "../outside"}, {name: "l/x", body: "x"}},
		{{name: "l", typ: tar.TypeSymlink, linkname: "/"}, {name: "l/tmp/x", body: "x"}},
		{{name: "h", typ: tar.TypeLink, linkname: "../outside/x"}},
		{{name: "a.txt", body: "1"}, {name: "a.txt", body: "2"}},
	}
	for _, s := range seeds {
		f.Add(tarOf(f, s...), false)
	}
	f.Add([]byte("not a tar"), true)
	f.Fuzz(func(t *testing.T, data []byte, force bool) {
		base := t.TempDir()
		rootDir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
		for _, d := range []string{rootDir, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		root, err := os.OpenRoot(rootDir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		for _, single := range []string{"", "single.out"} {
			_, _ = archive.Extract(t.Context(), bytes.NewReader(data), root, "dst", archive.ExtractOptions{Force: force, SingleFileAs: single})
		}
		assertEmpty(t, outside)
		assertOnly(t, base, "root", "outside")
		assertNoTemp(t, rootDir)
	})
}
