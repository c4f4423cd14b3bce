package resident

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/proctree"
)

// strangerAt starts `sleep 60` in a session of its own, carrying no tag —
// a program the engine did not start — as pid, which the pid that the
// kernel handed out last is set to the one before (as root). It returns
// nil, after ending what it started, when another fork took pid first.
func strangerAt(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		t.Skipf("cannot choose the next pid (needs root): %v", err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, proctree.Start(cmd))
	if cmd.Process.Pid != pid {
		_ = cmd.Process.Kill()
		_ = proctree.Wait(cmd)
		return nil
	}
	return cmd
}

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
		stranger := strangerAt(t, cmd.Process.Pid)
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
