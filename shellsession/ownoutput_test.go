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
// closed descriptor costs the shell no save and no restore. mksh closes
// both; bash, dash and busybox sh keep both for their EXIT trap (see
// TestExitTrapUnderErrexit), ksh93 and zsh for the cost.
func TestOwnOutputClosed(t *testing.T) {
	closed := map[string][2]bool{
		"mksh": {true, true},
		"bash": {false, false}, "dash": {false, false}, "busybox": {false, false},
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

// TestOwnColonFunctionNotRun: a login profile's function named ":" is not
// what the engine's look that the path to the shell's own output opens
// runs (see closeOwn): mksh, the shell that closes its stderr, runs its
// builtin over such a function, whether it reads its input (it would take
// the first command) or calls ":" itself.
func TestOwnColonFunctionNotRun(t *testing.T) {
	t.Parallel()
	for name, profile := range map[string]string{"reads": ":() { read -r x; }\n", "recurses": ":() { :; }\n"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err, _ := startHostile(t, "mksh", profile, deadline)
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
