package process

import (
	"strings"
	"unicode/utf8"
)

// KeptText is how much of a command's text (a shell command, a code cell)
// its record keeps: a record may be kept long after the command ran, and
// the text only describes it.
const KeptText = 64 << 10

// KeepText returns the first KeptText bytes of s (cut at a UTF-8 character
// boundary), copied so that they do not hold the rest in memory, and the
// length of s.
func KeepText(s string) (kept string, n int) {
	if len(s) <= KeptText {
		return s, len(s)
	}
	cut := KeptText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.Clone(s[:cut]), len(s)
}
