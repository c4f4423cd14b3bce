package localsandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	t.Parallel()
	s := newSession(t, WithEnv(map[string]string{"FROM_SESSION": "s", "OVERRIDDEN": "session"}))
	require.NoError(t, os.Mkdir(filepath.Join(s.Dir(), "sub"), 0o755))
	elsewhere := t.TempDir()
	tests := []struct {
		name       string
		opts       RunOptions
		code       int
		stdout     string
		stderrHas  string
		stderrNone bool
	}{
		{name: "output", opts: RunOptions{Command: "echo out; echo err >&2"}, stdout: "out\n", stderrHas: "err\n"},
		{name: "failing command", opts: RunOptions{Command: "exit 3"}, code: 3, stderrNone: true},
		{name: "missing program", opts: RunOptions{Command: "no-such-program-xyz"}, code: 127,
			stderrHas: "no-such-program-xyz: command not found"},
		{name: "bash", opts: RunOptions{Command: `echo "$BASH_VERSION" | grep -c .`}, stdout: "1\n"},
		{name: "stdin closed", opts: RunOptions{Command: "cat; read x; echo $?"}, stdout: "1\n"},
		{name: "session directory", opts: RunOptions{Command: "pwd"}, stdout: s.Dir() + "\n"},
		{name: "relative directory", opts: RunOptions{Command: "pwd", WorkingDirectory: "sub"},
			stdout: filepath.Join(s.Dir(), "sub") + "\n"},
		{name: "absolute directory", opts: RunOptions{Command: "pwd", WorkingDirectory: elsewhere}, stdout: elsewhere + "\n"},
		{name: "env", opts: RunOptions{Command: `echo "$FROM_SESSION $OVERRIDDEN $FROM_RUN $HOME"`,
			Env: map[string]string{"OVERRIDDEN": "run", "FROM_RUN": "r"}}, stdout: "s run r " + os.Getenv("HOME") + "\n"},
		{name: "signal exit code", opts: RunOptions{Command: "kill -TERM $$"}, code: 143},
		{name: "binary output", opts: RunOptions{Command: `printf '\377\000x'`}, stdout: "\xff\x00x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := s.Run(hangGuard(t), tt.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.code, res.ExitCode, "exit code %d, want %d (stderr %q)", res.ExitCode, tt.code, res.Stderr)
			assert.False(t, tt.stdout != "" && res.Stdout != tt.stdout, "stdout %q, want %q", res.Stdout, tt.stdout)
			assert.False(t, !strings.Contains(res.Stderr, tt.stderrHas) || tt.stderrNone && res.Stderr != "", "stderr %q, want it to hold %q", res.Stderr, tt.stderrHas)
		})
	}
}

func TestRunMissingWorkingDirectory(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	for _, wd := range []string{"missing", filepath.Join(t.TempDir(), "gone")} {
		_, err := s.Run(hangGuard(t), RunOptions{Command: "touch ran", WorkingDirectory: wd})
		assert.False(t, !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), wd), "Run in %s: %v, want an error naming it that wraps fs.ErrNotExist", wd, err)
		_, err = s.Spawn(hangGuard(t), RunOptions{Command: "touch ran", WorkingDirectory: wd})
		assert.ErrorIs(t, err, fs.ErrNotExist, "Spawn in %s, want fs.ErrNotExist", wd)
	}
	_, ok, _ := s.ReadFile("ran")
	assert.False(t, ok, "the command ran although its directory is missing")
}

func TestRunBadEnvName(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	for _, name := range []string{"", "A=B", "A\x00"} {
		_, err := s.Run(hangGuard(t), RunOptions{Command: "touch ran", Env: map[string]string{name: "x"}})
		assert.False(t, err == nil || !strings.Contains(err.Error(), "bad environment variable name"), "Env name %q: %v, want an error", name, err)
	}
	_, ok, _ := s.ReadFile("ran")
	assert.False(t, ok, "a command ran with a bad environment")
}

func TestRunCancelledBeforeStartStartsNothing(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Run(ctx, RunOptions{Command: "touch ran"})
	assert.ErrorIs(t, err, context.Canceled, "Run, want context.Canceled")
	_, err = s.Spawn(ctx, RunOptions{Command: "touch ran"})
	assert.ErrorIs(t, err, context.Canceled, "Spawn, want context.Canceled")
	_, ok, _ := s.ReadFile("ran")
	assert.False(t, ok, "a command ran under a cancelled context")
}

// treeCommand starts a child and a grandchild that sleep, writes their pids
// and its own to the file pids, one a line, then waits.
const treeCommand = `sleep 300 & echo $! >> pids; bash -c 'sleep 300 & echo $! >> pids; wait' & echo $! >> pids; echo $$ >> pids; wait`

// Cancelling or expiring the context of Run kills the whole tree and
// returns the context's error.
func TestRunContextKillsTree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want error
	}{
		{"cancelled", context.Canceled},
		{"expired", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t)
			pidFile := filepath.Join(s.Dir(), "pids")
			ctx, cancel := context.WithCancel(hangGuard(t))
			defer cancel()
			if tt.want == context.DeadlineExceeded {
				ctx = expiresOnFile(ctx, pidFile, 4)
			} else {
				go func() {
					waitLines(ctx, pidFile, 4)
					cancel()
				}()
			}
			_, err := s.Run(ctx, RunOptions{Command: treeCommand})
			require.ErrorIs(t, err, tt.want, "Run, want %v", tt.want)
			assertGone(t, readPids(t, s, "pids"))
		})
	}
}

func TestSpawnStreamsAndKill(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: "echo ready; echo warn >&2; " + treeCommand})
	require.NoError(t, err)
	// Spawn returned while the command runs: its first line arrives while
	// it still sleeps.
	out := bufio.NewReader(p.Stdout())
	line, err := out.ReadString('\n')
	require.False(t, line != "ready\n" || err != nil, "first stdout line %q, %v", line, err)
	errOut := bufio.NewReader(p.Stderr())
	line, err = errOut.ReadString('\n')
	require.False(t, line != "warn\n" || err != nil, "first stderr line %q, %v", line, err)
	waitLines(ctx, filepath.Join(s.Dir(), "pids"), 4)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = p.Wait(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Wait on a sleeping command, want its context's error")
	pids := readPids(t, s, "pids")
	require.True(t, proctree.Alive(pids[len(pids)-1]), "the command died when Wait's context ended")

	require.NoError(t, p.Kill())
	code, err := p.Wait(ctx)
	require.False(t, code != 143 || err != nil, "Wait after Kill = %d, %v, want 143", code, err)
	assertGone(t, pids)
	rest, err := io.ReadAll(out)
	assert.False(t, len(rest) != 0 || err != nil, "rest of stdout %q, %v, want EOF", rest, err)
	assert.NoError(t, p.Kill(), "Kill after exit")
	code, err = p.Wait(ctx)
	assert.False(t, code != 143 || err != nil, "second Wait = %d, %v", code, err)
}

func TestSpawnOutput(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: "for i in 1 2 3; do echo o$i; echo e$i >&2; done; exit 4"})
	require.NoError(t, err)
	code, err := p.Wait(ctx)
	require.False(t, code != 4 || err != nil, "Wait = %d, %v", code, err)
	// Readers taken after the exit still get everything, each from the start.
	for range 2 {
		out, err := io.ReadAll(p.Stdout())
		assert.False(t, string(out) != "o1\no2\no3\n" || err != nil, "stdout %q, %v", out, err)
		out, err = io.ReadAll(p.Stderr())
		assert.False(t, string(out) != "e1\ne2\ne3\n" || err != nil, "stderr %q, %v", out, err)
	}
}

func TestSpawnContextKillsTree(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithCancel(hangGuard(t))
	defer cancel()
	p, err := s.Spawn(ctx, RunOptions{Command: treeCommand})
	require.NoError(t, err)
	waitLines(ctx, filepath.Join(s.Dir(), "pids"), 4)
	cancel()
	_, err = p.Wait(hangGuard(t))
	require.ErrorIs(t, err, context.Canceled, "Wait, want context.Canceled")
	assertGone(t, readPids(t, s, "pids"))
}

// A command that has exited keeps its result when its context ends, or Kill
// comes, while a background job it left holds its stdout open and its
// output is still drained: Wait returned the context's error and the job
// was killed, and Kill sent TERM to the job, though the command had exited.
func TestExitedDuringDrain(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"context", "kill"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := newSession(t)
			guard := hangGuard(t)
			for try := 0; ; try++ {
				ctx, cancel := context.WithCancel(guard)
				defer cancel()
				p, err := s.Spawn(ctx, RunOptions{Command: "sleep 300 & echo $! > bg; exit 7"})
				require.NoError(t, err)
				for p.p.Info().State != process.Terminal && guard.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				if how == "context" {
					cancel()
				} else {
					require.NoError(t, p.Kill())
				}
				select {
				case <-p.p.Done():
					// Drained already (a starved machine): not the case
					// under test.
					require.Less(t, try, 5, "the output was drained before the command's exit was seen, each time")
					syscall.Kill(readPids(t, s, "bg")[0], syscall.SIGKILL)
					continue
				default:
				}
				code, err := p.Wait(guard)
				require.NoError(t, err)
				require.Equal(t, 7, code)
				bg := readPids(t, s, "bg")[0]
				require.True(t, proctree.Alive(bg), "the background job was signalled")
				syscall.Kill(bg, syscall.SIGKILL)
				return
			}
		})
	}
}

// A reader that fell behind the log's retention is told, then goes on:
// one that read first, and one made before the command wrote that reads
// only once the drop came (it went on from the first byte retained without
// a word, 12 MB gone).
func TestSpawnReaderBehindRetention(t *testing.T) {
	t.Parallel()
	for _, readFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("read-first=%v", readFirst), func(t *testing.T) {
			t.Parallel()
			s := newSession(t)
			ctx := hangGuard(t)
			p, err := s.Spawn(ctx, RunOptions{Command: "echo first; while [ ! -e gate ]; do sleep 0.01; done; head -c 20000000 /dev/zero"})
			require.NoError(t, err)
			r := p.Stdout()
			buf := make([]byte, 4096)
			if readFirst {
				n, err := r.Read(buf)
				require.NoError(t, err)
				require.Equal(t, "first\n", string(buf[:n]))
			}
			require.NoError(t, s.WriteFile("gate", nil))
			code, err := p.Wait(ctx)
			require.False(t, code != 0 || err != nil, "Wait = %d, %v", code, err)
			_, err = r.Read(buf)
			require.ErrorIs(t, err, ErrOutputDropped, "Read after the drop, want ErrOutputDropped")
			n, err := io.Copy(io.Discard, r)
			require.False(t, err != nil || n == 0 || n >= 20000000, "after the drop: %d bytes, %v; want what is retained", n, err)
		})
	}
}

// A reader made after the log's start was dropped starts from the first
// byte retained, with no error: it fell behind nothing. It failed before
// its first byte, and io.ReadAll got nothing but ErrOutputDropped.
func TestSpawnNewReaderAfterDrop(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: "head -c 20000000 /dev/zero | tr '\\0' a; echo END"})
	require.NoError(t, err)
	code, err := p.Wait(ctx)
	require.False(t, code != 0 || err != nil, "Wait = %d, %v", code, err)
	for range 2 {
		out, err := io.ReadAll(p.Stdout())
		require.NoError(t, err)
		require.True(t, len(out) > 0 && len(out) < 20000004, "%d bytes", len(out))
		require.True(t, strings.HasSuffix(string(out), "aaaEND\n"), "ends %q", out[max(0, len(out)-10):])
		require.Empty(t, strings.Trim(string(out[:len(out)-4]), "a"))
	}
	sc := bufio.NewScanner(p.Stderr())
	require.False(t, sc.Scan())
	require.NoError(t, sc.Err())
}

func TestRunLargeOutput(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	res, err := s.Run(hangGuard(t), RunOptions{Command: "head -c 3000000 /dev/zero | tr '\\0' a", OutputLimit: 4 << 20})
	require.NoError(t, err)
	require.False(t, len(res.Stdout) != 3000000 || strings.Trim(res.Stdout, "a") != "" || res.Truncated, "stdout of %d bytes, truncated %v", len(res.Stdout), res.Truncated)
}

// A harness that inherited SIGINT ignored (started in the background of a
// script) still runs commands that an interrupt ends.
func TestRunDefaultSignalsUnderIgnoringHost(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t)
	cmd := osexec.CommandContext(ctx, "/bin/bash", "-c", `trap "" INT; exec "$0" -test.run='^$'`, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=interrupt")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	got := strings.TrimSpace(string(out))
	require.Equal(t, "130", got, "exit code of a self-interrupting command: %s, want 130", got)
}

// A harness killed with SIGKILL, its session never stopped, takes the
// commands it spawned with it (the engine's guardian kills their process
// groups): they ran on, orphans, before.
func TestKilledHarnessLeavesNoCommand(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t)
	cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	// The child is killed before it could remove the directory it makes:
	// made in the test's own, it goes with the test.
	cmd.Env = append(os.Environ(), childEnv+"=abandon", "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	require.Eventually(t, func() bool { return len(proctree.GroupMembers(pgid)) > 0 }, 10*time.Second, 10*time.Millisecond,
		"the command runs")
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	require.Eventually(t, func() bool { return len(proctree.GroupMembers(pgid)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the command's group outlived the harness: %v", proctree.GroupMembers(pgid))
}

// readPids reads the pids a command wrote to name in the session's directory.
func readPids(t *testing.T, s *Session, name string) []int {
	t.Helper()
	text, _, err := s.ReadTextFile(name)
	require.NoError(t, err)
	var pids []int
	for f := range strings.FieldsSeq(text) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.NotEmpty(t, pids, "no pids in %s", name)
	return pids
}

// waitLines waits until the file at path has n lines or ctx ends. Tests
// use it to wait for a command to have started what they look at.
func waitLines(ctx context.Context, path string, n int) {
	for ctx.Err() == nil {
		if b, err := os.ReadFile(path); err == nil && strings.Count(string(b), "\n") >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expiresOnFile returns a context that expires, with
// context.DeadlineExceeded, once the file at path has n lines: a deadline
// that passes once a command is up, without guessing how long that takes.
func expiresOnFile(parent context.Context, path string, n int) context.Context {
	c := &expiringCtx{Context: parent, done: make(chan struct{})}
	go func() {
		waitLines(parent, path, n)
		close(c.done)
	}()
	return c
}

type expiringCtx struct {
	context.Context
	done chan struct{}
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// assertGone fails unless every pid has exited within the hang guard.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for proctree.Alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("process %d is still running", pid)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// lateJob is a command that exits with 3 after writing "early", leaving a
// job that holds its stdout and writes "late" once the file gate exists.
const lateJob = `(while [ ! -e gate ]; do sleep 0.01; done; echo late) & echo early; echo $$ > pid; exit 3`

// Wait returns the exit status once the command has exited, while the
// output of a job it left holding its stdout still flows to the readers:
// it waited for the output's end too, up to 2 s, and a ctx that ended
// meanwhile made it return ctx's error as if the command still ran.
func TestWaitReturnsAtExit(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: lateJob})
	require.NoError(t, err)
	stdout := p.Stdout()
	code, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, code)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for range 20 {
		code, err := p.Wait(ended)
		require.False(t, err != nil || code != 3, "Wait with a ctx ended after the exit = %d, %v, want 3", code, err)
	}
	require.NoError(t, s.WriteTextFile("gate", ""))
	out, err := io.ReadAll(stdout)
	require.NoError(t, err)
	assert.Equal(t, "early\nlate\n", string(out), "the output written after Wait returned")
}

// Run returns once the command has exited and its output is read: what a
// job it left holding its stdout writes in the drain that follows is part
// of its Stdout, and a ctx that ends in that drain changes nothing.
func TestRunReadsOutputAfterExit(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	guard := hangGuard(t)
	ctx, cancel := context.WithCancel(guard)
	defer cancel()
	go func() {
		awaitShellExit(guard, t, s)
		cancel()
		assert.NoError(t, s.WriteTextFile("gate", ""))
	}()
	res, err := s.Run(ctx, RunOptions{Command: lateJob})
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, "early\nlate\n", res.Stdout)
}

// awaitShellExit waits until lateJob's shell has written its pid and
// exited (a zombie counts), or ctx ends.
func awaitShellExit(ctx context.Context, t *testing.T, s *Session) {
	waitLines(ctx, filepath.Join(s.Dir(), "pid"), 1)
	pid := readPids(t, s, "pid")[0]
	for proctree.Alive(pid) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

// lateSeen is a started process whose exit is seen only once seen is
// closed: the moment between a command's exit and Run's seeing it, held
// open. Once watch is set, the first look at its state closes looked.
type lateSeen struct {
	started
	exited chan struct{}

	watch      atomic.Bool
	looked     chan struct{}
	lookedOnce sync.Once
}

func (l *lateSeen) Exited() <-chan struct{} { return l.exited }

func (l *lateSeen) Info() process.Info {
	if l.watch.Load() {
		l.lookedOnce.Do(func() { close(l.looked) })
	}
	i := l.started.Info()
	select {
	case <-l.exited:
	default:
		i.State, i.Result = process.Running, nil
	}
	return i
}

// A ctx that ends after the command exited, before Run saw the exit,
// changes nothing either: Run killed the job still writing its output and
// returned ctx's error for a command that had exited 3.
func TestRunCtxEndedBeforeExitSeen(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	guard := hangGuard(t)
	seen := make(chan struct{})
	late := make(chan *lateSeen, 1)
	s.begin = func(command, dir string, env map[string]string, open bool) (started, error) {
		p, err := startProcess(command, dir, env, open)
		if err != nil {
			return nil, err
		}
		l := &lateSeen{started: p, exited: make(chan struct{}), looked: make(chan struct{})}
		late <- l
		go func() {
			<-p.Exited()
			<-seen
			close(l.exited)
		}()
		return l, nil
	}
	ctx, cancel := context.WithCancel(guard)
	defer cancel()
	go func() {
		awaitShellExit(guard, t, s)
		l := <-late
		select {
		case <-l.started.Exited(): // the engine has it; Run has not looked
		case <-guard.Done():
		}
		l.watch.Store(true)
		cancel()
		select {
		case <-l.looked: // what ctx's end does is decided
		case <-guard.Done():
		}
		assert.NoError(t, s.WriteTextFile("gate", ""))
		close(seen)
	}()
	res, err := s.Run(ctx, RunOptions{Command: lateJob})
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, "early\nlate\n", res.Stdout)
}

// aliveAtLook is a process whose second look at its state once watch is
// set (the kill on ctx's end asking whether it is alive) waits for hold
// and finds it alive: it exited just after that look.
type aliveAtLook struct {
	*lateSeen
	looks   atomic.Int32
	holding chan struct{}
	hold    chan struct{}
	killed  chan struct{}
}

func (a *aliveAtLook) Info() process.Info {
	i := a.lateSeen.Info()
	if a.watch.Load() && a.looks.Add(1) == 2 {
		close(a.holding)
		<-a.hold
		i.PID = os.Getpid()
	}
	return i
}

func (a *aliveAtLook) Kill(sig syscall.Signal, after time.Duration, to syscall.Signal) error {
	close(a.killed)
	return a.lateSeen.Kill(sig, after, to)
}

// A command that exits as its Spawn ctx ends, after the kill on ctx's end
// found it alive: once a Wait has returned its exit, every Wait returns the
// same; the kill set ctx's error after the first had answered 3.
func TestWaitsAgreeWhenCtxEndsAtExit(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	guard := hangGuard(t)
	late := make(chan *aliveAtLook, 1)
	s.begin = func(command, dir string, env map[string]string, open bool) (started, error) {
		p, err := startProcess(command, dir, env, open)
		if err != nil {
			return nil, err
		}
		a := &aliveAtLook{
			lateSeen: &lateSeen{started: p, exited: make(chan struct{}), looked: make(chan struct{})},
			holding:  make(chan struct{}), hold: make(chan struct{}), killed: make(chan struct{}),
		}
		late <- a
		return a, nil
	}
	ctx, cancel := context.WithCancel(guard)
	defer cancel()
	p, err := s.Spawn(ctx, RunOptions{Command: "while [ ! -e gate ]; do sleep 0.01; done; exit 3"})
	require.NoError(t, err)
	defer p.release()
	a := <-late
	a.watch.Store(true)
	cancel()
	select {
	case <-a.holding: // the kill found it alive
	case <-guard.Done():
		t.Fatal("the kill on ctx's end did not look at the command")
	}
	require.NoError(t, s.WriteTextFile("gate", ""))
	<-a.started.Exited()
	close(a.exited)
	code, err := p.Wait(guard)
	require.NoError(t, err)
	require.Equal(t, 3, code)
	close(a.hold)
	select {
	case <-a.killed:
	case <-time.After(200 * time.Millisecond): // how long the kill has to go wrong
	}
	code, err = p.Wait(guard)
	require.NoError(t, err, "a Wait after one that returned 3")
	require.Equal(t, 3, code)
}

// WaitForInput says ErrExited once the command has exited, while a job it
// left holds its stdout open: it waited for the output's end too, and a
// ctx that ended meanwhile made it return ctx's error.
func TestWaitForInputExitedDuringDrain(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: lateJob, OpenStdin: true})
	require.NoError(t, err)
	stdout := p.Stdout()
	_, err = p.Wait(ctx)
	require.NoError(t, err)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for range 20 {
		err := p.WaitForInput(ended)
		require.ErrorIs(t, err, ErrExited, "WaitForInput with a ctx ended after the exit")
	}
	require.NoError(t, s.WriteTextFile("gate", ""))
	out, err := io.ReadAll(stdout)
	require.NoError(t, err)
	assert.Equal(t, "early\nlate\n", string(out))
}
