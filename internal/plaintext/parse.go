package plaintext

// The parser follows the shape of the DEC VT500 state machine that xterm and
// VTE implement (https://vt100.net/emu/dec_ansi_parser), cut down to what
// plain text needs: C0 controls act inside a sequence, CAN and SUB abort
// it, ESC restarts it, and a string ends at ST (ESC \, or U+009C) or, for
// OSC, at BEL.

const (
	bel = 0x07
	can = 0x18
	sub = 0x1a
	esc = 0x1b
	del = 0x7f
)

// rune feeds one decoded character to the parser.
func (r *Renderer) rune(c rune) {
	if c >= 0x80 && c < 0xa0 {
		r.c1(c)
		return
	}
	switch r.st {
	case ground:
		r.text(c)
	case escape:
		r.escape(c)
	case escInter:
		switch {
		case c < 0x20:
			r.control(c)
		case c < 0x30: // more intermediates
		case c < del:
			r.st = ground
		default:
			r.abort(c)
		}
	case csi:
		r.csiByte(c)
	case oscStr, ctrlStr:
		r.str(c)
	}
}

// c1 starts what an 8-bit C1 control starts, from any state. Only decoded
// code points get here; see the package comment.
func (r *Renderer) c1(c rune) {
	switch c {
	case 0x9b:
		r.startCSI()
	case 0x9d:
		r.st = oscStr
	case 0x90, 0x98, 0x9e, 0x9f: // DCS, SOS, PM, APC
		r.st = ctrlStr
	default: // ST and the rest end whatever was being read
		r.st = ground
	}
}

// text handles c outside any sequence.
func (r *Renderer) text(c rune) {
	if c < 0x20 || c == del {
		r.control(c)
		return
	}
	r.put(c)
}

// control acts on a C0 control character, which a terminal does also in the
// middle of an escape sequence.
func (r *Renderer) control(c rune) {
	switch c {
	case esc:
		r.st = escape
	case can, sub:
		r.st = ground
	case '\r':
		r.col = 0
	case '\n', '\v', '\f':
		r.newline()
	case '\b':
		r.col = max(r.col-1, 0)
	case '\t':
		r.put('\t')
	}
}

// abort ends the sequence being read at c, which cannot be part of it, and
// reads c as text: what is left of a broken sequence should not eat text.
func (r *Renderer) abort(c rune) {
	r.st = ground
	r.text(c)
}

func (r *Renderer) escape(c rune) {
	switch {
	case c < 0x20:
		r.control(c)
	case c == '[':
		r.startCSI()
	case c == ']':
		r.st = oscStr
	case c == 'P' || c == 'X' || c == '^' || c == '_':
		r.st = ctrlStr
	case c < 0x30:
		r.st = escInter
	case c < del: // a two-byte sequence (ESC 7, ESC =, ESC \ ...): dropped
		r.st = ground
	case c == del:
	default:
		r.abort(c)
	}
}

func (r *Renderer) startCSI() {
	r.st = csi
	r.params = r.params[:0]
	r.long = false
}

func (r *Renderer) csiByte(c rune) {
	switch {
	case c < 0x20:
		r.control(c)
	case c < 0x40: // parameters and intermediates
		if len(r.params) == maxParams {
			r.long = true
			return
		}
		r.params = append(r.params, byte(c))
	case c < del:
		r.st = ground
		if !r.long {
			r.apply(byte(c))
		}
	case c == del:
	default:
		r.abort(c)
	}
}

// str handles c inside an OSC, DCS, SOS, PM or APC string, all of which are
// dropped.
func (r *Renderer) str(c rune) {
	switch c {
	case esc:
		r.st = escape // ESC \ ends the string; any other ESC starts anew
	case can, sub:
		r.st = ground
	case bel:
		if r.st == oscStr {
			r.st = ground
		}
	}
}
