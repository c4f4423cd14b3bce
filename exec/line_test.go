package exec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// saneTermios returns the settings of stty sane on Linux, with Ctrl-V as
// VLNEXT and so on; set changes them.
func saneTermios(set func(*unix.Termios)) *unix.Termios {
	t := &unix.Termios{
		Iflag: unix.ICRNL | unix.IXON | unix.IUTF8,
		Lflag: unix.ICANON | unix.ISIG | unix.IEXTEN | unix.ECHO | unix.ECHOE | unix.ECHOK,
	}
	for i, c := range map[int]byte{
		unix.VINTR: 3, unix.VQUIT: 0x1c, unix.VERASE: 0x7f, unix.VKILL: 0x15, unix.VEOF: 4,
		unix.VSTART: 0x11, unix.VSTOP: 0x13, unix.VSUSP: 0x1a, unix.VLNEXT: 0x16, unix.VWERASE: 0x17,
	} {
		t.Cc[i] = c
	}
	if set != nil {
		set(t)
	}
	return t
}

// TestLine: whether the line being typed is unfinished after input, as the
// line discipline takes it with the settings given.
func TestLine(t *testing.T) {
	t.Parallel()
	noext := func(t *unix.Termios) { t.Lflag &^= unix.IEXTEN }
	for _, c := range []struct {
		in      []string // written one after the other
		set     func(*unix.Termios)
		partial bool
	}{
		{in: []string{""}},
		{in: []string{"abc"}, partial: true},
		{in: []string{"abc\n"}},
		{in: []string{"abc\r"}}, // ICRNL
		{in: []string{"abc\r"}, set: func(t *unix.Termios) { t.Iflag = 0 }, partial: true}, // a character
		{in: []string{"\r"}, set: func(t *unix.Termios) { t.Iflag = unix.IGNCR }},          // dropped
		{in: []string{"abc\x04"}},
		{in: []string{"abc", "\x7f\x7f", "\x7f"}},
		{in: []string{"abc\x7f\x7f"}, partial: true},
		{in: []string{"\x7f\x7fa"}, partial: true},
		{in: []string{"a\u00e9\x7f"}, partial: true},
		{in: []string{"\u00e9\x7f"}},                                                            // IUTF8: the whole character
		{in: []string{"\u00e9\x7f"}, set: func(t *unix.Termios) { t.Iflag = 0 }, partial: true}, // one byte of it
		{in: []string{"ab cd\x15"}},
		{in: []string{"ab cd  \x17"}, partial: true},
		{in: []string{"ab cd  \x17\x17"}},
		{in: []string{"ab_1\x17"}},
		{in: []string{"abc\x17"}, set: noext, partial: true}, // word erase needs IEXTEN
		{in: []string{"abc\x16\n"}, partial: true},
		{in: []string{"abc\x16"}, partial: true},
		{in: []string{"\x16"}, partial: true},
		{in: []string{"\x16", "\x7f"}, partial: true},
		{in: []string{"\x16\x15x\x7f\x7f"}},
		{in: []string{"\x16\n"}, set: noext},
		{in: []string{"abc\x03"}},
		{in: []string{"abc\x1c"}},
		{in: []string{"abc\x1a"}},
		{in: []string{"abc\x03"}, set: func(t *unix.Termios) { t.Lflag |= unix.NOFLSH }, partial: true},
		{in: []string{"\x03"}, set: func(t *unix.Termios) { t.Lflag &^= unix.ISIG }, partial: true},
		{in: []string{"\x11\x13"}},
		{in: []string{"\x11"}, set: func(t *unix.Termios) { t.Iflag &^= unix.IXON }, partial: true},
		{in: []string{"abc;"}, set: func(t *unix.Termios) { t.Cc[unix.VEOL] = ';' }},
		{in: []string{"abc;"}, set: func(t *unix.Termios) { t.Cc[unix.VEOL2] = ';' }},
		{in: []string{"abc;"}, set: func(t *unix.Termios) { t.Cc[unix.VEOL2] = ';'; t.Lflag &^= unix.IEXTEN }, partial: true},
		{in: []string{"abc\x00"}, set: func(t *unix.Termios) { t.Cc[unix.VEOL] = 0 }, partial: true}, // 0: no VEOL
		{in: []string{"abc\x08"}, set: func(t *unix.Termios) { t.Cc[unix.VERASE] = 8 }, partial: true},
		{in: []string{"a\x08"}, set: func(t *unix.Termios) { t.Cc[unix.VERASE] = 8 }},
		{in: []string{"abc\x7f"}, set: func(t *unix.Termios) { t.Cc[unix.VERASE] = 8 }, partial: true},
		{in: []string{"\xff"}, set: func(t *unix.Termios) { t.Iflag |= unix.ISTRIP }}, // stripped: DEL, erase
		{in: []string{"abc"}, set: func(t *unix.Termios) { t.Lflag &^= unix.ICANON }}, // raw: read as it comes
	} {
		var l line
		for _, p := range c.in {
			l.write(saneTermios(c.set), []byte(p))
		}
		assert.Equal(t, c.partial, l.partial(), "%q", c.in)
	}
	var l line
	l.write(saneTermios(nil), []byte("abc"))
	l.write(nil, nil)
	assert.False(t, l.partial(), "settings unknown: taken as raw mode")
}
