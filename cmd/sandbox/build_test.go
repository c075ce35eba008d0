package main

import (
	"debug/buildinfo"
	"strings"
	"testing"
)

// TestRuntimeUpdatesOff: the program is built with the runtime's updates
// of GOMAXPROCS off (see the //go:debug line of main.go), which sets it
// itself.
func TestRuntimeUpdatesOff(t *testing.T) {
	info, err := buildinfo.ReadFile(buildBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "DefaultGODEBUG" {
			if !strings.Contains(","+s.Value+",", ",updatemaxprocs=0,") {
				t.Errorf("DefaultGODEBUG=%s, want updatemaxprocs=0 in it", s.Value)
			}
			return
		}
	}
	t.Error("no DefaultGODEBUG in the build settings, want updatemaxprocs=0")
}
