package daemonrec

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/procfs"
)

// A daemon recorded runs while its pid is held by the process its
// instance record names: not once that process is a zombie, nor when its
// pid names another process, nor when the record is of another pid
// namespace.
func TestRunning(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(state, Dir), 0o700))
	record := func(name string, p Process) {
		b, err := json.Marshal(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(state, Dir, name+".json"), b, 0o600))
	}
	daemon := exec.Command("sleep", "60")
	require.NoError(t, daemon.Start())
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
	})
	start, ok := procfs.StartTime(daemon.Process.Pid)
	require.True(t, ok)
	rec := Process{PID: daemon.Process.Pid, StartTime: start, BootID: BootID(), PIDNS: PIDNamespace()}
	require.False(t, Running(state, rec.PID), "no record names it")
	record("daemon", rec)
	require.True(t, Running(state, rec.PID))
	require.False(t, Running(state, 0))

	// Its pid held by another process: this one, under a record that
	// names another start.
	record("reused", Process{PID: os.Getpid(), StartTime: 1, BootID: BootID(), PIDNS: PIDNamespace()})
	require.False(t, Running(state, os.Getpid()))
	other := Self()
	other.PIDNS = "pid:[1]"
	record("reused", other)
	require.False(t, Running(state, os.Getpid()), "a record of another pid namespace")
	require.True(t, other.Unseen())
	require.False(t, Self().Unseen())

	// Killed, and not waited for: a zombie.
	require.NoError(t, daemon.Process.Kill())
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		st, ok := procfs.ReadStat(rec.PID)
		require.True(t, ok, "reaped: the test tests nothing")
		if st.State == 'Z' {
			break
		}
		require.True(t, time.Now().Before(deadline), "no zombie 30 s later")
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, Running(state, rec.PID), "a zombie")
}
