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

// ticksAt counts as the kernel counts a process's start: a process started
// between two moments started in their ticks or between them.
func TestTicksAtCountsAsStartTimes(t *testing.T) {
	t.Parallel()
	before := time.Now()
	cmd, _ := tree(t, "echo $$; exec sleep 30", 1)
	after := time.Now()
	start, ok := StartTime(cmd.Process.Pid)
	require.True(t, ok)
	lo, ok := ticksAt(before)
	require.True(t, ok)
	hi, ok := ticksAt(after)
	require.True(t, ok)
	require.LessOrEqual(t, lo, start, "started before the moment before")
	require.LessOrEqual(t, start, hi, "started after the moment after")
}

// blockUSR1 is a python3 program that blocks SIGUSR1, so that one sent to
// it stays pending, where /proc shows it (see pendingUSR1): with "fork" it
// forks a child that does the same and exits, leaving the child in its
// group and session without a leader. It prints the pid of the one that
// stays, then sleeps.
const blockUSR1 = `
import os, signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
if sys.argv[1:] == ["fork"] and os.fork() != 0:
    os._exit(0)
print(os.getpid(), flush=True)
time.sleep(60)
`

// blocking starts blockUSR1 with cmd's environment in a session of its own,
// as the pid after last when last is positive (as root, with ns_last_pid),
// and returns its command and the pid of the process that stays, killed at
// the test's end. The command is waited for (reaped) once its process leaves
// when fork is set.
func blocking(t testing.TB, last int, fork bool, env ...string) (*exec.Cmd, int) {
	t.Helper()
	args := []string{"-c", blockUSR1}
	if fork {
		args = append(args, "fork")
	}
	cmd := exec.Command("python3", args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	if last > 0 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(last)), 0); err != nil {
			t.Skipf("cannot choose the next pid (needs root): %v", err)
		}
	}
	require.NoError(t, Start(cmd))
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan(), "no pid printed")
	pid, err := strconv.Atoi(sc.Text())
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		_ = Wait(cmd)
	})
	if fork {
		require.NoError(t, Wait(cmd))
	}
	return cmd, pid
}

// pendingUSR1 reports whether a SIGUSR1 sent to pid's process (or group)
// waits, blocked, for it to take it.
func pendingUSR1(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err)
			return mask&(1<<(syscall.SIGUSR1-1)) != 0
		}
	}
	t.Fatalf("no ShdPnd in %s", b)
	return false
}

// reaped starts a process tagged with tag that leads a session and exits
// at once, and returns its pid and when it was reaped.
func reaped(t testing.TB, tag string) (int, time.Time) {
	t.Helper()
	cmd := exec.Command("true")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), Tag(tag)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, Start(cmd))
	require.NoError(t, Wait(cmd))
	return cmd.Process.Pid, time.Now()
}

// A reaped process's group is found, and signalled, by its number while it
// is still its own — here by a member that cleared its environment (no
// tag), which started before the reap — but not once the number is
// another's: a program given it as its pid, group and session, or a group
// whose leader has left by then, made after the reap (a daemon's double
// fork). The pid is forced with ns_last_pid, so this test does not run in
// parallel; another fork can still take it first, and it tries again.
func TestLeftInGroupIsTheReapedProcesssOwn(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH")}

	t.Run("own", func(t *testing.T) {
		tag := "own-" + strconv.Itoa(os.Getpid())
		cmd, member := blocking(t, 0, true, env...)
		// The leader was reaped by blocking; nothing carries the tag.
		at := time.Now()
		require.Equal(t, []int{member}, LeftInGroup(cmd.Process.Pid, tag, at))
		require.NoError(t, SignalProcess(cmd.Process.Pid, tag, syscall.SIGUSR1, at))
		require.True(t, pendingUSR1(t, member), "the group's member did not get the signal")
	})

	for _, tc := range []struct {
		name string
		fork bool
	}{{"stranger", false}, {"leaderless-stranger", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tag := tc.name + "-" + strconv.Itoa(os.Getpid())
			for range 20 {
				pid, at := reaped(t, tag)
				if tc.fork {
					// Made in a later tick than the reap: a leader that
					// leaves at once outran no clock.
					tick, _ := ticksAt(at)
					for now, _ := ticksAt(time.Now()); now <= tick; now, _ = ticksAt(time.Now()) {
						time.Sleep(time.Millisecond)
					}
				}
				cmd, stays := blocking(t, pid-1, tc.fork, env...)
				if cmd.Process.Pid != pid {
					continue // another fork took the pid
				}
				require.Empty(t, LeftInGroup(pid, tag, at), "the stranger taken for the reaped process's own")
				require.NoError(t, SignalProcess(pid, tag, syscall.SIGUSR1, at))
				require.False(t, pendingUSR1(t, stays), "the stranger %d got the signal", stays)
				return
			}
			t.Skip("another fork took the pid wanted 20 times")
		})
	}
}

// A reaped process's group that no process is in any more (the common end:
// it left nothing) is answered without a listing of /proc; one with a
// member is still scanned, and the member found. Not parallel: it counts
// the package's listings.
func TestLeftInGroupOfAnEmptyGroupScansNothing(t *testing.T) {
	tag := "empty-" + strconv.Itoa(os.Getpid())
	pid, at := reaped(t, tag)
	before := Scans()
	require.Empty(t, LeftInGroup(pid, tag, at))
	require.Equal(t, before, Scans(), "an empty group was looked for in every process")

	leader, member := blocking(t, 0, true, "PATH="+os.Getenv("PATH"))
	before = Scans()
	require.Equal(t, []int{member}, LeftInGroup(leader.Process.Pid, tag, time.Now()))
	require.Greater(t, Scans(), before, "a group with a member was not scanned")
}

// BenchmarkLeftInGroup is the look for what a reaped process left in its
// group: none left (the group is gone), and one member left (the scan of
// every process that proves the group its own).
func BenchmarkLeftInGroup(b *testing.B) {
	tag := "bench-" + strconv.Itoa(os.Getpid())
	pid, _ := reaped(b, tag)
	b.Run("empty", func(b *testing.B) {
		for b.Loop() {
			LeftInGroup(pid, tag, time.Now())
		}
	})
	leader, _ := blocking(b, 0, true, "PATH="+os.Getenv("PATH"))
	b.Run("member", func(b *testing.B) {
		for b.Loop() {
			LeftInGroup(leader.Process.Pid, tag, time.Now())
		}
	})
}
