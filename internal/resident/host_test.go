package resident

import (
	"errors"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
)

// An interpreter that exited and was reaped leaves its pid free for any
// program: ending the session then (End after the exit, as a DELETE of a
// session whose shell died does) signals none that was given it. The pid
// is forced with ns_last_pid, so this test does not run in parallel;
// another fork can still take it first, and it tries again.
func TestEndAfterTheExitSparesAStrangerGivenThePid(t *testing.T) {
	for range 20 {
		id := "reused-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		h := New(Config{ID: id, Noun: "session", Ended: errors.New("ended"), StopGrace: time.Second})
		cmd := exec.Command("true")
		cmd.Env = []string{"PATH=/usr/bin:/bin", proctree.Tag(id)}
		require.NoError(t, h.Start(cmd))
		select {
		case <-h.Exited():
		case <-time.After(20 * time.Second):
			t.Fatal("the interpreter did not exit within 20 s")
		}
		stranger := processtest.StrangerAt(t, cmd.Process.Pid)
		if stranger == nil {
			require.NoError(t, h.Close())
			continue
		}
		require.NoError(t, h.Close())
		// PROF, sent after Close returned, ends it unless a signal sent
		// before did: KILL at once, a pending TERM before PROF.
		_ = stranger.Process.Signal(syscall.SIGPROF)
		_ = proctree.Wait(stranger)
		ws, ok := stranger.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled(), "stranger: %v", stranger.ProcessState)
		require.Equal(t, syscall.SIGPROF, ws.Signal(), "the stranger %d died of %v", stranger.Process.Pid, ws.Signal())
		return
	}
	t.Skip("another fork took the pid wanted 20 times")
}
