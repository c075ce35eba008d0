package main

import (
	"debug/buildinfo"
	"strings"
	"testing"
)

// TestRuntimeUpdatesOff: both programs are built with the runtime's
// updates of GOMAXPROCS off (see the //go:debug line of main.go), as they
// set it themselves.
func TestRuntimeUpdatesOff(t *testing.T) {
	for name, build := range map[string]func() (string, error){"sandbox": built, "sandbox-modal": builtModal} {
		bin, err := build()
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		godebug := ""
		for _, s := range info.Settings {
			if s.Key == "DefaultGODEBUG" {
				godebug = s.Value
			}
		}
		if !strings.Contains(","+godebug+",", ",updatemaxprocs=0,") {
			t.Errorf("%s: DefaultGODEBUG=%q, want updatemaxprocs=0 in it", name, godebug)
		}
	}
}
