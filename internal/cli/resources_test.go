package cli

import "testing"

func TestParseMemoryMB(t *testing.T) {
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
		{in: "512k", bad: true},
		{in: "0", bad: true},
		{in: "-1g", bad: true},
		{in: "lots", bad: true},
		{in: "", bad: true},
	}
	for _, tc := range tests {
		got, err := parseMemoryMB(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("parseMemoryMB(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseMemoryMB(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
