package shellsession

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutputOrderOfTwoWrites: a write to stdout followed by one to stderr
// is never reported the other way round: the stream that had data first is
// read first, however late the engine's reader wakes.
func TestOutputOrderOfTwoWrites(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			for range 20 {
				c, _, err := s.Run(t.Context(), CommandOptions{Cmd: "echo out1; echo err1 >&2"})
				require.NoError(t, err)
				var seq strings.Builder
				for _, f := range c.Log().Page(0, 0).Frames {
					seq.Write(f.Data)
				}
				require.Equal(t, "out1\nerr1\n", seq.String())
			}
		})
	}
}

// TestBothStreamsWhole: one reader for both streams loses nothing when
// both carry much output at once, or many small writes in turn.
func TestBothStreamsWhole(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	_, out, errOut := run(t, s, CommandOptions{Cmd: "seq 200000 & seq 200000 >&2; wait"})
	var b strings.Builder
	for i := 1; i <= 200000; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	want := b.String()
	require.Equal(t, want, out)
	require.Equal(t, want, errOut)
	_, out, errOut = run(t, s, CommandOptions{Cmd: "for i in $(seq 2000); do echo o$i; echo e$i >&2; done"})
	var o, e strings.Builder
	for i := 1; i <= 2000; i++ {
		o.WriteString("o" + strconv.Itoa(i) + "\n")
		e.WriteString("e" + strconv.Itoa(i) + "\n")
	}
	require.Equal(t, o.String(), out)
	require.Equal(t, e.String(), errOut)
}
