package plaintext

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCutKeepsBlanksBeforeTheCursor renders output that stops inside a
// line: its blanks up to the cursor are text, those past it, which text
// after the cursor writes over, are not.
func TestCutKeepsBlanksBeforeTheCursor(t *testing.T) {
	for in, want := range map[string]string{
		"w1 w2 ":          "w1 w2 ",
		"line2 € ":        "line2 € ",
		"a\x1b[3C":        "a   ",
		"a \x1b[31m":      "a ",
		"abc  \r":         "abc",
		"abc\r\n  ":       "abc\n  ",
		"done\n":          "done\n",
		"ab   \x1b[3D":    "ab",
		"x\ty \x1b]0;t i": "x\ty ",
	} {
		text, n := Bounded([]byte(in), 100, true)
		require.Equal(t, want, text, "%q", in)
		require.Equal(t, len(want), n, "%q", in)
		require.False(t, Fits([]byte(in), len(want)-1, true), "%q", in)
	}
}

// TestBlankTail finds the blanks a page ends with: spaces, colours and
// moves right, read from outside any sequence; never a space inside a
// sequence or a string.
func TestBlankTail(t *testing.T) {
	for in, want := range map[string]int{
		"w1 w2 ":              5,
		"w1 w2":               5,
		"a  \x1b[0m \x1b[3C ": 1,
		"a \xc2\x9b1m":        1,
		"   ":                 0,
		"a\x1b[1 ":            5, // a CSI's intermediate byte
		"a\x1b]0;t i ":        9,
		"a\x1b]0;t\x1b[0m ":   10, // the ESC [ ends the string, and starts no blanks
		"a\x1b[?25l ":         7,  // shows nothing, but is no colour
	} {
		require.Equal(t, want, BlankTail([]byte(in)), "%q", in)
	}
	for in, want := range map[string]int{
		"  \x1b[0m \nx": 7,
		"\x1b[31mred":   5,
		"x  ":           0,
		"\x1b[2K ":      0,
	} {
		require.Equal(t, want, BlankHead([]byte(in)), "%q", in)
	}
}
