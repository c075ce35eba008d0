package main

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona"
	"github.com/agentbox/sandbox/providers/daytona/daytonaconf"
	"github.com/agentbox/sandbox/providers/e2b"
	"github.com/agentbox/sandbox/providers/e2b/e2bconf"
	"github.com/agentbox/sandbox/providers/fake"
	"github.com/agentbox/sandbox/providers/modal"
	"github.com/agentbox/sandbox/providers/modal/modalconf"
	"github.com/agentbox/sandbox/providers/runloop"
	"github.com/agentbox/sandbox/providers/runloop/runloopconf"
)

// TestCloudRegistrations: the registration the program sandbox hands
// over (package ...conf) describes each cloud provider as this program's
// does, which builds it and its emulator, an http.Handler that `serve`
// serves.
func TestCloudRegistrations(t *testing.T) {
	for _, tc := range []struct {
		built, handed providers.Registration
	}{
		{e2b.Registration(), e2bconf.Registration().HandedOver(providers.CloudProgram)},
		{daytona.Registration(), daytonaconf.Registration().HandedOver(providers.CloudProgram)},
		{runloop.Registration(), runloopconf.Registration().HandedOver(providers.CloudProgram)},
		{modal.Registration(), modalconf.Registration().HandedOver(providers.CloudProgram)},
	} {
		t.Run(tc.built.Name, func(t *testing.T) {
			if tc.handed.Program != providers.CloudProgram || tc.handed.New != nil || tc.handed.Emulator != nil {
				t.Errorf("handed over: program %q, New %v, Emulator %v; want %q and neither", tc.handed.Program, tc.handed.New != nil, tc.handed.Emulator != nil, providers.CloudProgram)
			}
			if tc.built.Program != "" || tc.built.New == nil || tc.built.Emulator == nil {
				t.Fatalf("built: program %q, New %v, Emulator %v; want no program and both", tc.built.Program, tc.built.New != nil, tc.built.Emulator != nil)
			}
			for _, f := range []struct {
				name       string
				got, wants any
			}{
				{"name", tc.handed.Name, tc.built.Name},
				{"description", tc.handed.Description, tc.built.Description},
				{"variables", tc.handed.Env, tc.built.Env},
				{"capabilities", tc.handed.Capabilities, tc.built.Capabilities},
			} {
				if !reflect.DeepEqual(f.got, f.wants) {
					t.Errorf("%s: handed over %v, built %v", f.name, f.got, f.wants)
				}
			}
			em, err := tc.built.Emulator(fake.New(), providers.EmulatorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer em.Close()
			if _, ok := em.(http.Handler); !ok {
				t.Errorf("the emulator %T is no http.Handler", em)
			}
		})
	}
}
