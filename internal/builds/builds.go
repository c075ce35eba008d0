// Package builds tells whether another program was built as this one was.
package builds

import (
	"debug/buildinfo"
	"runtime/debug"
	"strings"
)

// Same says whether the program at exe was built from the same source by
// the same toolchain with the same flags as this one, by their build
// information (module version, VCS revision and state, Go version, linker
// flags, target): then the two speak the same internal protocols. Only the
// main package and what it links may differ.
func Same(exe string) bool {
	theirs, err := buildinfo.ReadFile(exe)
	if err != nil {
		return false
	}
	ours, ok := debug.ReadBuildInfo()
	return ok && key(ours) == key(theirs)
}

// key is what Same compares of a program's build information.
func key(bi *debug.BuildInfo) string {
	var b strings.Builder
	b.WriteString(bi.GoVersion + " " + bi.Main.Path + "@" + bi.Main.Version + " " + bi.Main.Sum)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "-ldflags", "-trimpath", "GOOS", "GOARCH", "CGO_ENABLED":
			b.WriteString(" " + s.Key + "=" + s.Value)
		}
	}
	return b.String()
}
