package shellsession

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIdleLogoutSaysWhy: a bash that a command gave a TMOUT logs out once
// idle that long, between commands; the session's result, and the error of
// the next command, say that its shell exited between commands and what it
// said last (its auto-logout notice), rather than only "exited 0".
func TestIdleLogoutSaysWhy(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"TMOUT=1", "readonly TMOUT=1"} {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: "bash"})
			expectRun(t, s, set, 0, "")
			requireEnds(t, s, "an idle TMOUT")
			r := s.Info().Result
			require.NotNil(t, r)
			require.Equal(t, 0, code(*r), "%+v", r)
			// Its prompts are empty: what it said last is its notice,
			// after the prompt it wrote before its first line when the
			// engine had not read that prompt as the shell came up.
			require.True(t, strings.HasPrefix(r.Error, "the shell exited between commands (exit status 0): "), r.Error)
			require.True(t, strings.HasSuffix(r.Error, " timed out waiting for input: auto-logout"), r.Error)

			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			_, _, err := s.Run(ctx, CommandOptions{Cmd: "echo late"})
			require.ErrorIs(t, err, ErrSessionEnded)
			require.ErrorContains(t, err, "auto-logout")
		})
	}
}

// TestExitSaysNothingMore: a shell that a command ended (exit) ended under
// that command, which says so: the session's result is its exit status
// alone.
func TestExitSaysNothingMore(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash"})
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	_, _, err := s.Run(ctx, CommandOptions{Cmd: "exit 3"})
	require.NoError(t, err)
	requireEnds(t, s, "exit")
	r := s.Info().Result
	require.NotNil(t, r)
	require.Equal(t, 3, code(*r), "%+v", r)
	require.Empty(t, r.Error)
}
