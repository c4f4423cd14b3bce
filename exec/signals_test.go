package exec

import (
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoredHelperEnv makes the test binary run TestIgnoredSignalsHelper for
// real: started with SIGINT, SIGQUIT, SIGHUP and SIGPIPE ignored.
const ignoredHelperEnv = "CONCH_EXEC_IGNORED_HELPER"

// A program is started with SIGINT, SIGQUIT, SIGHUP and SIGPIPE at their
// default disposition, and an interrupt ends it, although the program that
// starts it was started with them ignored: under nohup, or in the background
// of a script (`cmd &` in sh ignores SIGINT and SIGQUIT). The ignored SIGINT
// was passed on, and an interrupt did nothing: a stopped program continued
// and ran on, a shell never ended.
func TestIgnoredSignalsAreNotPassedOn(t *testing.T) {
	t.Parallel()
	// bash's trap '' ignores the signals, and exec passes that on to the
	// test binary.
	cmd := osexec.CommandContext(t.Context(), "bash", "-c",
		`trap '' INT QUIT HUP PIPE; exec "$0" -test.run='^TestIgnoredSignalsHelper$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), ignoredHelperEnv+"=1")
	cmd.WaitDelay = 5 * time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// Through proctree.Start: the reaper TestMain runs would otherwise take
	// the helper's exit status before cmd.Wait.
	require.NoError(t, proctree.Start(cmd))
	require.NoError(t, proctree.Wait(cmd), "the helper failed:\n%s", out.String())
	require.Contains(t, out.String(), "--- PASS: TestIgnoredSignalsHelper", "the helper did not run:\n%s", out.String())
}

func TestIgnoredSignalsHelper(t *testing.T) {
	if os.Getenv(ignoredHelperEnv) == "" {
		t.Skip("only run as a helper process")
	}
	require.False(t, proctree.DefaultAction(os.Getpid(), syscall.SIGINT),
		"the helper was not started with SIGINT ignored")

	p := start(t, Options{Argv: []string{"grep", "SigIgn", "/proc/self/status"}})
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(logText(p.Log(), logstore.Stdout), "SigIgn:")), 16, 64)
	require.NoError(t, err, "output %q", logText(p.Log(), logstore.Stdout))
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE} {
		assert.Zero(t, mask&(1<<(sig-1)), "%v ignored in the program (SigIgn %x)", sig, mask)
	}

	// A shell waiting for its program, interrupted, ends.
	p = start(t, Options{Cmd: "sleep 30; true"})
	require.Eventually(t, func() bool { return proctree.Sleeping(p.Info().PID) && proctree.HasChildren(p.Info().PID) },
		10*time.Second, time.Millisecond, "the shell never waited for its sleep")
	require.NoError(t, p.Kill(syscall.SIGINT, 0, 0))
	r = wait(t, p)
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	require.Equal(t, "INT", r.Signal, "%+v", r)
}
