package local

import (
	"bytes"
	"testing"

	"github.com/agentbox/sandbox/providers"
)

func TestSmoke(t *testing.T) {
	p, err := New(providers.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	res, err := p.Exec(t.Context(), info.ID, providers.ExecRequest{Shell: "id; pwd; ls /; cat /proc/self/status | grep -i cap; hostname; ls /dev; echo $HOME; env", Stdout: &out, Stderr: &errb})
	t.Logf("res=%+v err=%v\nstdout:\n%s\nstderr:\n%s", res, err, out.String(), errb.String())
}
