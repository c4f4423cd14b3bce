package exec

import (
	"context"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// treeScript starts a background child, a child that called setsid with a
// child of its own, and an orphan (its parent exited), prints their pids on
// one line and waits.
const treeScript = `sleep 60 & a=$!
setsid sh -c 'sleep 60 & echo $! > '"$T"'/gc; wait' & b=$!
sh -c 'setsid sleep 60 & echo $! > '"$T"'/orphan'
while [ ! -s "$T"/gc ] || [ ! -s "$T"/orphan ]; do sleep 0.01; done
echo $a $b $(cat "$T"/gc) $(cat "$T"/orphan) ready
wait`

// INT is not in the table: a non-interactive shell starts background jobs
// with SIGINT ignored, so it reaches them without ending them.
func TestKillReachesTheWholeTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kind process.Kind
		sig  syscall.Signal
	}{
		{"term", process.KindExec, syscall.SIGTERM},
		{"kill", process.KindExec, syscall.SIGKILL},
		{"hup", process.KindExec, syscall.SIGHUP},
		{"pty-term", process.KindPTY, syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Kind: tc.kind, Cmd: treeScript, Env: map[string]string{"T": t.TempDir()}})
			waitOutput(t, p, "ready")
			line, _, _ := strings.Cut(logText(p.Log(), 0), "ready")
			tree := append(pids(t, line), p.Info().PID)
			for _, pid := range tree {
				require.True(t, proctree.Alive(pid), "pid %d of %v is not running before the kill", pid, tree)
			}
			ids := proctree.IdentsOf(tree...)
			require.NoError(t, p.Kill(tc.sig, 0, 0))
			r := wait(t, p)
			assert.False(t, r.Reason != process.Signaled || r.Signal != process.SignalName(tc.sig), "result %s, want signaled %s", show(r), process.SignalName(tc.sig))
			requireGone(t, ids)
		})
	}
}

// A process that handles TERM and goes on is ended by the escalation.
const trapsTerm = `trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done`

// TestEscalation: a process that survives TERM ends by the signal it is
// escalated to. The shell runs its trap once its sleep is over, and on a
// busy machine the escalation can come first (it is due 200 ms after the
// TERM): got-term is then never written. That TERM did not end it is shown
// by the result, which is the escalation's signal, not TERM.
func TestEscalation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		to   syscall.Signal
		want string
	}{
		{"default-kill", 0, "KILL"},
		{"to-kill", syscall.SIGKILL, "KILL"},
		{"to-hup", syscall.SIGHUP, "HUP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: trapsTerm})
			waitOutput(t, p, "ready")
			require.NoError(t, p.Kill(syscall.SIGTERM, 200*time.Millisecond, tc.to))
			r := wait(t, p)
			assert.False(t, r.Reason != process.Signaled || r.Signal != tc.want, "result %s, want signaled %s", show(r), tc.want)
		})
	}
}

func TestKillAfterTheEndKeepsTheResult(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "exit 4"})
	wait(t, p)
	require.NoError(t, p.Kill(syscall.SIGKILL, 0, 0))
	r := p.Info().Result
	assert.True(t, sameResult(*r, process.ExitedWith(4)), "result changed to %s", show(*r))
}

func TestExecutionTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		cmd        string
		wantSignal string
	}{
		{"term", "echo ready; sleep 60", "TERM"},
		{"kill-5s-after-ignored-term", trapsTerm, "KILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: tc.cmd, ExecutionTimeout: 300 * time.Millisecond})
			r := wait(t, p)
			assert.False(t, r.Reason != process.TimedOut || r.Signal != tc.wantSignal, "result %s, want timed_out by %s", show(r), tc.wantSignal)
		})
	}
	t.Run("not-reached", func(t *testing.T) {
		t.Parallel()
		p := start(t, Options{Cmd: "exit 2", ExecutionTimeout: time.Minute})
		r := wait(t, p)
		assert.True(t, sameResult(r, process.ExitedWith(2)), "result %s", show(r))
	})
}

// The end is reported at the exit although a background child keeps stdout
// (or the terminal) open; output drains for DrainDelay more, and what comes
// after is dropped.
func TestDrainAfterExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind process.Kind
		cmd  string
	}{
		// The child writes mid once the shell ($$) has exited and been
		// reaped: a fixed sleep came before the shell's own echo now and
		// then on a busy machine.
		{process.KindExec, `(while kill -0 $$ 2>/dev/null; do sleep 0.01; done; echo mid; sleep 5; echo late) & echo $! early`},
		// A PTY's foreground group gets SIGHUP when its session leader
		// exits, so the child ignores it before the leader may exit.
		{process.KindPTY, `(trap '' HUP; : > "$T/trapped"; while kill -0 $$ 2>/dev/null; do sleep 0.01; done; echo mid; sleep 5; echo late) &
while [ ! -e "$T/trapped" ]; do sleep 0.01; done; echo $! early`},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Kind: tc.kind, Cmd: tc.cmd, Env: map[string]string{"T": t.TempDir()}})
			select {
			case <-p.Exited():
			case <-time.After(30 * time.Second):
				t.Fatal("Exited not closed at the exit")
			}
			require.Equal(t, process.Terminal, p.Info().State, "state once Exited is closed")
			require.NotNil(t, p.Info().Result, "result once Exited is closed")
			select {
			case <-p.Done():
				t.Fatal("done at the exit: the background child's output was not waited for")
			default:
			}
			r := wait(t, p)
			require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
			out := logText(p.Log(), 0)
			child := pids(t, strings.Fields(out)[0])[0]
			require.True(t, proctree.Alive(child), "the background child is gone: the test proves nothing")
			assert.False(t, !strings.Contains(out, "early") || !strings.Contains(out, "mid") || strings.Contains(out, "late"), "output %q: want early and mid, not late", out)
			assert.True(t, p.Log().Closed(), "log open after done")
		})
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	t.Run("closed-reads-eof", func(t *testing.T) {
		t.Parallel()
		p := start(t, Options{Cmd: "cat; echo eof"})
		r := wait(t, p)
		require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
		err := p.WriteStdin([]byte("x"))
		assert.ErrorIs(t, err, process.ErrStdinNotOpen, "WriteStdin on closed stdin")
		err = p.CloseStdin()
		assert.ErrorIs(t, err, process.ErrStdinNotOpen, "CloseStdin on closed stdin")
	})
	t.Run("open", func(t *testing.T) {
		t.Parallel()
		p := start(t, Options{Cmd: "read a; echo got $a; cat; echo eof", Stdin: process.StdinOpen})
		require.NoError(t, p.WriteStdin([]byte("one\n")))
		waitOutput(t, p, "got one")
		require.NoError(t, p.WriteStdin([]byte("two\n")))
		require.NoError(t, p.CloseStdin())
		r := wait(t, p)
		require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
		got := logText(p.Log(), logstore.Stdout)
		assert.Equal(t, "got one\ntwo\neof\n", got, "output %q", got)
		err := p.CloseStdin()
		assert.ErrorIs(t, err, process.ErrStdinNotOpen, "CloseStdin twice")
	})
	// The record says closed, while the process runs, once a write or
	// an end-of-file would be refused: after end-of-file was sent, and
	// after the program closed its stdin (found by the write that failed).
	t.Run("record-says-closed", func(t *testing.T) {
		t.Parallel()
		p := start(t, Options{Cmd: "sleep 30", Stdin: process.StdinOpen})
		defer p.Kill(syscall.SIGKILL, 0, 0)
		require.Equal(t, process.StdinOpen, p.Info().Stdin)
		require.NoError(t, p.CloseStdin())
		require.Equal(t, process.StdinClosed, p.Info().Stdin)
		q := start(t, Options{Cmd: "exec 0<&-; echo closed; sleep 30", Stdin: process.StdinOpen})
		defer q.Kill(syscall.SIGKILL, 0, 0)
		waitOutput(t, q, "closed")
		require.NoError(t, q.WriteStdin([]byte("x")))
		require.Eventually(t, func() bool { return q.Info().Stdin == process.StdinClosed }, 10*time.Second, 5*time.Millisecond,
			"the record still says %s", q.Info().Stdin)
		require.ErrorIs(t, q.WriteStdin([]byte("y")), process.ErrStdinNotOpen)
		// Its end-of-file is refused likewise, as the record says: it
		// was taken once, and refused only the second time.
		require.ErrorIs(t, q.CloseStdin(), process.ErrStdinNotOpen)
		require.Equal(t, process.StdinClosed, q.Info().Stdin)
	})
	// What the process left in its pipe after end-of-file is dropped and
	// counted, though the feeder had closed the pipe by its end (it was
	// counted as none); what it read is not, and no descriptor of the
	// pipe's is left.
	t.Run("unread-after-eof-is-dropped", func(t *testing.T) {
		t.Parallel()
		// The process waits on gate before it reads: until the feeder
		// has written everything and closed the pipe.
		gate := filepath.Join(t.TempDir(), "gate")
		require.NoError(t, syscall.Mkfifo(gate, 0o600))
		g, err := os.OpenFile(gate, os.O_RDWR, 0)
		require.NoError(t, err)
		defer g.Close()
		p := start(t, Options{Cmd: "read x <" + gate + "; head -c 10 >/dev/null", Stdin: process.StdinOpen})
		pipe := fdLink(t, p.in)
		const total = 1000 // what the pipe holds
		require.NoError(t, p.WriteStdin(make([]byte, total)))
		require.NoError(t, p.CloseStdin())
		eventually(t, "the feeder closes the pipe", p.feed.ended)
		_, err = g.Write([]byte("\n"))
		require.NoError(t, err)
		r := wait(t, p)
		require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
		require.Equal(t, int64(total-10), p.Info().StdinDroppedBytes)
		require.Zero(t, linksTo(t, pipe), "a descriptor of the pipe is left")
	})
	t.Run("write-after-exit", func(t *testing.T) {
		t.Parallel()
		p := start(t, Options{Cmd: "exit 0", Stdin: process.StdinOpen})
		wait(t, p)
		err := p.WriteStdin([]byte("late"))
		assert.ErrorIs(t, err, process.ErrStdinNotOpen, "WriteStdin after the exit")
	})
}

func TestStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cmd, want string
	}{
		{"term", "echo ready; sleep 60", "TERM"},
		{"kill-after-grace", trapsTerm, "KILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: tc.cmd})
			waitOutput(t, p, "ready")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			require.NoError(t, p.Stop(ctx))
			select {
			case <-p.Done():
			default:
				t.Fatal("Stop returned before the process was done")
			}
			r := p.Info().Result
			assert.False(t, r.Reason != process.Signaled || r.Signal != tc.want, "result %s, want signaled %s", show(*r), tc.want)
		})
	}
	t.Run("leftovers-after-exit", func(t *testing.T) {
		t.Parallel()
		p := start(t, Options{Cmd: `sh -c "trap '' TERM; exec sleep 60" >/dev/null & echo $!`})
		wait(t, p)
		child := pids(t, logText(p.Log(), logstore.Stdout))[0]
		require.True(t, proctree.Alive(child), "the leftover is gone before Stop")
		ids := proctree.IdentsOf(child)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		require.NoError(t, p.Stop(ctx))
		requireGone(t, ids)
		got := proctree.Tagged(p.ID())
		assert.Empty(t, got, "tagged processes left: %v", got)
	})
}

// forkChain is the tree of the issue: its first process exits at once,
// leaving a chain of subshells in its process group that each fork the next
// one and exit. A scan of /proc can miss it, and signals sent one by one
// come too late for a link that has forked the next; a signal to the group
// reaches every link at once.
const forkChain = `h(){ /bin/true; h & }; h &`

// groupLeft reports whether process group pgid still has a process tagged
// with id in it.
func groupLeft(pgid int, id string) bool {
	for _, pid := range proctree.Tagged(id) {
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// Stop reaches the process group of an ended process: a chain that forks
// on, and a member that cleared its environment (env -i), which no scan for
// the tag finds, go with the group.
func TestStopEndsTheGroupOfAnEndedProcess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, cmd string }{
		{"chain", forkChain},
		{"untagged-member", "sleep 60 & env -i sleep 61 & echo $!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: tc.cmd})
			pgid := p.Info().PID
			t.Cleanup(func() { // whatever the outcome, nothing may outlive the test
				for i := 0; i < 100 && groupLeft(pgid, p.ID()); i++ {
					_ = syscall.Kill(-pgid, syscall.SIGKILL)
					time.Sleep(10 * time.Millisecond)
				}
			})
			r := wait(t, p)
			require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
			if out := pids(t, logText(p.Log(), logstore.Stdout)); len(out) > 0 {
				untagged := out[0]
				t.Cleanup(func() {
					if g, err := syscall.Getpgid(untagged); err == nil && g == pgid {
						_ = syscall.Kill(untagged, syscall.SIGKILL)
					}
				})
			}
			eventually(t, "the group running", func() bool { return groupLeft(pgid, p.ID()) })
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			require.NoError(t, p.Stop(ctx))
			eventually(t, "the process group gone", func() bool {
				return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
			})
		})
	}
}

// leftBehind starts a process that exits at once leaving an orphan in its
// group, a process in a session of its own, and a group member that cleared
// its environment (so carries no tag), and returns it ended with their
// pids, each killed at the test's end whatever happens.
func leftBehind(t *testing.T) (*Process, []int) {
	t.Helper()
	p := start(t, Options{Cmd: `sh -c 'sleep 61 & echo $!'; setsid sleep 62 & echo $!; env -i sleep 63 & echo $!`})
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	left := pids(t, logText(p.Log(), logstore.Stdout))
	require.Len(t, left, 3)
	start := make(map[int]uint64)
	for _, pid := range left {
		start[pid], _ = proctree.StartTime(pid)
	}
	t.Cleanup(func() {
		for _, pid := range left {
			if st, ok := proctree.StartTime(pid); ok && st == start[pid] {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for _, pid := range left {
		require.True(t, proctree.Alive(pid), "pid %d of %v is not running", pid, left)
	}
	return p, left
}

// Kill of a process whose first process has exited reaches what it left:
// its group (a member without the tag included) and what carries its tag
// (one in a session of its own included). Its result does not change.
func TestKillReachesWhatAnEndedProcessLeft(t *testing.T) {
	t.Parallel()
	p, left := leftBehind(t)
	ids := proctree.IdentsOf(left...)
	require.NoError(t, p.Kill(syscall.SIGTERM, 0, 0))
	requireGone(t, ids)
	assert.True(t, sameResult(*p.Info().Result, process.ExitedWith(0)), "result changed to %s", show(*p.Info().Result))
}

// Stop of an ended process ends what it left, a group member without the
// tag included, also when nothing tagged is left in the group.
func TestStopEndsWhatAnEndedProcessLeft(t *testing.T) {
	t.Parallel()
	p, left := leftBehind(t)
	// Only the untagged member is left in the group.
	require.NoError(t, syscall.Kill(left[0], syscall.SIGKILL))
	require.NoError(t, syscall.Kill(left[1], syscall.SIGKILL))
	eventually(t, "the tagged ones gone", func() bool { return len(proctree.Tagged(p.ID())) == 0 })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
	require.False(t, proctree.Alive(left[2]), "the group's untagged member outlived Stop")
}

// An interrupt that lands while bash sets up its wait for a program it has
// just forked is not lost: bash 5.2 takes it with a handler that re-raises it
// for ever, its child a zombie, and the process never ends. Here strace holds
// bash in that moment for 300 ms — the rt_sigaction that installs the wait's
// handler, found by tracing the same script once — while it is
// interrupted: the interrupt waits for the shell to sleep in its wait.
func TestInterruptWhileTheShellSetsUpItsWait(t *testing.T) {
	strace := processtest.Strace(t)
	t.Parallel()
	dir := t.TempDir()
	// Builtins only until the file exists, so that strace attaches before
	// the fork; then a program that is not the last command, so forked
	// and waited for.
	script := `while [ ! -e "$F" ]; do :; done; sleep 30; true`
	shellAndSleep := func(name string, args ...string) (*Process, func()) {
		p := start(t, Options{Cmd: script, Env: map[string]string{"F": filepath.Join(dir, name)}})
		detach := processtest.AttachStrace(t, strace, p.Info().PID, args...)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
		require.Eventually(t, func() bool {
			for _, pid := range proctree.Descendants(p.Info().PID) {
				if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(comm) == "sleep\n" {
					return true
				}
			}
			return false
		}, 10*time.Second, time.Millisecond, "sleep never ran")
		return p, detach
	}

	trace := filepath.Join(dir, "trace")
	dry, detach := shellAndSleep("dry", "-e", processtest.ForkTrace, "-o", trace)
	require.Eventually(t, func() bool { return proctree.Sleeping(dry.Info().PID) }, 10*time.Second, time.Millisecond,
		"the shell never waited for its sleep")
	detach() // strace has written the whole trace once it has ended
	require.NoError(t, dry.Kill(syscall.SIGKILL, 0, 0))
	wait(t, dry)
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	nth := processtest.WaitHandlerCall(string(b))
	require.NotZero(t, nth, "no SIGINT handler installed after a fork in:\n%s", b)

	p, detach := shellAndSleep("held", "-e", "trace=rt_sigaction", "-o", os.DevNull,
		"-e", "inject=rt_sigaction:delay_exit=300000:when="+strconv.Itoa(nth))
	defer detach()
	require.NoError(t, p.Kill(syscall.SIGINT, 0, 0))
	r := processtest.Wait(t, p, 10*time.Second)
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	require.Equal(t, "INT", r.Signal, "%+v", r)
}

// TestSignalsReachStoppedProcess: a one-shot whose program is stopped (it
// sent itself SIGSTOP) is continued after an interrupt or TERM, so that
// the signal ends it now; before, the signal waited, pending, for a
// SIGCONT that never came.
func TestSignalsReachStoppedProcess(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(process.SignalName(sig), func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: `sh -c 'kill -STOP $$; echo resumed'`})
			processtest.WaitStopped(t, func() []int {
				return append(proctree.Descendants(p.Info().PID), p.Info().PID)
			}, 30*time.Second)
			require.NoError(t, p.Kill(sig, 0, 0))
			r := wait(t, p)
			require.Equal(t, process.Signaled, r.Reason, "%+v", r)
			require.Equal(t, process.SignalName(sig), r.Signal)
			require.Empty(t, logText(p.Log(), logstore.Stdout), "the program ran on after the signal")
		})
	}
}

// diedOf ends cmd with SIGPROF, which nobody else sends it, and returns
// the signal it died of: SIGPROF unless a signal sent before ended it
// (KILL ends it at once; a pending TERM is taken before PROF, a higher
// number).
func diedOf(t *testing.T, cmd *osexec.Cmd) syscall.Signal {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGPROF)
	_ = proctree.Wait(cmd)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled(), "stranger %d: %v", cmd.Process.Pid, cmd.ProcessState)
	return ws.Signal()
}

// Once an ended process's group has emptied, its number is free: an
// unrelated program given it as its pid and group (a daemon, `setsid cmd`)
// gets no signal from a kill or a stop (DELETE) of the process's record.
// The pid is forced with ns_last_pid, so these tests do not run in
// parallel; another fork can still take it first, and they try again.
func TestEndedProcessSparesAStrangerGivenItsPid(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*Process) error
	}{
		{"kill", func(p *Process) error { return p.Kill(syscall.SIGKILL, 0, 0) }},
		{"kill-term", func(p *Process) error { return p.Kill(syscall.SIGTERM, 0, 0) }},
		{"stop", func(p *Process) error {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			return p.Stop(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p *Process
			var stranger *osexec.Cmd
			for range 20 {
				p = start(t, Options{Argv: []string{"true"}})
				r := wait(t, p)
				require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
				if stranger = processtest.StrangerAt(t, p.Info().PID); stranger != nil {
					break
				}
			}
			if stranger == nil {
				t.Skip("another fork took the pid wanted 20 times")
			}
			done := false
			t.Cleanup(func() {
				if !done {
					_ = stranger.Process.Kill()
					_ = proctree.Wait(stranger)
				}
			})
			require.NoError(t, tc.end(p))
			sig := diedOf(t, stranger)
			done = true
			require.Equal(t, syscall.SIGPROF, sig, "the stranger %d died of %v, sent for process %s", stranger.Process.Pid, sig, p.ID())
		})
	}
}

// TestEscalationReachesLeftovers: the KILL of an execution timeout, and a
// kill's escalateTo, reach what the process left running when the first
// signal ended the process itself but not a child that ignores it, in its
// process group or out of it (setsid). They were sent only while the
// process ran: the shell died of TERM, and its child ran on after the
// process was reported timed out and stopped.
func TestEscalationReachesLeftovers(t *testing.T) {
	t.Parallel()
	// The child says its pid once it ignores TERM.
	const child = `sh -c "trap '' TERM; echo \$\$; exec sleep 60"`
	for _, tc := range []struct {
		name, cmd string
		timeout   time.Duration
	}{
		{"timeout", child + " & sleep 60", time.Second},
		{"timeout-setsid", "setsid " + child + " & sleep 60", time.Second},
		{"kill", child + " & wait", 0},
		{"kill-setsid", "setsid " + child + " & wait", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: tc.cmd, ExecutionTimeout: tc.timeout, StopGrace: 300 * time.Millisecond})
			eventually(t, "the child's pid", func() bool { return strings.HasSuffix(logText(p.Log(), logstore.Stdout), "\n") })
			left := pids(t, logText(p.Log(), logstore.Stdout))[0]
			ids := proctree.IdentsOf(left)
			if tc.timeout == 0 {
				require.NoError(t, p.Kill(syscall.SIGTERM, 300*time.Millisecond, 0))
			}
			r := wait(t, p)
			if tc.timeout > 0 {
				require.Equal(t, process.TimedOut, r.Reason, "%s", show(r))
			} else {
				require.True(t, r.Reason == process.Signaled && r.Signal == "TERM", "%s", show(r))
			}
			requireGone(t, ids)
		})
	}
}

// TestEscalationsOfAnEndedProcessAreBounded: kills of an ended process,
// each with an escalation an hour off, leave one escalation to come, not
// one each (1,000 timers kept until the record went).
func TestEscalationsOfAnEndedProcessAreBounded(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "true"})
	wait(t, p)
	for range 1000 {
		require.NoError(t, p.Kill(syscall.SIGTERM, time.Hour, 0))
	}
	require.NoError(t, p.Kill(syscall.SIGTERM, time.Hour, syscall.SIGTERM))
	p.mu.Lock()
	n := len(p.escalations)
	p.mu.Unlock()
	require.Equal(t, 2, n, "one escalation to KILL and one to TERM")
	require.NoError(t, p.Stop(t.Context()))
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, p.escalations, "Stop ends what is to come")
}

// TestEscalationDueSoonerReplaces: an escalation due sooner than the one to
// come for the same signal takes its place; none is left once it fired.
func TestEscalationDueSoonerReplaces(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "true"})
	wait(t, p)
	require.NoError(t, p.Kill(syscall.SIGTERM, time.Hour, 0))
	require.NoError(t, p.Kill(syscall.SIGTERM, 10*time.Millisecond, 0))
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.escalations) == 0
	}, 10*time.Second, 10*time.Millisecond, "the hour-off escalation is still to come")
}

// fdLink returns what f's /proc/self/fd link names: pipe:[inode] for a pipe.
func fdLink(t *testing.T, f *os.File) string {
	t.Helper()
	rc, err := f.SyscallConn()
	require.NoError(t, err)
	var link string
	require.NoError(t, rc.Control(func(fd uintptr) { link, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd))) }))
	require.NoError(t, err)
	return link
}

// linksTo counts this process's descriptors whose /proc/self/fd link names
// target.
func linksTo(t *testing.T, target string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && link == target {
			n++
		}
	}
	return n
}
