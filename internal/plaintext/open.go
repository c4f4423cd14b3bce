package plaintext

import "unicode/utf8"

// MaxUnfinished bounds the escape sequence [Unfinished] finds left open at
// the end of output: one longer than that (an OSC string that never ends)
// is not held back, lest it hold back the output after it for good.
const MaxUnfinished = 4 << 10

// Unfinished returns how many bytes at the end of b are an escape sequence
// not finished yet (ESC [ 3 of ESC [ 3 1 m, an OSC string without its end),
// from the ESC or C1 control that starts it; 0 when b ends outside one, or
// inside one that starts more than MaxUnfinished bytes before its end.
// Output cut there shows no fragment of the sequence as text, as String of
// the rest would: the rest is to be read from that start.
//
// An ESC or a C1 control starts a sequence whatever state came before it
// (inside a string, ESC \ ends it and any other ESC starts anew), so the
// last one decides.
func Unfinished(b []byte) int {
	lo := max(len(b)-MaxUnfinished, 0)
	for i := len(b) - 1; i >= lo; i-- {
		if !startsSequence(b[i:]) {
			continue
		}
		var r Renderer
		r.Write(b[i:])
		if r.st == ground {
			return 0
		}
		return len(b) - i
	}
	return 0
}

// SequenceEnd returns the length of the escape sequence b starts with, 0
// when b starts with none or it does not end within b (nor within
// MaxUnfinished bytes).
func SequenceEnd(b []byte) int {
	if !startsSequence(b) {
		return 0
	}
	var r Renderer
	for i := range min(len(b), MaxUnfinished) {
		r.Write(b[i : i+1])
		if r.st == ground && r.npend == 0 {
			return i + 1
		}
	}
	return 0
}

// startsSequence reports whether b starts with an ESC or a C1 control as a
// decoded code point (see the package comment).
func startsSequence(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	if b[0] == esc {
		return true
	}
	c, _ := utf8.DecodeRune(b)
	return c >= 0x80 && c < 0xa0
}
