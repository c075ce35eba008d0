//go:build linux

package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

// TestAnotherBuildKeepsTheMachine: a CLI of another build of the same
// machine protocol (the binary upgraded) talks to a running machine: what
// runs in it and its /tmp stay. A CLI used to name the machine's socket
// after its binary, and so stopped and restarted every running machine of
// an earlier binary.
func TestAnotherBuildKeepsTheMachine(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	mustRun(t, p, id, "echo kept > /tmp/mark")
	before := runningMachine(t, p, id)

	other, err := New(providers.Config{StateDir: filepath.Dir(p.dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.exe = copyTestBinary(t) // another build: its own identity
	other.identity = exeIdentity(other.exe)
	if other.identity == p.exeID() {
		t.Fatal("the copy of the binary has the same identity")
	}
	if got := mustRun(t, other, id, "cat /tmp/mark"); got != "kept\n" {
		t.Fatalf("the other build read %q from /tmp/mark, want kept", got)
	}
	if after := runningMachine(t, other, id); after != before {
		t.Fatalf("the machine was replaced: %+v, then %+v", before, after)
	}
	if note := other.TakeNote(id); note != "" {
		t.Fatalf("note %q", note)
	}
}

// TestOtherVersionRestartsWithANote: a machine of another protocol
// version (its socket named for it) is stopped and started again, and the
// note says why, not that it crashed.
func TestOtherVersionRestartsWithANote(t *testing.T) {
	for _, tc := range []struct{ sock, says string }{
		{machineSockPrefix + "3.sock", "machine protocol 3; this one speaks "},
		{"machine-0123456789abcdef.sock", "an earlier machine protocol; this one speaks "},
	} {
		t.Run(tc.sock, func(t *testing.T) {
			p := newTestProvider(t)
			id := newSandbox(t, p, providers.Spec{})
			mustRun(t, p, id, "echo gone > /tmp/mark")
			before := runningMachine(t, p, id)
			dir := filepath.Join(p.dir, id)
			// The running init as one of that version: its socket has that name.
			if err := os.Rename(filepath.Join(dir, machineSockName()), filepath.Join(dir, tc.sock)); err != nil {
				t.Fatal(err)
			}
			res := run(t, p, id, "cat /tmp/mark")
			if res.code == 0 {
				t.Fatalf("/tmp survived a restart: %q", res.stdout)
			}
			if after := runningMachine(t, p, id); after == before {
				t.Fatal("the machine of the other version still runs")
			}
			note := p.TakeNote(id)
			for _, want := range []string{"another version of sandbox", tc.says, "files intact", "processes and /tmp are gone"} {
				if !strings.Contains(note, want) {
					t.Errorf("note %q: want %q in it", note, want)
				}
			}
			if strings.Contains(note, "without being asked") {
				t.Errorf("note %q says the machine crashed", note)
			}
			assertRuns(t, p, id, "after the restart")
		})
	}
}

// TestOtherVersionPsSaysSo: a request that needs the running machine and
// does not start one (ps, kill, logs) says that the machine is of another
// version and how to go on, not that it "does not answer"; stop ends it.
func TestOtherVersionPsSaysSo(t *testing.T) {
	p := newTestProvider(t)
	id := newSandbox(t, p, providers.Spec{})
	dir := filepath.Join(p.dir, id)
	if err := os.Rename(filepath.Join(dir, machineSockName()), filepath.Join(dir, machineSockPrefix+"3.sock")); err != nil {
		t.Fatal(err)
	}
	_, err := p.Processes(context.Background(), id)
	if !errors.Is(err, providers.ErrUnavailable) || !strings.Contains(err.Error(), "another version of sandbox (machine protocol 3") || !strings.Contains(err.Error(), "sandbox stop "+id) {
		t.Fatalf("ps of a machine of another version: %v", err)
	}
	if err := p.Stop(context.Background(), id); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, alive := liveMachine(dir); alive {
		t.Fatal("the machine of the other version runs after the stop")
	}
	assertRuns(t, p, id, "after the stop")
}

// wireShapes pins, for each machineVersion, the shape of the messages a CLI
// and a running machine (and its runners) of two builds exchange.
var wireShapes = map[int]string{
	4: "da8bf5754d8d5a08",
}

// TestWireShape fails when a message of the machine protocol changes shape
// (a field added, removed, renamed, retyped or moved) without a new
// machineVersion: a CLI of one build would talk to the running machine of
// another in two dialects.
func TestWireShape(t *testing.T) {
	var b strings.Builder
	for _, v := range []any{initConfig{}, statusMsg{}, machineRequest{}, machineReply{}, machineGate{}} {
		shape(&b, reflect.TypeOf(v), map[reflect.Type]bool{})
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	got := hex.EncodeToString(sum[:8])
	want, ok := wireShapes[machineVersion]
	if !ok || got != want {
		t.Fatalf("the machine protocol's messages have the shape %s, pinned for version %d as %q: if they changed, raise machineVersion (machineinit.go) and pin the shape under the new version here; the shape is\n%s", got, machineVersion, want, b.String())
	}
}

// shape writes the shape of type t: its kind, and a struct's exported
// fields (the others are not sent) in order with their names and shapes;
// a struct of another module (time.Time) by its name.
func shape(b *strings.Builder, t reflect.Type, seen map[reflect.Type]bool) {
	switch t.Kind() {
	case reflect.Struct:
		if !strings.HasPrefix(t.PkgPath(), "github.com/agentbox/sandbox/") || seen[t] {
			fmt.Fprintf(b, "%s", t.String())
			return
		}
		seen[t] = true
		fmt.Fprintf(b, "%s{", t.String())
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fmt.Fprintf(b, "%s ", f.Name)
			shape(b, f.Type, seen)
			b.WriteString(";")
		}
		b.WriteString("}")
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		fmt.Fprintf(b, "%s(", t.Kind())
		shape(b, t.Elem(), seen)
		b.WriteString(")")
	case reflect.Map:
		b.WriteString("map(")
		shape(b, t.Key(), seen)
		b.WriteString(",")
		shape(b, t.Elem(), seen)
		b.WriteString(")")
	default:
		b.WriteString(t.Kind().String())
	}
}
