package proctree

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMain_guardHelper is the process TestGuardianEndsGroups kills: it
// starts a group leader in a session of its own, with a job beside it in
// its group, prints the leader's pid and waits to be killed.
func TestMain_guardHelper(t *testing.T) {
	if os.Getenv("CONCH_PROCTREE_GUARD_HELPER") == "" {
		t.Skip("only run as a helper process")
	}
	if os.Getenv("CONCH_PROCTREE_GUARD_HELPER") == "emptied" {
		emptiedGroups(t)
		return
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

// TestGuardianSparesGroupOfReusedNumber: a group whose leader was reaped
// while a job of it ran, and which emptied later, no longer names what the
// engine started once its number is handed out again: the guardian of an
// engine that dies then leaves the new group alone, and still kills a
// group that a job left behind. Before, the emptied group stayed listed
// and the guardian sent SIGKILL to whatever group had the number at the
// end: another daemon's job, or a program's `setsid` child.
//
// It runs in a pid namespace of its own (as root), where this test alone
// hands out pids, so that the number can be given to the new group at will
// through ns_last_pid.
func TestGuardianSparesGroupOfReusedNumber(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("choosing the next pid needs root")
	}
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("no pid namespace of its own: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--pid", "--fork", "--mount-proc",
		os.Args[0], "-test.run=^TestMain_guardReuse$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CONCH_PROCTREE_GUARD_REUSE=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, Start(cmd))
	err := Wait(cmd)
	require.NoError(t, err, "%s", out.String())
	require.NotContains(t, out.String(), "SKIP", "the scenario did not run")
}

// TestMain_guardReuse is TestGuardianSparesGroupOfReusedNumber's scenario,
// run as the first process of a pid namespace of its own.
func TestMain_guardReuse(t *testing.T) {
	if os.Getenv("CONCH_PROCTREE_GUARD_REUSE") == "" {
		t.Skip("only run as a helper process")
	}
	require.Equal(t, 1, os.Getpid(), "not the first process of a pid namespace")
	ensureGuardian() // now, so that its start takes no pid chosen below

	helper := exec.Command(os.Args[0], "-test.run=^TestMain_guardHelper$", "-test.count=1")
	helper.Env = append(os.Environ(), "CONCH_PROCTREE_GUARD_HELPER=emptied")
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, Start(helper))
	t.Cleanup(func() { helper.Process.Kill(); Wait(helper) })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	var emptied, left, guardian int
	_, err = fmt.Sscan(line, &emptied, &left, &guardian)
	require.NoError(t, err, "line %q", line)
	require.Empty(t, GroupMembers(emptied))
	require.NotEmpty(t, GroupMembers(left))

	// A new group gets the emptied one's number: a one-shot whose leader
	// exits, its job left in the group, as another daemon's would.
	var victim *exec.Cmd
	for try := 0; victim == nil; try++ {
		require.Less(t, try, 20, "the number %d was not handed out again", emptied)
		require.NoError(t, os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(emptied-1)), 0))
		cmd := exec.Command("sh", "-c", "sleep 300 & exit 0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		require.NoError(t, Start(cmd))
		require.NoError(t, Wait(cmd))
		if cmd.Process.Pid == emptied {
			victim = cmd
		} else {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	t.Cleanup(func() { syscall.Kill(-emptied, syscall.SIGKILL) })
	require.NotEmpty(t, GroupMembers(emptied), "the new group has its job")

	// The engine dies; its guardian acts and exits.
	require.NoError(t, helper.Process.Kill())
	Wait(helper)
	eventually(t, "the guardian exits", func() bool { _, ok := readStat(guardian); return !ok })

	// A process sent SIGKILL lives on until it is next scheduled: its
	// group empties a moment after the guardian's exit, on a loaded
	// machine later (the group still had its job when looked at at once).
	// It never empties if the guardian spared it (10 s).
	eventually(t, "the group a job was left in ends with the engine", func() bool { return len(GroupMembers(left)) == 0 })
	require.NotEmpty(t, GroupMembers(emptied), "the guardian killed a group that was not its engine's")
}

// emptiedGroups is the engine of TestMain_guardReuse: it starts two
// one-shots whose leaders exit and are reaped while a job of theirs runs,
// lets the guardian take that in, then ends the first one's job, and prints
// the first's group, the second's, and the guardian's pid. Then it waits to
// be killed.
func emptiedGroups(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	emptied := exec.Command("sh", "-c", "cat <&3 >/dev/null & echo $!; exit 0")
	emptied.ExtraFiles = []*os.File{r}
	emptied.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := emptied.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, Start(emptied))
	r.Close()
	var job int
	_, err = fmt.Fscan(out, &job)
	require.NoError(t, err)
	require.NoError(t, Wait(emptied))

	left := exec.Command("sh", "-c", "sleep 300 & exit 0")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, Start(left))
	require.NoError(t, Wait(left))
	require.NotEmpty(t, GroupMembers(left.Process.Pid))

	// The guardian has read every line once none is left in its pipe and
	// it sleeps (in its read: it waits for nothing else).
	g := GuardianPID()
	require.NotZero(t, g)
	eventually(t, "the guardian reads its lines", func() bool {
		n, err := unix.IoctlGetInt(int(guardianFD.Load())-1, unix.TIOCINQ)
		return err == nil && n == 0 && Sleeping(g)
	})
	require.Equal(t, []int{job}, GroupMembers(emptied.Process.Pid), "the job runs on in the group")

	w.Close() // the job ends; the reaper here reaps it, and the group is gone
	eventually(t, "the job is reaped", func() bool { _, ok := readStat(job); return !ok })
	// A group made of the number in the tick of the reap, or the next,
	// counts as the engine's (see guardianScript): the number is given
	// out again only after that, as a busy machine's wrap would.
	time.Sleep(30 * time.Millisecond)
	fmt.Println(emptied.Process.Pid, left.Process.Pid, g)
	time.Sleep(5 * time.Minute)
}

// TestGuardianScriptProvesGroups runs the guardian's script under each
// POSIX shell at hand (it must not need bash) with lines written here, and
// checks what it kills at end-of-file: a group only when one of its
// members started no later than the group's bound (see guardianScript).
// The members' command name holds spaces and parentheses, as a program's
// name may.
func TestGuardianScriptProvesGroups(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	odd := filepath.Join(t.TempDir(), "x) 9 9 (y")
	b, err := os.ReadFile(sleep)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(odd, b, 0o755))

	for _, shell := range [][]string{{"dash"}, {"bash", "--posix"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(shell[0]); err != nil {
			continue
		}
		t.Run(shell[0], func(t *testing.T) {
			t.Parallel()
			// A group whose leader is gone, a job left in it.
			orphaned := func() (pgid int, start uint64) {
				cmd := exec.Command("sh", "-c", `"$0" 300 & exit 0`, odd)
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				require.NoError(t, Start(cmd))
				require.NoError(t, Wait(cmd))
				pgid = cmd.Process.Pid
				t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
				members := GroupMembers(pgid)
				require.Len(t, members, 1)
				start, ok := StartTime(members[0])
				require.True(t, ok)
				return pgid, start
			}
			// A group whose leader runs.
			led := func() (pgid int, start uint64) {
				cmd := exec.Command(odd, "300")
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				require.NoError(t, Start(cmd))
				t.Cleanup(func() { cmd.Process.Kill(); Wait(cmd) })
				start, ok := StartTime(cmd.Process.Pid)
				require.True(t, ok)
				return cmd.Process.Pid, start
			}
			line := func(op string, pid int, ticks uint64) string {
				return fmt.Sprintf("%s %d %d\n", op, pid, ticks)
			}

			var lines strings.Builder
			var killed, spared []int
			// Reaped with a member left that started before the reap, or
			// in its tick: killed.
			p, s := orphaned()
			lines.WriteString(line("+", p, s-5) + line("-", p, s))
			killed = append(killed, p)
			// Reaped with none left, and the number made a new group's
			// since: spared.
			p, s = orphaned()
			lines.WriteString(line("+", p, s-5) + line("-", p, s-1))
			spared = append(spared, p)
			// Not reaped here, its leader gone as the engine died: killed.
			p, s = orphaned()
			lines.WriteString(line("+", p, s-5))
			killed = append(killed, p)
			runGuardianScript(t, shell, lines.String(), "")
			for _, p := range spared {
				require.NotEmpty(t, GroupMembers(p), "group %d was killed", p)
			}
			for _, p := range killed {
				eventually(t, fmt.Sprintf("group %d ends", p), func() bool { return len(GroupMembers(p)) == 0 })
			}

			// A line lost before the groups' members started: a group not
			// reaped here may be one whose "-" line was lost, and is
			// spared unless a member started no later than the loss or
			// its start.
			lines.Reset()
			p, s = orphaned()
			lines.WriteString(line("+", p, s-5))
			staleGroup := p
			lost := s - 3
			p, s = led()
			lines.WriteString(line("+", p, s))
			runGuardianScript(t, shell, lines.String(), strconv.FormatUint(lost, 10)+"\n")
			require.NotEmpty(t, GroupMembers(staleGroup), "a group listed by a lost line was killed")
			eventually(t, "the running leader's group ends", func() bool { return len(GroupMembers(p)) == 0 })
		})
	}
}

// runGuardianScript runs guardianScript under shell, writes it lines and,
// on its other pipe, loss, closes both as this process's end would, and
// waits for it to exit.
func runGuardianScript(t *testing.T, shell []string, lines, loss string) {
	t.Helper()
	cmd := exec.Command(shell[0], append(shell[1:], "-c", guardianScript)...)
	cmd.Stdin = strings.NewReader(lines)
	lossR, lossW, err := os.Pipe()
	require.NoError(t, err)
	cmd.ExtraFiles = []*os.File{lossR}
	require.NoError(t, Start(cmd))
	lossR.Close()
	_, err = lossW.WriteString(loss)
	require.NoError(t, err)
	lossW.Close()
	done := make(chan error, 1)
	go func() { done <- Wait(cmd) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the guardian did not exit")
	}
}

// TestTellGuardianRecordsFirstLoss: a line that does not fit in the
// guardian's pipe is lost, and the first loss is written, with its tick,
// to the pipe the guardian reads at the end (see guardianScript); before,
// a lost "-" line left a group listed that the guardian killed unproven.
// It runs in a process of its own, whose guardian's pipes are this test's.
func TestTellGuardianRecordsFirstLoss(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMain_guardLoss$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CONCH_PROCTREE_GUARD_LOSS=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, Start(cmd))
	require.NoError(t, Wait(cmd), "%s", out.String())
	require.Contains(t, out.String(), "--- PASS: TestMain_guardLoss")
}

// TestMain_guardLoss is TestTellGuardianRecordsFirstLoss's check, run in a
// process where nothing else tells the guardian.
func TestMain_guardLoss(t *testing.T) {
	if os.Getenv("CONCH_PROCTREE_GUARD_LOSS") == "" {
		t.Skip("only run as a helper process")
	}
	guardianTried.Store(true) // no real guardian: the pipes below are it
	var lines, loss [2]int
	require.NoError(t, syscall.Pipe2(lines[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK))
	require.NoError(t, syscall.Pipe2(loss[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK))
	guardianFD.Store(int32(lines[1]) + 1)
	guardianLoss = loss[1]

	before, ok := ticksAt(time.Now())
	require.True(t, ok)
	tellGuardian('+', 4242)
	var buf [1 << 16]byte
	n, err := syscall.Read(lines[0], buf[:])
	require.NoError(t, err)
	require.Regexp(t, `^\+ 4242 \d+\n$`, string(buf[:n]))
	_, err = syscall.Read(loss[0], buf[:])
	require.ErrorIs(t, err, syscall.EAGAIN, "a loss told of while none happened")

	for { // fill the pipe, as a guardian that does not read would
		if n, _ := syscall.Write(lines[1], []byte("+ 999999999 0\n")); n <= 0 {
			break
		}
	}
	tellGuardian('-', 4242)
	tellGuardian('-', 4243)
	after, ok := ticksAt(time.Now())
	require.True(t, ok)
	n, err = syscall.Read(loss[0], buf[:])
	require.NoError(t, err)
	require.Regexp(t, `^\d+\n$`, string(buf[:n]), "the first loss, once")
	tick, err := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	require.NoError(t, err)
	require.True(t, before <= tick && tick <= after, "the loss's tick %d is not the time of the loss, %d to %d", tick, before, after)
}

// TestGuardianLinesCallsFew: the guardian's shell handles a one-shot's two
// lines, "+" and "-" of a group gone, in few system calls (strace counts
// them, where it is installed): 32 for these lines, where a redirection
// of each probe's stderr, which is /dev/null already, made them 40.
func TestGuardianLinesCallsFew(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("no strace")
	}
	const n = 500
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "+ %d 100\n- %d 101\n", 4000000+i, 4000000+i) // past any pid_max: no group
	}
	out := filepath.Join(t.TempDir(), "calls")
	cmd := exec.Command(strace, "-c", "-o", out, "/bin/sh", "-c", guardianScript)
	cmd.Stdin = strings.NewReader(lines.String()) // a pipe, read as the guardian's is
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	cmd.ExtraFiles = []*os.File{devnull} // its fd 3, the loss pipe: empty
	if err := cmd.Run(); err != nil {
		t.Skipf("strace cannot trace here: %v", err)
	}
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var total int
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[len(f)-1] == "total" {
			total, err = strconv.Atoi(f[3])
			require.NoError(t, err, l)
		}
	}
	require.NotZero(t, total, "strace's count: %s", b)
	t.Logf("%d calls for %d one-shots", total, n)
	require.LessOrEqual(t, total, 36*n, "calls for %d one-shots' lines", n)
}
