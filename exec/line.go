package exec

import "golang.org/x/sys/unix"

// maxLine is what a terminal keeps of a line in canonical mode (Linux takes
// 4095 bytes, then only what ends the line); the model keeps no more.
const maxLine = 4095

// line models what a terminal in canonical mode holds of the line being
// typed, so that an end-of-file written after input is known to find the
// line empty or not (see feeder.writeEOF). Every byte written to the
// terminal passes through it, from WriteStdin and attachments alike, with
// the terminal's settings read at each write: erase (VERASE), kill (VKILL)
// and, with IEXTEN, word erase (VWERASE) and the literal next (VLNEXT),
// which makes the byte after it a character of the line, a newline too;
// the line ends at a newline, VEOL, VEOL2 (with IEXTEN) and VEOF; with
// ISIG, VINTR, VQUIT and VSUSP empty it (unless NOFLSH) and are no part of
// it; with IXON, VSTART and VSTOP are no part of it; a carriage return
// becomes a newline with ICRNL and is dropped with IGNCR; ISTRIP and IUTF8
// (an erase takes a whole character) are heeded. Outside canonical mode
// the program reads bytes as they come, and a switch to canonical mode
// hands what is unread over as a line of its own: the line is empty.
//
// The terminal applies its settings when it takes the bytes in, which is
// after the write and, while the program does not read, may be later; a
// program that changes its settings in between (stty, a line editor
// leaving raw mode) may have the bytes taken otherwise than the model
// took them. The model goes by the settings at the write, and by what
// conch wrote: input that reaches the terminal otherwise (another process
// writing its master) is not seen.
type line struct {
	buf   []byte // the line so far
	lnext bool   // the last byte was a literal next: the next one is a character
}

// partial reports whether the line holds characters not handed over yet.
func (l *line) partial() bool { return len(l.buf) > 0 || l.lnext }

// reset empties the line.
func (l *line) reset() {
	l.buf = l.buf[:0]
	l.lnext = false
}

// write takes p as the terminal with settings t does; a nil t (settings
// not known) is taken as raw mode.
func (l *line) write(t *unix.Termios, p []byte) {
	if t == nil || t.Lflag&unix.ICANON == 0 {
		l.reset()
		return
	}
	for _, c := range p {
		l.take(t, c)
	}
}

// is reports whether c is the special character i of t; 0 disables one.
func is(t *unix.Termios, c byte, i int) bool { return t.Cc[i] != 0 && c == t.Cc[i] }

// take takes c as the line discipline does, in its order (Linux n_tty).
func (l *line) take(t *unix.Termios, c byte) {
	if t.Iflag&unix.ISTRIP != 0 {
		c &= 0x7f
	}
	ext := t.Lflag&unix.IEXTEN != 0
	if l.lnext {
		l.lnext = false
		l.add(c)
		return
	}
	if t.Iflag&unix.IXON != 0 && (is(t, c, unix.VSTART) || is(t, c, unix.VSTOP)) {
		return
	}
	if t.Lflag&unix.ISIG != 0 && (is(t, c, unix.VINTR) || is(t, c, unix.VQUIT) || is(t, c, unix.VSUSP)) {
		if t.Lflag&unix.NOFLSH == 0 {
			l.reset()
		}
		return
	}
	switch {
	case c == '\r' && t.Iflag&unix.IGNCR != 0:
		return
	case c == '\r' && t.Iflag&unix.ICRNL != 0:
		c = '\n'
	case c == '\n' && t.Iflag&unix.INLCR != 0:
		c = '\r'
	}
	switch {
	case is(t, c, unix.VERASE):
		l.erase(t, false)
	case is(t, c, unix.VKILL):
		l.buf = l.buf[:0]
	case ext && is(t, c, unix.VWERASE):
		l.erase(t, true)
	case ext && is(t, c, unix.VLNEXT):
		l.lnext = true
	case c == '\n', is(t, c, unix.VEOF), is(t, c, unix.VEOL), ext && is(t, c, unix.VEOL2):
		l.buf = l.buf[:0]
	default:
		l.add(c)
	}
}

// add puts c at the end of the line, where there is room.
func (l *line) add(c byte) {
	if len(l.buf) < maxLine {
		l.buf = append(l.buf, c)
	}
}

// erase takes the last character off the line (a whole UTF-8 one with
// IUTF8), or with word the last word and the blanks after it: characters
// up to the last letter, digit or underscore, then those before it, as
// Linux does (its letters include Latin-1 ones, and so the first bytes
// of UTF-8 characters).
func (l *line) erase(t *unix.Termios, word bool) {
	utf8 := t.Iflag&unix.IUTF8 != 0
	seen := false
	for len(l.buf) > 0 {
		i := len(l.buf) - 1
		for utf8 && i > 0 && l.buf[i]&0xc0 == 0x80 {
			i--
		}
		if utf8 && l.buf[i]&0xc0 == 0x80 {
			return // the line starts mid-character: Linux erases nothing
		}
		if word {
			if c := l.buf[i]; wordByte(c) {
				seen = true
			} else if seen {
				return
			}
		}
		l.buf = l.buf[:i]
		if !word {
			return
		}
	}
}

// wordByte reports whether Linux counts c as a letter, digit or
// underscore in a word erase.
func wordByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		return true
	case c >= 0xc0:
		return c != 0xd7 && c != 0xf7 // Latin-1 letters, but for × and ÷
	}
	return false
}
