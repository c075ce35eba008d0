package config

import (
	"encoding/json"
	"testing"

	"github.com/agentbox/sandbox/internal/output"
)

func TestMaskerJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		secret string
	}{
		{"plain", "s3cr3t-value"},
		{"html characters", `k<&"s3cr3t`},
		{"backslash", `p\ss\word`},
		{"control character", "tab\tbed"},
		{"bidi", "a\u202esecret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := NewMasker(tt.secret)
			v := map[string]string{"data": "before " + tt.secret + " after"}
			ours, err := output.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			std, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{string(ours), string(std)} {
				got := m.JSON(line)
				var back map[string]string
				if err := json.Unmarshal([]byte(got), &back); err != nil {
					t.Fatalf("masked line %q is not JSON: %v", got, err)
				}
				if back["data"] != "before *** after" {
					t.Fatalf("JSON(%q) decodes to %q", line, back["data"])
				}
			}
		})
	}
	if got := (&Masker{}).JSON(`{"a":"b"}`); got != `{"a":"b"}` {
		t.Fatalf("empty masker changed %q", got)
	}
}
