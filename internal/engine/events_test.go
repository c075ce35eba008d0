package engine

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/agentbox/sandbox/internal/config"
	"github.com/agentbox/sandbox/internal/events"
	"github.com/agentbox/sandbox/internal/events/eventstest"
	"github.com/agentbox/sandbox/internal/output"
)

func TestSetupEventsMaskedBeforeEncoding(t *testing.T) {
	t.Parallel()
	const secret = `k<&"s3cr3t-value`
	m := config.NewMasker(secret)
	v := eventstest.New(t)
	tests := []struct {
		name   string
		writes []string
		want   string // the text of the events, joined
		b64    bool   // an event carries output_b64
	}{
		{"whole", []string{"token " + secret + "\n"}, "token ***\n", false},
		{"split across writes", []string{"token k<&\"s3c", "r3t-value\n"}, "token ***\n", false},
		{"character split across writes", []string{"caf\xc3", "\xa9\n"}, "café\n", false},
		{"binary", []string{"\xff\x00"}, "\ufffd\x00", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []Event
			e := New(Options{MaskWriter: m.Writer, Mask: m.String, Events: func(ev Event) { got = append(got, ev) }})
			current := &events.CurrentCall{}
			current.Set("c1")
			w := (&Session{engine: e}).setupEvents(current)
			for _, s := range tt.writes {
				w.Write([]byte(s))
			}
			w.Close()
			var text strings.Builder
			var raw []byte
			sawB64 := false
			for _, ev := range got {
				text.WriteString(ev.Output)
				if ev.OutputB64 != "" {
					sawB64 = true
					b, _ := base64.StdEncoding.DecodeString(ev.OutputB64)
					raw = append(raw, b...)
				}
				for _, pe := range ev.Public() {
					line, err := output.Marshal(pe)
					if err != nil {
						t.Fatal(err)
					}
					if err := v.Line(line); err != nil {
						t.Fatal(err)
					}
					if strings.Contains(string(line), "s3cr3t") || pe.CallID != "c1" {
						t.Fatalf("secret in encoded event, or not of call c1: %s", line)
					}
				}
			}
			if text.String() != tt.want || sawB64 != tt.b64 {
				t.Fatalf("events say %q (base64 %v), want %q (base64 %v)", text.String(), sawB64, tt.want, tt.b64)
			}
			if tt.b64 && string(raw) != strings.Join(tt.writes, "") {
				t.Fatalf("output_b64 decodes to %q", raw)
			}
		})
	}
}
