package wire

import (
	"bytes"
	"testing"
)

func TestDemuxer(t *testing.T) {
	out := []byte{1, 1, 1}
	errm := []byte{2, 2, 2}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name             string
		frames           [][]byte
		wantOut, wantErr string
	}{
		{"one frame", [][]byte{join(out, []byte("a\n"), errm, []byte("e\n"), out, []byte("b\n"))}, "a\nb\n", "e\n"},
		{"marker split across frames", [][]byte{join(out, []byte("a"), errm[:1]), join(errm[1:], []byte("e"))}, "a", "e"},
		{"marker split after two bytes", [][]byte{join(out, []byte("x"), out[:2]), join(out[2:], []byte("y"))}, "xy", ""},
		{"lone control bytes kept as data", [][]byte{join(out, []byte{1, 'z'}), {1}}, "\x01z\x01", ""},
		{"nothing before the first marker", [][]byte{join([]byte("junk"), errm, []byte("e"))}, "", "e"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o, e bytes.Buffer
			d := &Demuxer{Stdout: &o, Stderr: &e}
			for _, f := range tc.frames {
				if _, err := d.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			if o.String() != tc.wantOut || e.String() != tc.wantErr {
				t.Errorf("stdout %q stderr %q, want %q and %q", o.String(), e.String(), tc.wantOut, tc.wantErr)
			}
		})
	}
}
