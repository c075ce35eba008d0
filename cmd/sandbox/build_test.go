package main

import (
	"debug/buildinfo"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestRuntimeUpdatesOff: both programs are built with the runtime's
// updates of GOMAXPROCS off (see the //go:debug line of main.go), as they
// set it themselves.
func TestRuntimeUpdatesOff(t *testing.T) {
	for name, build := range map[string]func() (string, error){"sandbox": built, "sandbox-cloud": builtCloud} {
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

// TestNoHTTPInSandbox: the program sandbox links no HTTP or TLS (the
// cloud providers and the emulators, which need them, are in
// sandbox-cloud): their size and initialisers were a tenth of a cold
// `sandbox exec`, and of every start of a local sandbox's init and
// runners.
func TestNoHTTPInSandbox(t *testing.T) {
	refuseDeps(t, "net/http", "crypto/tls", "google.golang.org/grpc")
}

// TestNoTUIInSandbox: the program sandbox links no TUI (bare `sandbox` on
// a terminal is handed to sandbox-cloud, see TestTUIHandOver): Bubble Tea,
// Lip Gloss and the rest were a twelfth of a cold `sandbox exec`.
func TestNoTUIInSandbox(t *testing.T) {
	refuseDeps(t, "github.com/agentbox/sandbox/internal/tui", "github.com/charmbracelet/bubbletea",
		"github.com/charmbracelet/lipgloss", "github.com/charmbracelet/bubbles/textarea")
}

// refuseDeps fails the test for each of pkgs the program sandbox links.
func refuseDeps(t *testing.T, pkgs ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps: %d packages, want the program's", len(deps))
	}
	for _, pkg := range pkgs {
		if slices.Contains(deps, pkg) {
			t.Errorf("the program sandbox links %s", pkg)
		}
	}
}
