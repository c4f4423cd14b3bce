package shellsession

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/process"
)

// TestOwnOutputClosed pins which of its own stdout and stderr each shell
// runs with closed between commands (see closeOwn): a redirection of a
// closed descriptor costs the shell no save and no restore. bash and mksh
// close both, dash and busybox sh their stdout (their announcement of each
// command goes to their stderr), ksh93 and zsh neither.
func TestOwnOutputClosed(t *testing.T) {
	closed := map[string][2]bool{
		"bash": {true, true}, "mksh": {true, true},
		"dash": {true, false}, "busybox": {true, false},
		"ksh": {false, false}, "zsh": {false, false},
	}
	everyShell(t, func(t *testing.T, s *Session, ctx context.Context) {
		for range 3 {
			expectRun(t, s, "echo out; echo err >&2", 0, "out\n")
		}
		want, ok := closed[s.sh.Name]
		require.True(t, ok, "no expectation for %s", s.sh.Name)
		// The shell closes the end marker's stream just after it wrote
		// the marker: what it holds is looked at once it is back at its
		// prompt.
		require.Eventually(t, s.atPrompt, deadline, time.Millisecond)
		for fd, closed := range want {
			_, err := os.Lstat("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/fd/" + strconv.Itoa(fd+1))
			require.Equal(t, closed, errors.Is(err, fs.ErrNotExist), "the shell's fd %d closed (%v)", fd+1, err)
		}
	})
}

// TestFailedMarkerReachesTheEngine: a command whose end marker cannot be
// written (it put a directory in its stdout FIFO's place) ends failed at
// once with its status, which only the frame's Failed marker carries —
// written to the shell's own output, by path where the shell runs with its
// stderr closed — and the next command runs as any other.
func TestFailedMarkerReachesTheEngine(t *testing.T) {
	everyShell(t, func(t *testing.T, s *Session, ctx context.Context) {
		res, stdout, _ := run(t, s, CommandOptions{Cmd: `exec 3>&1; p=$(readlink /proc/$$/fd/3); exec 3>&-; echo hi; rm -f "$p" && mkdir "$p" && (exit 3)`})
		require.Equal(t, process.Failed, res.Reason, "%+v", res)
		require.Equal(t, "hi\n", stdout)
		require.NotNil(t, res.ExitCode, "no status: the Failed marker did not come (%+v)", res)
		require.Equal(t, 3, code(res), "%+v", res)
		expectRun(t, s, "echo next; echo err >&2", 0, "next\n")
	})
}

// TestOwnStderrKeptWhereItsPathFails: a login profile that disables the
// ":" builtin makes the engine's look that the path to the shell's own
// output opens fail (see closeOwn), as a path that cannot open would, and
// leaves the shell's stderr open; the engine sees it, and the frames write
// their markers there: a command that cannot report its end still ends
// with its status.
func TestOwnStderrKeptWhereItsPathFails(t *testing.T) {
	t.Parallel()
	for shell, profile := range map[string]string{"bash": "enable -n :\n"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s, err, _ := startHostile(t, shell, profile, deadline)
			require.NoError(t, err)
			_, err = os.Lstat("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/fd/2")
			require.NoError(t, err, "the shell's stderr was closed")
			require.Empty(t, s.own, "markers by path")
			res, stdout, _ := run(t, s, CommandOptions{Cmd: "__conch=x; echo hi; (exit 3)"})
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
			require.Equal(t, "hi\n", stdout)
			require.Equal(t, 3, code(res), "%+v", res)
			expectRun(t, s, "echo next", 0, "next\n")
		})
	}
}

// TestOwnColonFunctionNotRun: a login profile's function named ":" is not
// what the engine's look that the path to the shell's own output opens
// runs (see closeOwn): bash let it take the word, and one that read its
// input took the session's first command (New waited for it to its
// readiness bound, then refused the session), one that called ":" itself
// recursed until bash crashed. mksh runs its builtin over such a
// function.
func TestOwnColonFunctionNotRun(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "mksh"} {
		for name, profile := range map[string]string{"reads": ":() { read -r x; }\n", "recurses": ":() { :; }\n"} {
			t.Run(shell+"/"+name, func(t *testing.T) {
				t.Parallel()
				s, err, _ := startHostile(t, shell, profile, deadline)
				require.NoError(t, err)
				require.True(t, s.ownOnly, "the shell's stderr was left open")
				expectRun(t, s, "echo hi; echo err >&2", 0, "hi\n")
				res, stdout, _ := run(t, s, CommandOptions{Cmd: `exec 3>&1; p=$(readlink /proc/$$/fd/3); exec 3>&-; echo hi; rm -f "$p" && mkdir "$p" && (exit 3)`})
				require.Equal(t, process.Failed, res.Reason, "%+v", res)
				require.Equal(t, "hi\n", stdout)
				require.Equal(t, 3, code(res), "%+v", res)
			})
		}
	}
}
