package plaintext

import "unicode/utf8"

// CutEnd returns the longest start of s of at most n bytes that ends at a
// character boundary: a bounded answer never ends inside a character.
func CutEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CutStart returns the longest end of s of at most n bytes that starts at
// a character boundary.
func CutStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - max(n, 0)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// IncompleteTail returns how many bytes at the end of b begin a character
// that is valid so far but not yet whole: 0 when b ends at a character's
// end. A start that can no longer become valid (a bad first or second byte)
// is whole: it counts as its own bytes, not held for more.
func IncompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
	}
	return 0
}
