package shellsession

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A job that outlives the signal that ended its session gets the
// escalation, after its delay, also when the shell died of the signal at
// once; and a delete ends it at once. Without a cgroup, whose end kills
// what is left in it, the escalation waited for the shell alone: a job
// that ignored TERM or HUP ran on for good, and a later delete found the
// session ended and did nothing.
func TestSurvivorsOfASessionsEnd(t *testing.T) {
	t.Parallel()
	survivor := func(s *Session) int {
		t.Helper()
		_, out, _ := run(t, s, CommandOptions{Cmd: `(trap '' TERM HUP; exec sleep 1001) & echo $!`})
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		require.NoError(t, err, out)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		// Its traps set: it runs sleep (a HUP before that ended it).
		require.Eventually(t, func() bool {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			return string(comm) == "sleep\n"
		}, 10*time.Second, time.Millisecond)
		return pid
	}
	gone := func(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

	s := newSession(t, Options{Shell: "bash"})
	pid := survivor(s)
	require.NoError(t, s.Kill(syscall.SIGHUP, 200*time.Millisecond, syscall.SIGTERM))
	<-s.Done()
	require.False(t, gone(pid), "the job ignores HUP and TERM: KILL comes after the grace")
	require.Eventually(t, func() bool { return gone(pid) }, 30*time.Second, 20*time.Millisecond,
		"escalated to KILL after TERM's grace")

	s = newSession(t, Options{Shell: "bash"})
	pid = survivor(s)
	require.NoError(t, s.Kill(syscall.SIGTERM, time.Hour, 0))
	<-s.Done()
	require.NoError(t, s.Close())
	require.Eventually(t, func() bool { return gone(pid) }, 10*time.Second, 20*time.Millisecond,
		"the delete ends what outlived the kill")
}

// A command that ends its shell is measured to its end: without a cgroup
// its CPU time is the shell's and its reaped children's, which /proc no
// longer has once the shell is reaped, and the command reported 0.
func TestUsageOfACommandThatEndsItsShell(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash"}) // no cgroup
	r, _, _ := run(t, s, CommandOptions{Cmd: `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; exit 3`})
	require.Equal(t, 3, code(r))
	require.NotNil(t, r.Usage)
	require.Greater(t, r.Usage.CPU, 50*time.Millisecond, "the loop's CPU time, its child's")
}
