package plaintext

import (
	"bytes"
	"unicode/utf8"
)

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

// Open returns the escape sequence b leaves open at its end, however long
// ago it started, as the few bytes that put a new [Renderer] in the state
// that b leaves one in: ESC; ESC and an intermediate byte; CSI with the
// parameters read (past maxParams of them, one more, to keep it too long
// to act); or the start of an OSC string, or of a DCS, SOS, PM or APC
// string, whose body is dropped, however long. It returns nil when b ends
// outside any sequence. Rendering what Open returns and then the bytes that
// follow b drops the sequence's rest as rendering b and those bytes together
// does, with no need to keep b: a reader that goes on later from the end
// of b carries Open(b) instead of holding back the whole sequence.
//
// Open of what Open returned is the same bytes.
func Open(b []byte) []byte {
	// The state after an ESC, CAN, SUB or C1 control depends on nothing
	// before it; after the last one, nothing starts a sequence again.
	i := lastRestart(b)
	if i < 0 {
		return nil
	}
	var r Renderer
	for j := i; j < len(b); {
		switch r.st {
		case ground:
			if j > i {
				return nil
			}
		case oscStr: // only BEL can end it now
			k := bytes.IndexByte(b[j:], bel)
			if k < 0 {
				return r.open()
			}
			j += k
		case ctrlStr: // nothing can end it now
			return r.open()
		}
		_, n := utf8.DecodeRune(b[j:])
		r.Write(b[j : j+n])
		j += n
	}
	return r.open()
}

// Then returns what output leaves open that a reader carrying open (what
// Open gave for the output before it) reads b of: Open of open and b
// together, without joining them when b restarts a sequence of its own.
func Then(open, b []byte) []byte {
	if len(open) == 0 || lastRestart(b) >= 0 {
		return Open(b)
	}
	return Open(append(open[:len(open):len(open)], b...))
}

// Carried is what output leaves open at its end (see Open), in all of it
// and in its stdout and stderr apart, carried on frame by frame (see Then):
// a reader that starts rendering at a cursor starts from it, as the whole
// output's rendering would be there, rather than show the rest of a
// sequence cut at the cursor as text. Each also ends with the first bytes
// of a character the output ends inside of (see IncompleteTail), so that
// the rest of it, after the cursor, renders as the character whole rather
// than as U+FFFD.
type Carried struct {
	All, Out, Err []byte
	// Cut says that the output just before was not all read (retention
	// dropped it, or the read failed): continuation bytes that start what
	// follows may be the rest of a character whose first bytes are not
	// known (see RestLen).
	Cut bool

	all, out, err carry
}

// carry is what output leaves open: a sequence, as Open gives it, and the
// first bytes of a character it ends inside of.
type carry struct{ open, char []byte }

// add carries c on over data and returns what it leaves open, the
// sequence then the character's first bytes.
func (c *carry) add(data []byte) []byte {
	c.open = Then(c.open, data)
	// IncompleteTail looks at the last UTFMax-1 bytes: those of data, and
	// of the start carried when data is shorter.
	tail := append(c.char[:len(c.char):len(c.char)], data[max(len(data)-(utf8.UTFMax-1), 0):]...)
	c.char = tail[len(tail)-IncompleteTail(tail):]
	if len(c.char) == 0 {
		return c.open
	}
	return append(c.open[:len(c.open):len(c.open)], c.char...)
}

// CarriedFrames is how many frames before a cursor a reader carries on
// over: a sequence is seldom cut into more.
const CarriedFrames = 16

// Add carries c on over data, a frame of stderr or not.
func (c *Carried) Add(data []byte, stderr bool) {
	c.All = c.all.add(data)
	if stderr {
		c.Err = c.err.add(data)
	} else {
		c.Out = c.out.add(data)
	}
}

// RestLen returns how many bytes at the start of b are continuation bytes
// (at most UTFMax-1): the rest of a character whose first bytes came before
// b. Output read from a cursor whose output before is not known (dropped by
// retention, or not read) drops them rather than render them as U+FFFD.
func RestLen(b []byte) int {
	n := 0
	for n < len(b) && n < utf8.UTFMax-1 && !utf8.RuneStart(b[n]) {
		n++
	}
	return n
}

// lastRestart returns the index in b of the last ESC, CAN, SUB or C1
// control (a decoded U+0080–U+009F: 0xc2 and a byte 0x80–0x9f), -1 when
// there is none.
func lastRestart(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		switch c := b[i]; {
		case c == esc, c == can, c == sub:
			return i
		case c >= 0x80 && c < 0xa0 && i > 0 && b[i-1] == 0xc2:
			return i - 1
		}
	}
	return -1
}

// open is the bytes that put a new Renderer in r's parser state, nil in
// ground (see [Open]).
func (r *Renderer) open() []byte {
	switch r.st {
	case escape:
		return []byte{esc}
	case escInter:
		return []byte{esc, '('}
	case csi:
		b := append([]byte{esc, '['}, r.params...)
		if r.long {
			b = append(b, '0')
		}
		return b
	case oscStr:
		return []byte{esc, ']'}
	case ctrlStr:
		return []byte{esc, 'P'}
	}
	return nil
}
