package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTermModes: the modes a program's output turns on, in sequences cut
// anywhere between writes, are put back by Restore, the alternate screen
// last; modes it turned back itself, and modes not tracked, are left. The
// kitty keyboard flags, modifyOtherKeys, colors, the line-drawing set, the
// application keypad, autowrap off, reverse video and a scroll region were
// left as the program set them, and a shell after it met keys it did not
// know (Ctrl-] no longer detached, Enter an escape sequence), red text,
// line-drawing letters.
func TestTermModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out, restore string
	}{
		{"none", "plain text \x1b[31mred\x1b[0m", ""},
		{"full screen", "\x1b[?1049h\x1b[?25l\x1b[?1000;1006hscreen", "\x1b[?1000l\x1b[?1006l\x1b[?25h\x1b[?1049l"},
		{"turned back", "\x1b[?1049h\x1b[?2004h\x1b[?2004l\x1b[?25l\x1b[?25h\x1b[?1049l", ""},
		{"cursor keys", "\x1b[?1h\x1b=", "\x1b>\x1b[?1l"},
		{"untracked", "\x1b[?12h\x1b[?99999999999999999999h\x1b[1u\x1b[>1m", ""},
		{"kitty keyboard", "\x1b[>1u\x1b[>3u\x1b[>5u\x1b[<u", "\x1b[<2u"},
		{"kitty keyboard popped", "\x1b[>1u\x1b[>3u\x1b[<2u", ""},
		{"kitty keyboard popped past", "\x1b[>1u\x1b[<5u", ""},
		{"kitty keyboard set", "\x1b[=1;1u", "\x1b[=0;1u"},
		{"kitty keyboard set pushed", "\x1b[>1u\x1b[=3;1u", "\x1b[<1u"},
		// Each screen has its own stack: the alternate one is popped
		// before it is left, the main one after.
		{"kitty keyboard each screen", "\x1b[>1u\x1b[?1049h\x1b[>1u\x1b[>1u", "\x1b[<2u\x1b[?1049l\x1b[<1u"},
		{"kitty keyboard alternate left", "\x1b[?1049h\x1b[>1u\x1b[?1049l", ""},
		{"modifyOtherKeys", "\x1b[>4;2m", "\x1b[>4m"},
		{"modifyOtherKeys off", "\x1b[>4;2m\x1b[>4;0m\x1b[>4;1m\x1b[>4m", ""},
		{"attributes", "\x1b[1;31mred", "\x1b[0m"},
		{"attributes subparameters", "\x1b[38:5:196mred", "\x1b[0m"},
		{"attributes off", "\x1b[1;31mred\x1b[m\x1b[4mu\x1b[0m", ""},
		{"line drawing", "\x1b(0lqk\x0e", "\x1b(B\x0f"},
		{"line drawing off", "\x1b(0lqk\x1b(B\x0e\x0f", ""},
		{"keypad", "\x1b=", "\x1b>"},
		{"keypad off", "\x1b=\x1b>", ""},
		{"autowrap", "\x1b[?7l", "\x1b[?7h"},
		{"autowrap back", "\x1b[?7l\x1b[?7h", ""},
		{"reverse video", "\x1b[?5h", "\x1b[?5l"},
		{"scroll region", "\x1b[2;20r", "\x1b7\x1b[r\x1b8"},
		{"scroll region off", "\x1b[2;20r\x1b[r", ""},
		{"reset", "\x1b[?1049h\x1b[>1u\x1b[31m\x1bc", ""},
		{"all", "\x1b[?1049h\x1b[?7;5h\x1b[?7l\x1b[>4;2m\x1b[>1u\x1b[5;10r\x1b[7m\x1b(0\x1b=",
			"\x1b[<1u\x1b[>4m\x1b7\x1b[r\x1b8\x1b[0m\x1b(B\x1b>\x1b[?5l\x1b[?7h\x1b[?1049l"},
		{"not private", "\x1b[1000h\x1b[25l", ""},
		{"interrupted", "\x1b[?10\x1b[?1004h", "\x1b[?1004l"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for cut := range len(tc.out) {
				var got strings.Builder
				m := newTermModes(&got)
				m.Write([]byte(tc.out[:cut]))
				m.Write([]byte(tc.out[cut:]))
				require.Equal(t, tc.out, got.String(), "the output passes as it is")
				m.Restore()
				require.Equal(t, tc.restore, strings.TrimPrefix(got.String(), tc.out), "cut at %d", cut)
			}
		})
	}
}

// TestTermModesKittyEvents: termModes tells whether the kitty keyboard
// flags in effect report keys let go (flag 2), through pushes, pops, flags
// set in place and switches of screen, so that a detach waits for that
// report only when it comes.
func TestTermModesKittyEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		out    string
		events bool
	}{
		{"", false},
		{"\x1b[>1u", false},
		{"\x1b[>3u", true},
		{"\x1b[>3u\x1b[>1u", false},
		{"\x1b[>3u\x1b[>1u\x1b[<u", true},
		{"\x1b[>3u\x1b[<u", false},
		{"\x1b[>1u\x1b[=2;2u", true},
		{"\x1b[>3u\x1b[=2;3u", false},
		{"\x1b[=3u", true},
		{"\x1b[=3u\x1b[=1u", false},
		{"\x1b[>3u\x1b[?1049h", false}, // the alternate screen has its own
		{"\x1b[>3u\x1b[?1049h\x1b[?1049l", true},
		{"\x1b[>3u\x1bc", false},
	} {
		m := newTermModes(&strings.Builder{})
		_, err := m.Write([]byte(tc.out))
		require.NoError(t, err)
		require.Equal(t, tc.events, m.kittyEvents.Load(), "%q", tc.out)
	}
}
