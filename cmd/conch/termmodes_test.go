package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTermModes: the modes a program's output turns on, in sequences cut
// anywhere between writes, are put back by Restore, the alternate screen
// last; modes it turned back itself, and modes not tracked, are left.
func TestTermModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out, restore string
	}{
		{"none", "plain text \x1b[31mred\x1b[0m", ""},
		{"full screen", "\x1b[?1049h\x1b[?25l\x1b[?1000;1006hscreen", "\x1b[?1000l\x1b[?1006l\x1b[?25h\x1b[?1049l"},
		{"turned back", "\x1b[?1049h\x1b[?2004h\x1b[?2004l\x1b[?25l\x1b[?25h\x1b[?1049l", ""},
		{"cursor keys", "\x1b[?1h\x1b=", "\x1b[?1l"},
		{"untracked", "\x1b[?7l\x1b[?12h\x1b[?99999999999999999999h", ""},
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
