package shellsession

import (
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestErrexitAfterRefused: under set -e, the command after one the syntax
// check refused (2, which the shell never saw) runs, with $? 2: the
// frame's restore of that status ended dash and busybox sh, and the next
// command was reported with 2, never having run. A plain failure still ends
// the session (see TestShellEndingCommands).
func TestErrexitAfterRefused(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			expectRun(t, s, "set -e", 0, "")
			r, _, _ := run(t, s, CommandOptions{Cmd: `echo "`})
			require.Equal(t, 2, code(r), "%+v", r)
			expectRun(t, s, `echo "ok $?"`, 0, "ok 2\n")
			expectRun(t, s, "case $- in *e*) echo on;; esac", 0, "on\n")
			c, err := s.Submit(CommandOptions{Cmd: "false"})
			require.NoError(t, err)
			require.Equal(t, 1, *wait(t, c).ExitCode)
			requireEnds(t, s, "false under set -e")
		})
	}
}

// TestErrexitExemptLastEnds pins what conch cannot keep: under set -e, a
// command whose last status is a failure errexit ignores (the left side of
// an AND-OR list), or that returns one, reports it, and the session ends, where a terminal's
// shell goes on: the frame's "." (or eval) that runs the command's text
// returns that status, and errexit ends the shell on it (the README says
// so).
func TestErrexitExemptLastEnds(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for cmd, status := range map[string]int{"echo a; false && true": 1, "echo a; return 4": 4} {
			t.Run(shell+"/"+cmd, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell})
				expectRun(t, s, "set -e", 0, "")
				c, err := s.Submit(CommandOptions{Cmd: cmd})
				require.NoError(t, err)
				r := wait(t, c)
				require.Equal(t, status, *r.ExitCode, "%+v", r)
				o, _ := output(c)
				require.Equal(t, "a\n", o)
				requireEnds(t, s, cmd+" under set -e")
			})
		}
	}
}

// TestErrexitAfterTimeout: under set -e, the command after one that timed
// out (interrupted, 130) runs, with $? 130: the frame's restore of that
// status does not end the shell. zsh, mksh and ksh93 end on the interrupt
// itself under set -e.
func TestErrexitAfterTimeout(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "dash", "busybox"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			expectRun(t, s, "set -e", 0, "")
			r, _, _ := run(t, s, CommandOptions{Cmd: "sleep 60", ExecutionTimeout: 300 * time.Millisecond})
			require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
			expectRun(t, s, `echo "ok $?"`, 0, "ok 130\n")
		})
	}
}
