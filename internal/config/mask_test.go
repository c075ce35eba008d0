package config

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
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

// TestSplitFindsSecrets: split, which finds the secrets with bytes.Index up
// to its tail, masks and holds back exactly what going a byte at a time over
// all of the input (splitBytes from 0, split as it was first written) does.
func TestSplitFindsSecrets(t *testing.T) {
	t.Parallel()
	sets := [][]string{
		{"secret"},
		{"sk-abcd1234", "sk-abcd"}, // one the other's prefix
		{"abcd", "bcde", "xyzw"},   // overlapping, several first bytes
		{"ééé-token", "日本語のひみつ", "aaaa"}, // first bytes past ASCII
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, set := range sets {
		m := NewMasker(set...)
		alphabet := []byte("abcdexyzw-sk1234 \n")
		for _, s := range set {
			alphabet = append(alphabet, s...)
		}
		for range 2000 {
			var b []byte
			for range rng.IntN(80) {
				if rng.IntN(6) == 0 {
					sec := set[rng.IntN(len(set))]
					b = append(b, sec[:1+rng.IntN(len(sec))]...) // whole or a start
				} else {
					b = append(b, alphabet[rng.IntN(len(alphabet))])
				}
			}
			gotOut, gotRest := m.split([]byte("x"), b)
			gotOut = gotOut[1:]
			wantOut, wantRest := m.splitBytes(&bytes.Buffer{}, b, 0)
			if !bytes.Equal(gotOut, wantOut) || !bytes.Equal(gotRest, wantRest) {
				t.Fatalf("secrets %q, input %q: split %q + %q, byte by byte %q + %q", set, b, gotOut, gotRest, wantOut, wantRest)
			}
		}
	}
}

// BenchmarkMaskWriter streams output with no secret in it through a
// masker's writer, as exec does when the sandbox's environment holds one.
func BenchmarkMaskWriter(b *testing.B) {
	m := NewMasker("sk-abcdef123456", "another-secret-value")
	chunk := bytes.Repeat([]byte("some ordinary output of a command, line after line\n"), 1300)
	w := m.Writer(io.Discard)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		w.Write(chunk)
	}
}
