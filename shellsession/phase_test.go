package shellsession

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
	"github.com/stretchr/testify/require"
)

// A command's phase only moves forward along its legal moves; every other
// move is refused with a *phaseError and leaves the phase as it was.
func TestPhaseTransitions(t *testing.T) {
	t.Parallel()
	legal := map[[2]phase]bool{
		{phaseQueued, phaseAnnounced}: true, {phaseQueued, phaseEnded}: true,
		{phaseAnnounced, phaseRunning}: true, {phaseAnnounced, phaseEnding}: true, {phaseAnnounced, phaseEnded}: true,
		{phaseRunning, phaseEnding}: true, {phaseRunning, phaseEnded}: true,
		{phaseEnding, phaseEnded}: true,
	}
	for from := phaseQueued; from <= phaseEnded; from++ {
		for to := phaseQueued; to <= phaseEnded; to++ {
			c := &Command{id: "c", phase: from}
			err := c.advanceLocked(to)
			if legal[[2]phase{from, to}] {
				require.NoError(t, err, "%v -> %v", from, to)
				require.Equal(t, to, c.phase)
				continue
			}
			var pe *phaseError
			require.ErrorAs(t, err, &pe, "%v -> %v must be refused", from, to)
			require.Equal(t, from, c.phase, "a refused move changed the phase")
		}
	}
}

// A command ended while queued (deleted, killed) cannot be taken up and run
// afterwards: begin refuses it, and its result stays the one it ended with.
func TestPhaseEndedCommandCannotBegin(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	c := s.newCommand(CommandOptions{Cmd: "true"})
	require.NoError(t, c.Kill(syscall.SIGTERM, 0, 0))
	var pe *phaseError
	require.True(t, errors.As(c.begin("/", sentinel.Frame{}), &pe), "begin after the end must fail")
	require.Equal(t, process.Terminal, c.state())
	require.Equal(t, process.Signaled, c.Result().Reason)
}

// A command's result says which directory it left the shell in, on every
// shell: after cd, after a syntax error (unchanged), and after a command
// that failed.
func TestResultCwd(t *testing.T) {
	t.Parallel()
	for _, sh := range testShells {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			start, err := filepath.EvalSymlinks(t.TempDir())
			require.NoError(t, err)
			sub := filepath.Join(start, "sub dir")
			require.NoError(t, os.Mkdir(sub, 0o755))
			s := newSession(t, Options{Shell: sh, Cwd: start})
			r, _, _ := run(t, s, CommandOptions{Cmd: "cd 'sub dir'"})
			require.Equal(t, 0, code(r))
			require.Equal(t, sub, r.Cwd)
			r, _, _ = run(t, s, CommandOptions{Cmd: "cd ..; false"})
			require.Equal(t, 1, code(r))
			require.Equal(t, start, r.Cwd)
			r, _, _ = run(t, s, CommandOptions{Cmd: "echo 'unterminated"})
			require.NotEqual(t, 0, code(r))
			require.Equal(t, start, r.Cwd, "a syntax error leaves the cwd as it was")
			require.Equal(t, s.Cwd(), r.Cwd)
		})
	}
}
