package shellsession

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBusyboxTraceToStdout pins what the README says of busybox sh under
// BASH_XTRACEFD=1 and set -x: busybox applies a line's redirections before
// it traces the line, so the engine's lines, run with the command's stdout
// as their fd 1, are traced into it, as text: the end marker's printf
// format is there, never a marker's bytes, every command still ends with
// its own status, and after set +x the output is exact again.
func TestBusyboxTraceToStdout(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "busybox"})
	run(t, s, CommandOptions{Cmd: "BASH_XTRACEFD=1; set -x"})
	r, out, _ := run(t, s, CommandOptions{Cmd: "echo ok; (exit 3)"})
	require.Equal(t, 3, code(r))
	require.Contains(t, out, "+ echo ok\nok\n")
	require.Contains(t, out, `'\036CONCH`, "the end line's trace")
	require.NotContains(t, out, "\x1e", "a marker's bytes")
	run(t, s, CommandOptions{Cmd: "set +x"})
	expectRun(t, s, "echo ok", 0, "ok\n")
}
