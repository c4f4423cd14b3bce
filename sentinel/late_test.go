package sentinel

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// skipAll feeds s to a Late for n in pieces of at most size bytes, then
// ends the stream, and returns what it passes on.
func skipAll(n Nonce, s string, size int) string {
	var l Late
	l.Reset(n)
	var b strings.Builder
	for len(s) > 0 {
		k := min(size, len(s))
		held, rest := l.Skip([]byte(s[:k]))
		b.Write(held)
		b.Write(rest)
		s = s[k:]
	}
	b.Write(l.Release())
	return b.String()
}

func TestLate(t *testing.T) {
	n := Nonce("0123456789abcdef01234567")
	m := string(n.Marker())
	other := string(Nonce("0123456789abcdef0123456x").Marker())
	long := "3 hB /" + strings.Repeat("d", maxTrailer) + "\x00after"
	for _, tc := range []struct{ name, in, want string }{
		{"late marker", m + "7 hB /tmp\x00out\n", "out\n"},
		{"late marker alone", m + "0 hB /\x00", ""},
		{"no marker", "out\n", "out\n"},
		{"another nonce", other + "0 hB /\x00out", other + "0 hB /\x00out"},
		{"a lead byte", "\x1e\x1eCONCH", "\x1e\x1eCONCH"},
		{"part of the marker", m[:10] + "x", m[:10] + "x"},
		{"a lead byte alone", "\x1e", "\x1e"},
		{"part of the marker alone", m[:10], m[:10]},
		{"a late marker cut in its trailer", m + "0 hB", ""},
		{"a marker later", "out" + m + "0 hB /\x00", "out" + m + "0 hB /\x00"},
		{"only the first", m + "0 hB /\x00" + m + "1 hB /\x00", m + "1 hB /\x00"},
		{"a trailer past the bound", m + long, "after"},
	} {
		for _, size := range []int{1, 2, 7, 1 << 20} {
			require.Equal(t, tc.want, skipAll(n, tc.in, size), "%s, pieces of %d", tc.name, size)
		}
	}
	require.Equal(t, m+"0 hB /\x00", skipAll("", m+"0 hB /\x00", 3), "no nonce: nothing dropped")
}
