package probes

import "testing"

func TestSizeStringAndParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
		str  string
	}{
		{"4KiB", 4 * KiB, "4KiB"},
		{"128KiB", 128 * KiB, "128KiB"},
		{"1MiB", MiB, "1MiB"},
		{"8 MiB", 8 * MiB, "8MiB"},
		{"1GiB", GiB, "1GiB"},
		{"1536", 1536, "1536B"},
		{"2048B", 2 * KiB, "2KiB"},
		{"1024KiB", MiB, "1MiB"},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want || got.String() != tc.str {
			t.Errorf("ParseSize(%q) = %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.str)
		}
	}
	for _, bad := range []string{"", "4kb", "-1", "1.5MiB", "MiB", "99999999GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q): want an error", bad)
		}
	}
}
