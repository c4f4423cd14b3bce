package daemonrec

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/procfs"
	"github.com/conchsh/conch/internal/statefile"
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

// Running reads only what can be a record: a FIFO named as one is skipped
// rather than waited on for ever, and so is a directory, and a file larger
// than a record can be is skipped unread, even one that begins as a record
// of a live daemon. Before, the FIFO hung the CLI, the Go client and the
// daemon (opened to be read whole), and any file was read whole.
func TestRunningSkipsWhatIsNotARecord(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	dir := filepath.Join(state, Dir)
	require.NoError(t, os.Mkdir(dir, 0o700))
	fifo := filepath.Join(dir, "a-fifo.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "b-dir.json"), 0o700))
	self, err := json.Marshal(Self())
	require.NoError(t, err)
	padded := append(self, bytes.Repeat([]byte(" "), statefile.MaxSize)...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c-large.json"), padded, 0o600))

	require.False(t, runningWithin(t, state, os.Getpid(), fifo), "a record larger than the bound was read")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d-daemon.json"), self, 0o600))
	require.True(t, runningWithin(t, state, os.Getpid(), fifo), "the records after what was skipped are read")
}

// runningWithin is Running under a hang guard: a call stuck on the FIFO
// fifo is let go (the FIFO opened for writing, and closed) before the test
// fails, so that no goroutine is left blocked.
func runningWithin(t *testing.T, state string, pid int, fifo string) bool {
	t.Helper()
	done := make(chan bool, 1)
	go func() { done <- Running(state, pid) }()
	select {
	case running := <-done:
		return running
	case <-time.After(20 * time.Second): // a hang guard
	}
	for {
		// O_RDWR never blocks on a FIFO: the stuck open returns, and its
		// read sees the end once this is closed.
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.Close()
		}
		select {
		case <-done:
			t.Fatal("Running waited 20 s on a FIFO named as a record")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
