package shellsession

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestExitTrapUnderErrexit: a shell that ends under set -e runs its EXIT
// trap to the end, and the command reports the status the shell ended
// with: 2 from a command that failed with 2 (errexit), 3 from exit 3. The
// trap writes to stdout and stderr before it removes a file, which it does
// only if both writes worked (set -e is still on). bash on an errexit exit,
// dash and busybox sh on any exit, run the trap after they undo the
// command's redirections, with their own descriptors: where those were
// closed between commands, the trap's first write failed, errexit ended
// the trap, and the command reported 1 with the file left behind.
func TestExitTrapUnderErrexit(t *testing.T) {
	t.Parallel()
	// What each command runs, after it sets the trap, and the status it
	// must report.
	cases := map[string]struct {
		sameCommand bool // the trap and set -e come in the command that exits
		cmd         string
		status      int
	}{
		"errexit":         {true, "(exit 2)", 2},
		"errexit program": {true, "ls /nonexistent", 2},
		"errexit false":   {true, "false", 1},
		"exit":            {false, "exit 3", 3},
	}
	for _, shell := range testShells {
		for name, tc := range cases {
			t.Run(shell+"/"+name, func(t *testing.T) {
				t.Parallel()
				flag := filepath.Join(t.TempDir(), "flag")
				require.NoError(t, os.WriteFile(flag, nil, 0o600))
				s := newSession(t, Options{Shell: shell})
				setup := "trap 'echo cleaning up; echo on stderr >&2; rm -f " + shQuote(flag) + "' EXIT; set -e"
				cmd := setup + "; " + tc.cmd
				if !tc.sameCommand {
					expectRun(t, s, setup, 0, "")
					cmd = tc.cmd
				}
				res, _, stderr := run(t, s, CommandOptions{Cmd: cmd})
				require.Equal(t, process.Exited, res.Reason, "%+v", res)
				require.Equal(t, tc.status, code(res), "%+v, stderr %q", res, stderr)
				requireEnds(t, s, "the shell's exit")
				_, err := os.Stat(flag)
				require.ErrorIs(t, err, os.ErrNotExist, "the EXIT trap did not run to its end")
			})
		}
	}
}
