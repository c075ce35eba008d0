package builds

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestSame(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notGo, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		exe  string
		want bool
	}{
		{"itself", self, true},
		{"not a Go program", notGo, false},
		{"missing", filepath.Join(t.TempDir(), "none"), false},
	} {
		if got := Same(tc.exe); got != tc.want {
			t.Errorf("%s: Same(%s) = %v, want %v", tc.name, tc.exe, got, tc.want)
		}
	}
}

func TestKeyTellsBuildsApart(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information")
	}
	base := key(bi)
	for _, setting := range []string{"vcs.revision", "-ldflags", "GOARCH"} {
		other := *bi
		other.Settings = append(append([]debug.BuildSetting(nil), bi.Settings...), debug.BuildSetting{Key: setting, Value: "changed"})
		if key(&other) == base {
			t.Errorf("a build with another %s has the same key", setting)
		}
	}
	other := *bi
	other.GoVersion += "-other"
	if key(&other) == base {
		t.Error("a build by another Go has the same key")
	}
}
