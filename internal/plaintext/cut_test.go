package plaintext

import "testing"

func TestCut(t *testing.T) {
	const s = "aé€b" // 1 + 2 + 3 + 1 bytes
	for _, tc := range []struct {
		n          int
		end, start string
	}{
		{-1, "", ""},
		{0, "", ""},
		{2, "a", "b"},
		{3, "aé", "b"},
		{4, "aé", "€b"},
		{6, "aé€", "é€b"},
		{7, s, s},
		{99, s, s},
	} {
		if got := CutEnd(s, tc.n); got != tc.end {
			t.Errorf("CutEnd(%q, %d) = %q, want %q", s, tc.n, got, tc.end)
		}
		if got := CutStart(s, tc.n); got != tc.start {
			t.Errorf("CutStart(%q, %d) = %q, want %q", s, tc.n, got, tc.start)
		}
	}
}
