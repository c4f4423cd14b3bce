package localsandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
)

func TestRun(t *testing.T) {
	t.Parallel()
	s := newSession(t, WithEnv(map[string]string{"FROM_SESSION": "s", "OVERRIDDEN": "session"}))
	if err := os.Mkdir(filepath.Join(s.Dir(), "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", res.ExitCode, tt.code, res.Stderr)
			}
			if tt.stdout != "" && res.Stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, tt.stdout)
			}
			if !strings.Contains(res.Stderr, tt.stderrHas) || tt.stderrNone && res.Stderr != "" {
				t.Errorf("stderr %q, want it to hold %q", res.Stderr, tt.stderrHas)
			}
		})
	}
}

func TestRunMissingWorkingDirectory(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	for _, wd := range []string{"missing", filepath.Join(t.TempDir(), "gone")} {
		_, err := s.Run(hangGuard(t), RunOptions{Command: "touch ran", WorkingDirectory: wd})
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), wd) {
			t.Errorf("Run in %s: %v, want an error naming it that wraps fs.ErrNotExist", wd, err)
		}
		if _, err := s.Spawn(hangGuard(t), RunOptions{Command: "touch ran", WorkingDirectory: wd}); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Spawn in %s: %v, want fs.ErrNotExist", wd, err)
		}
	}
	if _, ok, _ := s.ReadFile("ran"); ok {
		t.Error("the command ran although its directory is missing")
	}
}

func TestRunBadEnvName(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	for _, name := range []string{"", "A=B", "A\x00"} {
		_, err := s.Run(hangGuard(t), RunOptions{Command: "touch ran", Env: map[string]string{name: "x"}})
		if err == nil || !strings.Contains(err.Error(), "bad environment variable name") {
			t.Errorf("Env name %q: %v, want an error", name, err)
		}
	}
	if _, ok, _ := s.ReadFile("ran"); ok {
		t.Error("a command ran with a bad environment")
	}
}

func TestRunCancelledBeforeStartStartsNothing(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Run(ctx, RunOptions{Command: "touch ran"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if _, err := s.Spawn(ctx, RunOptions{Command: "touch ran"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Spawn: %v, want context.Canceled", err)
	}
	if _, ok, _ := s.ReadFile("ran"); ok {
		t.Error("a command ran under a cancelled context")
	}
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
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run: %v, want %v", err, tt.want)
			}
			assertGone(t, readPids(t, s, "pids"))
		})
	}
}

func TestSpawnStreamsAndKill(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: "echo ready; echo warn >&2; " + treeCommand})
	if err != nil {
		t.Fatal(err)
	}
	// Spawn returned while the command runs: its first line arrives while
	// it still sleeps.
	out := bufio.NewReader(p.Stdout())
	if line, err := out.ReadString('\n'); line != "ready\n" || err != nil {
		t.Fatalf("first stdout line %q, %v", line, err)
	}
	errOut := bufio.NewReader(p.Stderr())
	if line, err := errOut.ReadString('\n'); line != "warn\n" || err != nil {
		t.Fatalf("first stderr line %q, %v", line, err)
	}
	waitLines(ctx, filepath.Join(s.Dir(), "pids"), 4)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a sleeping command: %v, want its context's error", err)
	}
	pids := readPids(t, s, "pids")
	if !proctree.Alive(pids[len(pids)-1]) {
		t.Fatal("the command died when Wait's context ended")
	}

	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); code != 143 || err != nil {
		t.Fatalf("Wait after Kill = %d, %v, want 143", code, err)
	}
	assertGone(t, pids)
	if rest, err := io.ReadAll(out); len(rest) != 0 || err != nil {
		t.Errorf("rest of stdout %q, %v, want EOF", rest, err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after exit: %v", err)
	}
	if code, err := p.Wait(ctx); code != 143 || err != nil {
		t.Errorf("second Wait = %d, %v", code, err)
	}
}

func TestSpawnOutput(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: "for i in 1 2 3; do echo o$i; echo e$i >&2; done; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); code != 4 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	// Readers taken after the exit still get everything, each from the start.
	for range 2 {
		if out, err := io.ReadAll(p.Stdout()); string(out) != "o1\no2\no3\n" || err != nil {
			t.Errorf("stdout %q, %v", out, err)
		}
		if out, err := io.ReadAll(p.Stderr()); string(out) != "e1\ne2\ne3\n" || err != nil {
			t.Errorf("stderr %q, %v", out, err)
		}
	}
}

func TestSpawnContextKillsTree(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithCancel(hangGuard(t))
	defer cancel()
	p, err := s.Spawn(ctx, RunOptions{Command: treeCommand})
	if err != nil {
		t.Fatal(err)
	}
	waitLines(ctx, filepath.Join(s.Dir(), "pids"), 4)
	cancel()
	if _, err := p.Wait(hangGuard(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
	assertGone(t, readPids(t, s, "pids"))
}

// A reader that fell behind the log's retention is told, then goes on.
func TestSpawnReaderBehindRetention(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	p, err := s.Spawn(ctx, RunOptions{Command: "head -c 20000000 /dev/zero"})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	r := p.Stdout()
	buf := make([]byte, 4096)
	if _, err := r.Read(buf); !errors.Is(err, ErrOutputDropped) {
		t.Fatalf("first Read: %v, want ErrOutputDropped", err)
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil || n == 0 || n >= 20000000 {
		t.Fatalf("after the drop: %d bytes, %v; want what is retained", n, err)
	}
}

func TestRunLargeOutput(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	res, err := s.Run(hangGuard(t), RunOptions{Command: "head -c 3000000 /dev/zero | tr '\\0' a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 3000000 || strings.Trim(res.Stdout, "a") != "" || res.Truncated {
		t.Fatalf("stdout of %d bytes, truncated %v", len(res.Stdout), res.Truncated)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "130" {
		t.Fatalf("exit code of a self-interrupting command: %s, want 130", got)
	}
}

// readPids reads the pids a command wrote to name in the session's directory.
func readPids(t *testing.T, s *Session, name string) []int {
	t.Helper()
	text, _, err := s.ReadTextFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for f := range strings.FieldsSeq(text) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("no pids in %s", name)
	}
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
