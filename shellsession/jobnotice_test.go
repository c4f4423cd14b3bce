package shellsession

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBashDoneNoticeUnderJobControl pins where bash writes a finished
// job's notice once a command turned job control on (set -m): when a later
// foreground job ends, to the stderr it has then, the command's — as at a
// terminal, where it shows after that command's output. set -b moves only
// the notice of a job that ends between commands, to the shell's own stderr
// at once: one that ends while a command runs comes as that command's
// foreground job ends all the same.
func TestBashDoneNoticeUnderJobControl(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"set -m", "set -m; set -b"} {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: "bash"})
			expectRun(t, s, set, 0, "")
			r, out, errOut := run(t, s, CommandOptions{Cmd: "sleep 0.1 &"})
			require.Equal(t, 0, code(r))
			require.Empty(t, out+errOut, "its [1] PID notice goes to the shell's own stderr")
			// Once the job is gone, a foreground job ends: the notice
			// comes then, if not at the end of a sleep before.
			r, out, errOut = run(t, s, CommandOptions{Cmd: "while kill -0 $! 2>/dev/null; do sleep 0.05; done; /bin/true; echo second"})
			require.Equal(t, 0, code(r))
			require.Equal(t, "second\n", out)
			require.Regexp(t, `^\[1\]\+ +Done +sleep 0\.1\n$`, errOut)

			// A job that ends between commands: once bash has reaped it,
			// under set -b its notice is on the shell's own stderr
			// already; without, it comes as the next foreground job ends.
			_, out, _ = run(t, s, CommandOptions{Cmd: "sleep 0.1 & echo $!"})
			pid := strings.TrimSpace(out)
			require.Eventually(t, func() bool {
				_, err := os.Stat("/proc/" + pid)
				return errors.Is(err, fs.ErrNotExist)
			}, deadline, 10*time.Millisecond)
			r, out, errOut = run(t, s, CommandOptions{Cmd: "/bin/true; echo third"})
			require.Equal(t, 0, code(r))
			require.Equal(t, "third\n", out)
			if strings.Contains(set, "-b") {
				require.Empty(t, errOut)
			} else {
				require.Regexp(t, `^\[1\]\+ +Done +sleep 0\.1\n$`, errOut)
			}
		})
	}
}
