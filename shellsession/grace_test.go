package shellsession

import (
	"context"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// Options.StopGrace is the grace Stop gives a command: a builtin loop that
// ignores INT and TERM outlives it twice, and Stop says how long it waited.
func TestOptionsStopGrace(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{StopGrace: 50 * time.Millisecond})
	c, err := s.Submit(CommandOptions{Cmd: `trap '' INT TERM; echo trapped; while :; do :; done`})
	require.NoError(t, err)
	// Stopped once the traps are set: an interrupt before them would end
	// the command, however briefly it ran untrapped.
	for end := time.Now().Add(deadline); ; time.Sleep(5 * time.Millisecond) {
		if out, _ := output(c); out == "trapped\n" {
			break
		}
		require.False(t, time.Now().After(end), "the command never set its traps")
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	err = c.Stop(ctx)
	require.ErrorIs(t, err, process.ErrUnsupported)
	require.Contains(t, err.Error(), "within 50ms")
}

// Zero durations in Options mean the documented defaults.
func TestOptionsGraceDefaults(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	require.Equal(t, process.StopGrace, s.opts.StopGrace)
	require.Equal(t, process.DrainDelay, s.opts.DrainDelay)
}

// The engine checks a session's and a command's fields, for every caller.
func TestOptionsChecked(t *testing.T) {
	t.Parallel()
	_, err := New(t.Context(), Options{Cwd: "."})
	require.ErrorIs(t, err, process.ErrInvalidArgument)
	// An id the shell's environment cannot hold: the shell failed to
	// start ("start bash: start bash: ... contains NUL").
	_, err = New(t.Context(), Options{ID: "a\x00b"})
	require.ErrorIs(t, err, process.ErrInvalidArgument)
	require.Contains(t, err.Error(), "id holds NUL")
	s := newSession(t, Options{})
	// A negative timeout too, as exec and the API refuse it: it was taken
	// for none.
	for _, opts := range []CommandOptions{{Cmd: "true", KeepLogs: "forever"}, {Cmd: "true", Stdin: "half"}, {Cmd: "true", ExecutionTimeout: -time.Second}} {
		_, err := s.Submit(opts)
		require.ErrorIs(t, err, process.ErrInvalidArgument, "%+v", opts)
		_, _, err = s.Run(t.Context(), opts)
		require.ErrorIs(t, err, process.ErrInvalidArgument, "%+v", opts)
	}
}
