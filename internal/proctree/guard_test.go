package proctree

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain_guardHelper is the process TestGuardianEndsGroups kills: it
// starts a group leader in a session of its own, with a job beside it in
// its group, prints the leader's pid and waits to be killed.
func TestMain_guardHelper(t *testing.T) {
	if os.Getenv("CONCH_PROCTREE_GUARD_HELPER") == "" {
		t.Skip("only run as a helper process")
	}
	script := "sleep 300 & exec sleep 300"
	reaped := os.Getenv("CONCH_PROCTREE_GUARD_HELPER") == "reaped"
	if reaped {
		script = "sleep 300 </dev/null >/dev/null 2>&1 & exit 0"
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, Start(cmd))
	if reaped {
		require.NoError(t, Wait(cmd)) // the leader is gone; its job runs on in its group
	}
	os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
	time.Sleep(5 * time.Minute)
}

// TestGuardianEndsGroups: what a process started in sessions of their own
// ends once it is killed (SIGKILL, which it cannot answer): before, a
// session's shell and its command's loop lived on as orphans.
func TestGuardianEndsGroups(t *testing.T) {
	t.Parallel()
	guardianEnds(t, "1", 2)
}

// TestGuardianEndsGroupsOfReapedLeaders: a group whose leader ended and was
// reaped, a job it started with & still in it, ends too: the leader's reap
// unlisted the group, and the job lived on as an orphan.
func TestGuardianEndsGroupsOfReapedLeaders(t *testing.T) {
	t.Parallel()
	guardianEnds(t, "reaped", 1)
}

// guardianEnds runs the helper as mode says, waits until its group has
// members, kills it, and fails unless the group ends.
func guardianEnds(t *testing.T, mode string, members int) {
	helper := exec.Command(os.Args[0], "-test.run=^TestMain_guardHelper$", "-test.count=1")
	helper.Env = append(os.Environ(), "CONCH_PROCTREE_GUARD_HELPER="+mode)
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, Start(helper))
	t.Cleanup(func() { helper.Process.Kill(); Wait(helper) })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	require.Eventually(t, func() bool { return len(GroupMembers(pgid)) == members }, 10*time.Second, 10*time.Millisecond,
		"the group runs: %v", GroupMembers(pgid))

	require.NoError(t, helper.Process.Kill())
	require.Eventually(t, func() bool { return len(GroupMembers(pgid)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the group outlived the process that started it: %v", GroupMembers(pgid))
}

// TestGuardianInNoTree: the guardian runs once a group leader was started,
// is among neither this process's children nor its descendants, and a
// leader waited for is no longer its to end.
func TestGuardianInNoTree(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, Start(cmd))
	g := GuardianPID()
	require.NotZero(t, g)
	require.NoError(t, syscall.Kill(g, 0), "the guardian runs")
	require.NotContains(t, Children(), g)
	require.NotContains(t, Descendants(os.Getpid()), g)
	require.Contains(t, Children(), cmd.Process.Pid)
	require.NoError(t, cmd.Process.Kill())
	Wait(cmd)
	require.NoError(t, syscall.Kill(g, 0), "the guardian runs on")
}
