package process

import (
	"strings"

	"github.com/conchsh/conch/internal/plaintext"
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
	return strings.Clone(plaintext.CutEnd(s, KeptText)), len(s)
}

// ArgCost is what the daemon counts for each element of an argv beyond its
// bytes: the string's header, and its place in the copies made of the argv
// (the record's, the exec's). 300,000 empty arguments, 300 KB of text,
// held 7-9 MB each in the records that kept them.
const ArgCost = 32

// ArgvCost is the cost of argv: its bytes, and ArgCost for each element.
func ArgvCost(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a) + ArgCost
	}
	return n
}

// KeepArgv returns the elements of argv whose cost (see ArgvCost) fits in
// KeptText, in a slice of their own when that is not all of them, and the
// number of elements argv has.
func KeepArgv(argv []string) (kept []string, n int) {
	cost := 0
	for i, a := range argv {
		cost += len(a) + ArgCost
		if cost > KeptText {
			kept = make([]string, i)
			for j := range kept {
				kept[j] = strings.Clone(argv[j])
			}
			return kept, len(argv)
		}
	}
	return argv, len(argv)
}
