// Package plaintext renders terminal output as plain text, line by line, for
// a reader that is a model: escape sequences are removed and carriage-return
// and backspace overwrites are applied, so a progress bar's hundred redraws
// read as its last state. It is not a screen: a full-screen program (vim,
// top, a curses interface) reads as its text in the order it was drawn, not
// as its final screen.
//
// The model is one line of cells at a time, one cell per rune. What a
// terminal does within a line is applied: "\r" returns to column 0 and later
// text overwrites, "\b" moves back one cell, CSI n C, D, G and ` move the
// cursor, CSI K, X, P and @ erase, delete and insert cells. "\n" (and "\v",
// "\f") ends the line and returns to column 0, as a terminal with the
// default output processing does. Everything else that moves between lines or
// changes how text looks (CSI A, B, H, J, SGR colours, modes) is dropped, as
// are OSC, DCS, SOS, PM and APC strings, two-byte escape sequences and the
// other control characters. A tab is kept as one cell holding "\t".
//
// Limits: a wide character (CJK, most emoji) takes one cell, not two, and a
// combining mark takes a cell of its own, so a backspace over either lands
// one cell off what a terminal shows. Cells the cursor skipped or erased read
// as spaces inside a line; spaces at the end of a line, written or not, are
// dropped, as a screen does not show them (but see [Bound]'s Cut, for
// output that stops inside a line).
//
// The input is taken as UTF-8; invalid bytes read as U+FFFD, one for each
// maximal subpart (see [InvalidLen]), as the API's text fields and the
// SDKs' decoders make them. The 8-bit C1
// controls are recognised only as decoded code points (U+009B CSI, U+009D
// OSC, U+009C ST, ...), never as raw bytes: 0x9b or 0x9c alone is a UTF-8
// continuation byte, part of text like "Ü" (c3 9c), so reading raw bytes as
// C1 would eat ordinary text.
package plaintext

import (
	"strings"
	"unicode/utf8"
)

// width is the column the cursor movements stop at, as at the right edge of
// a screen, unless the line's text already reaches further; so CSI 999999999 C
// cannot make a line of a billion blank cells.
const width = 1024

// String renders b as a whole: the plain text of what a terminal printed
// as b, line by line. An incomplete UTF-8 sequence at the end of b reads as
// U+FFFD.
func String(b []byte) string {
	var r Renderer
	r.Write(b)
	r.Flush()
	return r.String()
}

// A Renderer renders terminal output fed to it in pieces, such as the
// frames of a process's log in order, with the same result as [String] of
// the pieces joined. An escape sequence or a UTF-8 character may be split
// across pieces. The zero Renderer is ready to use; it keeps all the text it
// renders, so the caller bounds what it feeds.
type Renderer struct {
	done    strings.Builder // finished lines, each ending in "\n"
	cells   []rune          // the current line; blank cells hold 0
	col     int             // the cursor's cell in the current line
	st      state
	params  []byte  // parameter and intermediate bytes of the CSI being read
	long    bool    // the CSI being read has more than maxParams of them
	pending [3]byte // the start of a UTF-8 character split across writes
	npend   int
}

// state is where the parser is in an escape sequence.
type state uint8

const (
	ground   state = iota // text
	escape                // after ESC
	escInter              // after ESC and an intermediate byte (ESC ( B)
	csi                   // after ESC [ or U+009B
	oscStr                // in an OSC string, ended by BEL or ST
	ctrlStr               // in a DCS, SOS, PM or APC string, ended by ST
)

const blank = 0 // a cell skipped or erased; input NULs are dropped, so never text

// maxParams bounds the bytes kept of one CSI's parameters; a longer one is
// still read to its end, then dropped.
const maxParams = 32

// Write renders p. It never fails; the error is there to make a Renderer an
// io.Writer.
func (r *Renderer) Write(p []byte) (int, error) {
	n := len(p)
	for r.npend > 0 && len(p) > 0 {
		p = r.completePending(p)
	}
	for len(p) > 0 {
		c := p[0]
		if c >= 0x20 && c < del && r.st == ground { // most of any output
			r.put(rune(c))
			p = p[1:]
			continue
		}
		if c < utf8.RuneSelf {
			r.rune(rune(c))
			p = p[1:]
			continue
		}
		if !utf8.FullRune(p) {
			r.npend = copy(r.pending[:], p)
			break
		}
		ru, size := utf8.DecodeRune(p)
		if ru == utf8.RuneError && size == 1 {
			size = InvalidLen(p) // one U+FFFD for the maximal subpart
		}
		r.rune(ru)
		p = p[size:]
	}
	return n, nil
}

// completePending decodes the character whose start the last Write held
// back, with the bytes of p it needs, and returns the rest of p.
func (r *Renderer) completePending(p []byte) []byte {
	var buf [utf8.UTFMax]byte
	k := copy(buf[:], r.pending[:r.npend])
	k += copy(buf[k:], p)
	if !utf8.FullRune(buf[:k]) {
		r.npend = copy(r.pending[:], buf[:k]) // p was shorter than what is missing
		return nil
	}
	ru, size := utf8.DecodeRune(buf[:k])
	if ru == utf8.RuneError && size == 1 {
		size = InvalidLen(buf[:k])
	}
	r.rune(ru)
	if size <= r.npend { // invalid: held bytes were consumed, retry the rest
		r.npend = copy(r.pending[:], r.pending[size:r.npend])
		return p
	}
	p = p[size-r.npend:]
	r.npend = 0
	return p
}

// Flush renders an incomplete UTF-8 sequence held back at the end of what
// was written as U+FFFD, one for each maximal subpart, as [String] does at
// the end of its input. Call it once the output is complete.
func (r *Renderer) Flush() {
	for p := r.pending[:r.npend]; len(p) > 0; p = p[InvalidLen(p):] {
		r.rune(utf8.RuneError)
	}
	r.npend = 0
}

// String returns the text rendered so far: the finished lines, each ending
// in "\n", then the current line, if it holds anything, without one.
func (r *Renderer) String() string {
	if lineEnd(r.cells) == 0 {
		return r.done.String()
	}
	var b strings.Builder
	b.Grow(r.done.Len() + len(r.cells))
	b.WriteString(r.done.String())
	writeLine(&b, r.cells)
	return b.String()
}

// Lines returns the lines finished since the last call, each ending in
// "\n", and forgets them: a caller that prints the text as output comes
// keeps only the current line, which [Renderer.String] then returns.
func (r *Renderer) Lines() string {
	s := r.done.String()
	r.done.Reset()
	return s
}

// Len returns the length in bytes of what [Renderer.String] would return,
// give or take the current line's blank cells.
func (r *Renderer) Len() int { return r.done.Len() + len(r.cells) }

// newline finishes the current line.
func (r *Renderer) newline() {
	writeLine(&r.done, r.cells)
	r.done.WriteByte('\n')
	r.cells = r.cells[:0]
	r.col = 0
}

// lineEnd returns the number of cells of line up to its last one that shows
// something: the spaces a program wrote to pad over a longer line it
// overwrote show as little as the cells it never wrote.
func lineEnd(line []rune) int {
	n := len(line)
	for n > 0 && (line[n-1] == blank || line[n-1] == ' ') {
		n--
	}
	return n
}

// writeLine writes line to b, blanks inside it as spaces, blanks at its end
// not at all.
func writeLine(b *strings.Builder, line []rune) { writeCells(b, line, lineEnd(line)) }

// cutString is [Renderer.String] for output that stops inside a line, more
// of which may follow: the current line keeps its blanks up to the cursor,
// where that text goes ("w1 " then "w2" is "w1 w2", not "w1w2"). Blanks
// past the cursor are still dropped: text after the cursor writes over
// them.
func (r *Renderer) cutString() string {
	n := max(lineEnd(r.cells), r.col)
	if n == 0 {
		return r.done.String()
	}
	var b strings.Builder
	b.Grow(r.done.Len() + n)
	b.WriteString(r.done.String())
	writeCells(&b, r.cells, n)
	return b.String()
}

// writeCells writes the first n cells of line to b, blanks as spaces, and
// spaces for the cells past its end.
func writeCells(b *strings.Builder, line []rune, n int) {
	for _, c := range line[:min(n, len(line))] {
		switch {
		case c == blank:
			b.WriteByte(' ')
		case c < utf8.RuneSelf:
			b.WriteByte(byte(c))
		default:
			b.WriteRune(c)
		}
	}
	for range n - len(line) {
		b.WriteByte(' ')
	}
}

// put writes c at the cursor and moves it on.
func (r *Renderer) put(c rune) {
	for len(r.cells) < r.col {
		r.cells = append(r.cells, blank)
	}
	if r.col == len(r.cells) {
		r.cells = append(r.cells, c)
	} else {
		r.cells[r.col] = c
	}
	r.col++
}

// InvalidLen is how many bytes at the start of b, which does not start
// with a UTF-8 character, one U+FFFD stands for: its maximal subpart
// (Unicode 15, 3.9, U+FFFD substitution), the longest start of a
// well-formed sequence, else its first byte. "\xe2\x82" is one, as a
// three-byte character cut short; "\xed\xa0\x80", an encoded surrogate,
// is three, since no well-formed sequence starts "\xed\xa0".
func InvalidLen(b []byte) int {
	lo, hi := byte(0x80), byte(0xbf) // the second byte's range
	var n int
	switch c := b[0]; {
	case c >= 0xc2 && c <= 0xdf:
		n = 2
	case c == 0xe0:
		n, lo = 3, 0xa0
	case c == 0xed:
		n, hi = 3, 0x9f
	case c >= 0xe1 && c <= 0xef:
		n = 3
	case c == 0xf0:
		n, lo = 4, 0x90
	case c == 0xf4:
		n, hi = 4, 0x8f
	case c >= 0xf1 && c <= 0xf3:
		n = 4
	default:
		return 1
	}
	i := 1
	for ; i < n && i < len(b) && b[i] >= lo && b[i] <= hi; i++ {
		lo, hi = 0x80, 0xbf
	}
	return i
}

// boundChunk is how much input a Bound renders between looks at its
// text's length: the text it holds goes at most about 100 KiB past its
// bound (a cursor move makes a line of 1,025 bytes of ten).
const boundChunk = 1 << 10

// A Bound renders output fed to it in pieces as a [Renderer] does, holding
// at most about Most+1 bytes of the text at a time, never all of it: its
// start, or with End its end (each cut at a byte, not a character: cut it
// again to Most). Text can be a hundred times longer than its bytes
// (ESC[1023C x and a newline, 10 bytes, make a line of 1,025): rendering
// 4 or 8 MiB whole held gigabytes. With Stop (and not End) it renders no
// more once the text is longer than Most, for a caller that only needs to
// know. With Cut the input is a piece of output that more may follow on
// the same line (a page, or the output of a command still running): the
// text keeps the blanks at its end up to the cursor (see
// [Renderer.cutString]), which the text of the output whole shows when
// more follows them on their line. Most < 0 holds all of it. The zero
// Bound holds nothing.
type Bound struct {
	Most           int
	End, Stop, Cut bool

	r    Renderer
	kept []byte
	n    int  // the bytes of text rendered so far
	in   int  // the bytes of input rendered so far
	over bool // Stop: the text passed Most, and rendering stopped
}

// Write renders p, or as much of it as Stop lets it. It never fails.
func (b *Bound) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !b.over {
		c := p[:min(len(p), boundChunk)]
		p = p[len(c):]
		b.r.Write(c)
		b.in += len(c)
		b.keep(b.r.Lines())
		if b.Stop && !b.End && b.Most >= 0 && b.n+b.r.Len() > b.Most {
			b.over = true
		}
	}
	return n, nil
}

// keep counts s, the next of the text, and holds what the bound keeps.
func (b *Bound) keep(s string) {
	b.n += len(s)
	switch {
	case b.Most < 0:
		b.kept = append(b.kept, s...)
	case !b.End:
		b.kept = append(b.kept, s[:min(len(s), max(0, b.Most+1-len(b.kept)))]...)
	default:
		b.kept = append(b.kept, s...)
		if len(b.kept) > 2*(b.Most+1)+boundChunk {
			b.kept = append(b.kept[:0], b.kept[len(b.kept)-b.Most-1:]...)
		}
	}
}

// Text ends the rendering, as [Renderer.Flush] does, and returns the text
// held; n is the whole text's length, or, once Stop stopped the rendering
// (over), that of the text rendered then, from the first in bytes of the
// input. Call it once, after the last Write.
func (b *Bound) Text() (text string, n, in int, over bool) {
	if !b.over {
		b.r.Flush()
	}
	if b.Cut {
		b.keep(b.r.cutString())
	} else {
		b.keep(b.r.String())
	}
	if b.End && b.Most >= 0 && len(b.kept) > b.Most+1 {
		b.kept = b.kept[len(b.kept)-b.Most-1:]
	}
	return string(b.kept), b.n, b.in, b.over
}

// Bounded renders b as [String] does, holding at most about most bytes of
// the text at a time (see [Bound]): its first most+1 bytes, and the whole
// text's length. With cut, b stops inside output that goes on (see
// [Bound]'s Cut).
func Bounded(b []byte, most int, cut bool) (text string, n int) {
	bd := Bound{Most: most, Cut: cut}
	bd.Write(b)
	text, n, _, _ = bd.Text()
	return text, n
}

// Fits reports whether b's text (see [String]; with cut, see [Bound]'s
// Cut) is at most limit bytes long, rendering no more of it than it must.
func Fits(b []byte, limit int, cut bool) bool {
	bd := Bound{Most: limit, Stop: true, Cut: cut}
	bd.Write(b)
	_, n, _, over := bd.Text()
	return !over && n <= limit
}
