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
