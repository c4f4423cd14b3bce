package processtest

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/require"
)

// StrangerAt starts `sleep 60` in a session of its own (pid, group and
// session all one number), carrying no tag — a program the engine did not
// start — as pid, which the pid that the kernel handed out last is set to
// the one before (as root; the test is skipped otherwise). It returns nil,
// after ending what it started, when another fork took pid first: the
// caller tries again. Tests that use it force pids, so they do not run in
// parallel with each other.
func StrangerAt(t *testing.T, pid int) *exec.Cmd {
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
