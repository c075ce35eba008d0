package cli

import (
	"strings"
	"testing"
)

func TestParseSizeMB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
		bad  bool
	}{
		{in: "512", want: 512},
		{in: "512m", want: 512},
		{in: "512MiB", want: 512},
		{in: "2g", want: 2048},
		{in: "1.5G", want: 1536},
		{in: "2048k", want: 2},
		{in: "1t", want: 1 << 20},
		{in: "512k", bad: true},
		{in: "0", bad: true},
		{in: "-1g", bad: true},
		{in: "lots", bad: true},
		{in: "", bad: true},
	}
	for _, tc := range tests {
		got, err := parseSizeMB("--disk", tc.in)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "--disk") {
				t.Errorf("parseSizeMB(%q) = %d, %v; want an error naming the flag", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseSizeMB(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
