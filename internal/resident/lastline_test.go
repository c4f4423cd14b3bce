package resident

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLastLine: what an interpreter said last is the last line that is not
// blank after the mark and the last marker seen, plain and bounded.
func TestLastLine(t *testing.T) {
	d := &Diag{}
	d.take([]byte("bash-5.2# "))
	mark := d.Written()
	require.Equal(t, "", d.LastLine(mark, 256))
	d.take([]byte("\atimed out waiting\tfor input: auto-logout\n\n"))
	require.Equal(t, "timed out waiting for input: auto-logout", d.LastLine(mark, 256))
	require.Equal(t, "bash-5.2# timed out waiting for input: auto-logout", d.LastLine(0, 256))
	require.Equal(t, "auto-logout", d.LastLine(mark, 11))

	d.take([]byte("\x1b[1m\x1b[7m%\x1b[27m\x1b[0m \r \rgone\r\n"))
	require.Equal(t, "gone", d.LastLine(mark, 256))

	d.Watch([]byte("MARK"), false, seen{})
	d.take([]byte("said\nMARK"))
	require.Equal(t, "", d.LastLine(0, 256), "what came before the marker")
	d.take([]byte(" after\n"))
	require.Equal(t, "after", d.LastLine(0, 256))
}

type seen struct{}

func (seen) Seen([]byte) {}
