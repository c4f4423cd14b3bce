package shellsession

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"weak"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/racetest"
	"github.com/conchsh/conch/internal/tracetest"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
	"github.com/stretchr/testify/require"
)

// goroutinesCreated is how many goroutines this process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A command that Run sends to an idle session runs on the caller's
// goroutine: no worker starts for it, and its streams are read where it
// waits, to their end-of-file. A goroutine starts only to read a stream
// still held open a while after the command's end (by a background job; by
// the shell itself only when it is slow to close it).
func TestRunStartsNoGoroutines(t *testing.T) {
	s := newSession(t, Options{})
	for range 5 {
		run(t, s, CommandOptions{Cmd: "true"})
	}
	const commands = 100
	before := goroutinesCreated()
	for range commands {
		if r, _, _ := run(t, s, CommandOptions{Cmd: "true"}); code(r) != 0 {
			t.Fatalf("true: %+v", r)
		}
	}
	n := goroutinesCreated() - before
	t.Logf("%d commands started %d goroutines", commands, n)
	if n > commands/2 {
		t.Fatalf("%d commands started %d goroutines", commands, n)
	}
}

// Run returns once its context is done, while the command runs on; the
// commands submitted after it wait for it, as ever.
func TestRunReturnsAtItsContext(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	ranBack := make(chan error, 1)
	var first *Command
	go func() {
		c, _, err := s.Run(ctx, CommandOptions{Cmd: "read x; echo got $x", Stdin: process.StdinOpen})
		first = c
		ranBack <- err
	}()
	var c *Command
	require.Eventually(t, func() bool {
		cs := s.Commands()
		if len(cs) == 0 {
			return false
		}
		c = cs[len(cs)-1]
		return c.opts.Stdin == process.StdinOpen
	}, deadline, time.Millisecond)
	second, err := s.Submit(CommandOptions{Cmd: "echo second"})
	require.NoError(t, err)
	cancel()
	require.True(t, errors.Is(<-ranBack, context.Canceled))
	require.Same(t, c, first)
	select {
	case <-c.Done():
		t.Fatal("the command ended with its caller's context")
	case <-second.Done():
		t.Fatal("the next command ran before the one reading its stdin")
	default:
	}
	require.NoError(t, c.WriteStdin([]byte("it\n")))
	require.NoError(t, c.CloseStdin())
	wctx, wcancel := context.WithTimeout(t.Context(), deadline)
	defer wcancel()
	r, err := process.Wait(wctx, c)
	require.NoError(t, err)
	require.Equal(t, 0, code(r))
	out, _ := output(c)
	require.Equal(t, "got it\n", out)
	r, err = process.Wait(wctx, second)
	require.NoError(t, err)
	out, _ = output(second)
	require.Equal(t, "second\n", out)
}

// New gives up on a shell that does not come up before its context is done
// (a profile that takes its time), and ends it: its first command, which the
// shell never finished, is over once the shell is gone.
func TestNewGivesUpOnASlowShell(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("sleep 30\n"), 0o600))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		s, err := New(ctx, Options{Env: map[string]string{"HOME": home}, Login: true})
		if err == nil {
			s.Close()
		}
		returned <- err
	}()
	select {
	case err := <-returned:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(deadline):
		t.Fatal("New did not return after its context was done")
	}
}

// A session keeps nothing of a command that has ended: its output is its
// caller's to keep, and a long session does not grow with every command.
func TestEndedCommandsAreNotKept(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	var logs []weak.Pointer[logstore.Log]
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		c, r, err := s.Run(ctx, CommandOptions{Cmd: "head -c 100000 /dev/zero; echo err >&2"})
		cancel()
		require.NoError(t, err)
		require.Equal(t, 0, code(r))
		logs = append(logs, weak.Make(c.Log()))
	}
	run(t, s, CommandOptions{Cmd: "true"}) // the streams serve another command
	require.Empty(t, s.Commands())
	// Another command and a collection, until the logs are gone.
	require.Eventually(t, func() bool {
		s.Run(t.Context(), CommandOptions{Cmd: "true"})
		runtime.GC()
		for _, w := range logs {
			if w.Value() != nil {
				return false
			}
		}
		return true
	}, deadline, 10*time.Millisecond, "the logs of ended commands are still kept")
}

// Nor is the last command kept while no other follows it: the session
// notes it, for the pid that bounds its processes, only as long as someone
// holds it.
func TestLastCommandIsNotKept(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	run(t, s, CommandOptions{Cmd: "true"})
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	last, r, err := s.Run(ctx, CommandOptions{Cmd: "head -c 100000 /dev/zero"})
	cancel()
	require.NoError(t, err)
	require.Equal(t, 0, code(r))
	log := weak.Make(last.Log())
	require.Eventually(t, func() bool {
		runtime.GC()
		return log.Value() == nil
	}, deadline, 10*time.Millisecond, "the last command's log is still kept")
}

// Begin takes an idle session's turn for its caller: commands submitted
// meanwhile wait for it, and a command deleted before its caller runs it
// never reaches the shell, and gives the turn back.
func TestBeginHoldsTheTurn(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	ctx := t.Context()
	require.Eventually(t, func() bool { // what the session did as it started is done
		if s.h.Queue.Claim() {
			s.h.Queue.Release()
			return true
		}
		return false
	}, 10*time.Second, time.Millisecond)
	mark := filepath.Join(t.TempDir(), "ran")
	first, err := s.Begin(CommandOptions{Cmd: "echo first > " + mark})
	require.NoError(t, err)
	second, err := s.Submit(CommandOptions{Cmd: "echo second"})
	require.NoError(t, err)
	select {
	case <-second.Done():
		t.Fatal("a command submitted after Begin ran before the caller's")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, first.Stop(ctx))
	first.TakeTurn(ctx)
	<-first.Done()
	require.NotEqual(t, process.Exited, first.Result().Reason, "%+v", first.Result())
	_, err = os.Stat(mark)
	require.True(t, errors.Is(err, os.ErrNotExist), "the deleted command ran: %v", err)
	select {
	case <-second.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the turn was never given back")
	}
	require.Equal(t, 0, code(second.Result()))
	require.Equal(t, "second\n", string(second.Log().Page(0, 0).Frames[0].Data))
}

// A command Begin returned holding the turn, which its caller never takes
// but ends — Stop, Kill, Cancel — gives the turn back: later commands run,
// and TakeTurn returns at once. One nobody ends fails as the session
// closes, and Close returns: every later Run waited for it, and Close
// waited for ever.
func TestBeginTurnNeverTaken(t *testing.T) {
	t.Parallel()
	ends := map[string]func(*Command){
		"stop":   func(c *Command) { require.NoError(t, c.Stop(t.Context())) },
		"kill":   func(c *Command) { require.NoError(t, c.Kill(syscall.SIGTERM, 0, 0)) },
		"cancel": func(c *Command) { c.Cancel(errors.New("given up")) },
		"close":  nil,
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{})
			mark := filepath.Join(t.TempDir(), "ran")
			var c *Command
			require.Eventually(t, func() bool { // until Begin finds the session idle
				var err error
				c, err = s.Begin(CommandOptions{Cmd: "echo begun > " + mark})
				require.NoError(t, err)
				if !c.holdsTurn {
					c.TakeTurn(t.Context())
					<-c.Done()
				}
				return c.holdsTurn
			}, deadline, time.Millisecond)
			// Should the turn stay held, the session's Close would wait for
			// it for ever: taken, it ends.
			t.Cleanup(func() { c.TakeTurn(context.Background()) })
			if end != nil {
				end(c)
				expectRun(t, s, "echo next", 0, "next\n")
			} else {
				closed := make(chan struct{})
				go func() { s.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(deadline):
					t.Fatal("Close waits for a turn nobody takes")
				}
			}
			select {
			case <-c.Done():
			case <-time.After(deadline):
				t.Fatal("the command never ended")
			}
			require.NotEqual(t, process.Exited, c.Result().Reason, "%+v", c.Result())
			c.TakeTurn(t.Context()) // returns at once: the command has ended
			_, err := os.Stat(mark)
			require.ErrorIs(t, err, fs.ErrNotExist, "the ended command ran")
			if end == nil {
				require.Contains(t, c.Result().Error, "session ended")
			}
		})
	}
}

// A command on an idle session allocates little: its frame comes from a
// template of the session's (the same few streams serve every command), not
// built anew (it was 65 allocations a command, 40 of them the frame's), and
// each keeper's open uses its stream's path as the kernel takes it, made once
// (31 allocations before, 29 after). A frame of a template is one
// allocation (four before), the calls it names, the script's path, the
// command's streams and their reader are made once, its run is no closure
// over a sync.Once, and an end that repeats the last one's flags and
// directory shares their strings: 17 (18 under the race detector). Then the
// command's log, usage and exit code came to live in the command, its id
// was made in one allocation (uuid.NewString's random bytes escaped), and
// the functions it handed its context, its watcher and its caller became
// functions made once or interfaces: 10 (12 under the race detector). Then
// the channel closed when its markers ended it went, the one closed when its
// result is set serving as well: 9. What is left: the command and its
// channel, its id, its frame, its keeper, the session's weak pointer to it,
// and the two of context.AfterFunc for a context that can be cancelled, as
// a request's is.
func TestRunAllocations(t *testing.T) {
	s := newSession(t, Options{})
	ctx := t.Context()
	for range 20 { // the pool, the buffers and the templates fill
		run(t, s, CommandOptions{Cmd: "true"})
	}
	// The count is the whole process's: the goroutines of the tests before
	// this one, still ending (sessions whose commands end after them, say),
	// can add one now and then under load. The least of three counts is
	// taken.
	n := math.Inf(1)
	for range 3 {
		n = min(n, testing.AllocsPerRun(200, func() {
			if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
				t.Fatalf("true: %v %+v", err, r)
			}
		}))
	}
	t.Logf("%v allocations a command", n)
	bound := 10.0
	if racetest.Enabled {
		bound = 13 // the race detector's own
	}
	require.LessOrEqual(t, n, bound)
}

// A command on an idle session makes its system calls around the Go
// scheduler (see rawcall): the script's and the frame's writes, the reads
// of /proc and of its streams, its keepers' opens and closes. Made through
// package syscall, the first of them after the process was idle woke the
// runtime's monitor thread, which woke again and again until the command
// ended: 2.1 voluntary switches of the engine's threads a command, 1.0
// without. The runtime's trace tells each call made through the scheduler
// (a goroutine's move to the syscall state): there were 16 a command.
func TestRunCallsAroundTheScheduler(t *testing.T) {
	shells := append(slices.Clone(testShells), "bash in a cgroup")
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) { // not parallel: the trace is the whole process's
			opts := Options{Shell: sh}
			if sh == "bash in a cgroup" {
				// Its usage comes from the cgroup's files, and the memory
				// peak is reset at each command's start.
				opts = Options{Containment: containmenttest.Root(t, containment.Limits{})}
			}
			s := newSession(t, opts)
			for range 20 {
				run(t, s, CommandOptions{Cmd: "true"})
			}
			const n = 50
			calls, elsewhere := schedulerCalls(t, func() {
				for range n {
					if _, r, err := s.Run(t.Context(), CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
						t.Errorf("true: %v %+v", err, r)
						return
					}
				}
			})
			total := 0
			for _, c := range calls {
				total += c
			}
			t.Logf("calls through the scheduler in %d commands: %v; by other goroutines: %v", n, calls, elsewhere)
			require.Less(t, total, n/2, "calls through the scheduler by their callers: %v", calls)
		})
	}
}

// schedulerCalls runs f under the runtime's trace and returns the system
// calls made through the scheduler meanwhile by the session's commands (on
// the goroutine that runs them, or the one that reads the shell's own
// output), by the function that made them: the first frame outside the
// runtime, syscall and os packages. The trace is the whole process's:
// calls of goroutines that an earlier test left winding down are returned
// apart, by the function their goroutine began with.
func schedulerCalls(t *testing.T, f func()) (ours, elsewhere map[string]int) {
	t.Helper()
	ours, elsewhere = map[string]int{}, map[string]int{}
	for _, stack := range tracetest.Syscalls(t, f) {
		caller, root, session := "?", "?", false
		for _, fn := range stack {
			if caller == "?" && !strings.HasPrefix(fn, "syscall.") && !strings.HasPrefix(fn, "internal/") &&
				!strings.HasPrefix(fn, "golang.org/x/sys/") && !strings.HasPrefix(fn, "os.") {
				caller = fn
			}
			session = session || strings.HasSuffix(fn, "shellsession.(*Session).Run") ||
				strings.HasSuffix(fn, "resident.(*Diag).run")
			if !strings.HasPrefix(fn, "runtime.") {
				root = fn
			}
		}
		if session {
			ours[caller]++
		} else {
			elsewhere[root+" > "+caller]++
		}
	}
	return ours, elsewhere
}

// An ended command's Tree holds the background job it left, and not the
// processes of a command that started after it, nor the other way round —
// whether a later command has started or not when it is asked (the pid that
// bounds an ended command's processes is read then, not at every end).
func TestTreeAfterEnd(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	ctx := t.Context()
	job := func() (*Command, int) {
		c, r, err := s.Run(ctx, CommandOptions{Cmd: "sleep 100 & echo $!"})
		require.NoError(t, err)
		require.Equal(t, 0, code(r))
		out, _ := output(c)
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		require.NoError(t, err)
		return c, pid
	}
	first, p1 := job()
	require.Contains(t, first.Tree(), p1, "asked before any later command started")
	second, p2 := job()
	require.Contains(t, first.Tree(), p1)
	require.NotContains(t, first.Tree(), p2)
	third, p3 := job()
	require.Equal(t, []int{p2}, second.Tree())
	require.NotContains(t, first.Tree(), p3)
	require.Equal(t, []int{p3}, third.Tree())
	run(t, s, CommandOptions{Cmd: "kill " + strconv.Itoa(p1) + " " + strconv.Itoa(p2) + " " + strconv.Itoa(p3)})
}

// A program that an ended command's background job starts later (a
// server's worker) is in that command's Tree, not in the Tree of the
// command running then, although it started during it: before, it was
// told apart by its start alone, and went to the later command.
func TestTreeKeepsWhatAJobStartsLater(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	first, fifo, pidFile := startJobThatWaits(t, s)
	later, err := s.Submit(CommandOptions{Cmd: "/bin/sleep 300"})
	require.NoError(t, err)
	waitProgram(t, later, "sleep")
	worker := jobGoAhead(t, fifo, pidFile)
	require.Contains(t, first.Tree(), worker)
	require.NotContains(t, later.Tree(), worker)
	require.NoError(t, later.Kill(syscall.SIGKILL, 0, 0))
	wait(t, later)
}

// The idle look leaves alone a command taken up whose frame has not
// reached the shell yet: the shell sits at its prompt with nothing to read,
// as it does after a command it could not report, and a look then ended
// commands of busy sessions "failed" (seen with 256 sessions at once).
func TestIdleLookWaitsForTheFrame(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	run(t, s, CommandOptions{Cmd: "true"}) // the idle timer exists
	c := s.newCommand(CommandOptions{Cmd: "true"})
	s.record(c)
	require.NoError(t, c.begin("/", sentinel.Frame{Nonce: sentinel.NewNonce()}))
	idleWatch.mu.Lock()
	s.idleGen++
	idleWatch.sessions[s] = s.idleGen
	idleWatch.mu.Unlock()
	lookIdle()
	time.Sleep(300 * time.Millisecond) // a look takes 100 ms
	require.Equal(t, process.Running, c.Info().State, "%+v", c.Info().Result)
	c.finish(process.ExitedWith(0))
}

// A command that forked nothing ends for its caller at its end marker:
// the end-of-file of its streams, which the shell gives right after it,
// is the next command's to wait for (readLoop.settleLater). It once kept
// the caller waiting for it too, which after an idle moment was one
// command in two, or up to settleEOF when the shell held a stream (exec
// 3>&1). A command that forked settles at once, its streams read on for a
// job that may write on; and what the shell keeps writing to a stream it
// held stays out of later commands' output. "Nothing forked" is the pid
// namespace's: on a busy machine (the other tests) a fork elsewhere makes
// a command settle at once, so the first part is tried until one command
// ran with none. On every shell: each runs a command that forks nothing
// without a fork of its own.
func TestCommandEndsBeforeItsStreamsSettle(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			endsBeforeItsStreamsSettle(t, newSession(t, Options{Shell: shell}))
		})
	}
}

func endsBeforeItsStreamsSettle(t *testing.T, s *Session) {
	unsettled := func() *Command {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.unsettled == nil {
			return nil
		}
		return s.unsettled.c
	}
	var c process.Process
	for range 200 {
		var err error
		c, _, err = s.Run(t.Context(), CommandOptions{Cmd: "exec 3>&1; echo held"})
		require.NoError(t, err)
		if unsettled() == c {
			break
		}
	}
	require.Same(t, c, unsettled(), "the shell holds its stdout: left to the next command")
	_, out, _ := run(t, s, CommandOptions{Cmd: "echo late >&3; echo own"})
	require.Equal(t, "own\n", out)
	require.NotSame(t, c, unsettled())
	run(t, s, CommandOptions{Cmd: "exec 3>&-; sleep 0.3 &"})
	require.Nil(t, unsettled(), "a job may hold its streams: settled at once")
	_, out, _ = run(t, s, CommandOptions{Cmd: "wait; echo after"})
	require.Equal(t, "after\n", out)
}

// TestEpollSetsOutlastDrains: a command whose streams a background job
// holds after its end gives its epoll set back for the next commands at
// once, its streams read on in the session's one set for held streams
// (see heldStreams). Each such command kept its set until its job let go,
// and the session made a set for each one after the two it kept spare.
// The sets are counted as they are made: one for the held streams, and
// one more at most, made when a stream's end-of-file came after the next
// command started (seen under the load of a whole run).
func TestEpollSetsOutlastDrains(t *testing.T) {
	s := newSession(t, Options{Shell: "bash"})
	for range 3 {
		run(t, s, CommandOptions{Cmd: "true"})
	}
	var made atomic.Int32
	epollMade = func() { made.Add(1) }
	defer func() { epollMade = nil }()
	for range 5 {
		run(t, s, CommandOptions{Cmd: "sleep 0.3 &"}) // the job holds its streams past the next commands
		run(t, s, CommandOptions{Cmd: "true"})
	}
	run(t, s, CommandOptions{Cmd: "wait"})
	require.LessOrEqual(t, made.Load(), int32(2), "epoll sets made for 10 commands, 5 of them held")
}

// TestRepointedDescriptorLeaksNothing: a command that points a descriptor
// the shell already held at its own stdout (exec 3>/dev/null before it)
// leaves the shell's descriptor count as it was; what a later command
// writes there is still no command's output (the stream is not reused
// while the shell holds it), nor is what the shell writes there between
// commands.
func TestRepointedDescriptorLeaksNothing(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			run(t, s, CommandOptions{Cmd: "exec 3>/dev/null"})
			run(t, s, CommandOptions{Cmd: "exec 3>&1; echo saved"})
			for range 3 {
				_, out, errs := run(t, s, CommandOptions{Cmd: "echo four"})
				require.Equal(t, "four\n", out+errs)
			}
			_, out, errs := run(t, s, CommandOptions{Cmd: "echo LEAK >&3; echo five"})
			require.Equal(t, "five\n", out+errs)
			for range 3 {
				_, out, errs = run(t, s, CommandOptions{Cmd: "echo six"})
				require.Equal(t, "six\n", out+errs)
			}
		})
	}
}
