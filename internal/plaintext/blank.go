package plaintext

import "bytes"

// Blanks at the end of a piece of output are text or nothing according to
// what follows them: spaces before more text on their line show, spaces
// before its end do not. A reader that cuts output into pages, each
// rendered on its own, cuts before them ([BlankTail]), so that the next
// page renders them with what follows; or, for a page of nothing else,
// looks at what follows them ([BlankHead]).

// BlankTail returns where the blanks at the end of b start: the longest
// end of b made of spaces and of escape sequences that only change colours
// or move the cursor forward (CSI m, CSI C), read as text and sequences, as
// from b's start. It returns len(b) when b ends with none, or inside a
// sequence or a string (an OSC title's spaces are no blanks).
func BlankTail(b []byte) int {
	// Read backwards, a space may be a CSI's intermediate byte (ESC [ 1 SP
	// q), and an ESC [ m the end of an OSC string's body: the blanks
	// start only where b is outside any sequence.
	start := len(b)
	for i := len(b); i > 0; {
		if b[i-1] == ' ' {
			i--
		} else if i = blankSequenceBefore(b[:i]); i < 0 {
			break
		}
		if Open(b[:i]) == nil {
			start = i
		}
	}
	return start
}

// BlankHead returns how many bytes at the start of b are blanks (see
// [BlankTail]), b read from outside any sequence.
func BlankHead(b []byte) int {
	i := 0
	for i < len(b) {
		if b[i] == ' ' {
			i++
			continue
		}
		n := SequenceEnd(b[i:])
		if n == 0 || !blankSequence(b[i:i+n]) {
			break
		}
		i += n
	}
	return i
}

// blankSequenceBefore returns where the blank sequence (see
// blankSequence) that b ends with starts, -1 when b ends with none.
func blankSequenceBefore(b []byte) int {
	lo := max(len(b)-(maxParams+3), 0) // introducer, parameters, final byte
	for _, intro := range [][]byte{{esc, '['}, {0xc2, 0x9b}} {
		j := bytes.LastIndex(b[lo:], intro)
		if j < 0 {
			continue
		}
		j += lo
		if SequenceEnd(b[j:]) == len(b)-j && blankSequence(b[j:]) {
			return j
		}
	}
	return -1
}

// blankSequence reports whether seq, a whole escape sequence, is a CSI
// that shows nothing itself and moves the cursor, if at all, forward: a
// colour change (m) or a move right (C), with numeric parameters.
func blankSequence(seq []byte) bool {
	if len(seq) < 3 || !bytes.HasPrefix(seq, []byte{esc, '['}) && !bytes.HasPrefix(seq, []byte{0xc2, 0x9b}) {
		return false
	}
	params := seq[2 : len(seq)-1]
	if f := seq[len(seq)-1]; f != 'm' && f != 'C' {
		return false
	}
	for _, c := range params {
		if (c < '0' || c > '9') && c != ';' && c != ':' {
			return false
		}
	}
	return true
}
