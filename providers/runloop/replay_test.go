package runloop

import (
	"io"
	"strings"
	"testing"
)

func TestReplay(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		read   int // bytes read before again
		wantOK bool
	}{
		{"nothing read", 4, 0, true},
		{"part read", 4, 3, true},
		{"up to the limit", 4, 4, true},
		{"past the limit", 4, 5, false},
	}
	const data = "abcdefgh"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp := &replay{r: strings.NewReader(data), limit: tc.limit}
			if _, err := io.ReadFull(rp, make([]byte, tc.read)); err != nil {
				t.Fatalf("reading %d bytes: %v", tc.read, err)
			}
			r, ok := rp.again()
			if ok != tc.wantOK {
				t.Fatalf("again() ok = %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			got, err := io.ReadAll(r)
			if err != nil || string(got) != data {
				t.Errorf("again() reads %q, %v; want %q", got, err, data)
			}
		})
	}
}
