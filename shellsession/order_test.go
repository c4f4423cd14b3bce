package shellsession

import (
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
