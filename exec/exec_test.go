package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/tracetest"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   Options
		want   process.Result
		stdout string // wanted exactly, when set
		stderr string // wanted as a substring, when set
	}{
		{name: "exit-3", opts: Options{Cmd: "exit 3"}, want: process.ExitedWith(3)},
		{name: "exit-0", opts: Options{Cmd: "true"}, want: process.ExitedWith(0)},
		{name: "missing-program-under-shell", opts: Options{Cmd: "no-such-program-4f2a"},
			want: process.ExitedWith(127), stderr: "no-such-program-4f2a: command not found"},
		{name: "argv", opts: Options{Argv: []string{"sh", "-c", "echo $0 $1; exit 5", "a b"}},
			want: process.ExitedWith(5), stdout: "a b\n"},
		{name: "argv-no-shell", opts: Options{Argv: []string{"echo", "$HOME", "*"}},
			want: process.ExitedWith(0), stdout: "$HOME *\n"},
		{name: "missing-program-argv", opts: Options{Argv: []string{"no-such-program-4f2a"}},
			want: process.Result{Reason: process.Failed, Error: `exec "no-such-program-4f2a": executable file not found in $PATH`}},
		{name: "argv-not-executable", opts: Options{Argv: []string{"/etc/passwd"}},
			want: process.Result{Reason: process.Failed, Error: `exec "/etc/passwd": /etc/passwd: permission denied`}},
		{name: "signal-in-wait-status", opts: Options{Cmd: "kill -USR1 $$"},
			want: process.Result{Reason: process.Signaled, Signal: "USR1", ExitCode: code(138)}},
		{name: "stdout-and-stderr", opts: Options{Cmd: "echo out; echo err >&2"},
			want: process.ExitedWith(0), stdout: "out\n", stderr: "err\n"},
		{name: "no-trailing-newline", opts: Options{Cmd: "printf abc"}, want: process.ExitedWith(0), stdout: "abc"},
		{name: "shell-dash", opts: Options{Cmd: `[ -z "$BASH_VERSION" ] && echo not-bash`, Shell: "dash"},
			want: process.ExitedWith(0), stdout: "not-bash\n"},
		{name: "not-login-shell", opts: Options{Cmd: "shopt -q login_shell || echo plain"},
			want: process.ExitedWith(0), stdout: "plain\n"},
		{name: "env-and-no-token", opts: Options{Cmd: `echo "$FOO ${CONCH_TOKEN-unset}"`, Env: map[string]string{"FOO": "bar"}},
			want: process.ExitedWith(0), stdout: "bar unset\n"},
		{name: "env-path-used-for-argv", opts: Options{Argv: []string{"sh", "-c", "echo ok"}, Env: map[string]string{"PATH": "/nonexistent"}},
			want: process.Result{Reason: process.Failed, Error: `exec "sh": executable file not found in $PATH`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, tc.opts)
			got := wait(t, p)
			assert.True(t, sameResult(got, tc.want), "result %s, want %s (output %q)", show(got), show(tc.want), logText(p.Log(), 0))
			out := logText(p.Log(), logstore.Stdout)
			assert.False(t, tc.stdout != "" && out != tc.stdout, "stdout %q, want %q", out, tc.stdout)
			errOut := logText(p.Log(), logstore.Stderr)
			assert.Contains(t, errOut, tc.stderr, "stderr %q, want it to hold %q", errOut, tc.stderr)
			info := p.Info()
			assert.False(t, info.State != process.Terminal || info.ExitedAt.IsZero(), "info after the end: state %s, exitedAt %v", info.State, info.ExitedAt)
			select {
			case <-p.Exited():
			default:
				t.Error("Exited not closed once the process is done")
			}
		})
	}
}

// TestLoginShell: a login shell reads the profile of its HOME. The test
// gives it a HOME of its own, so the tester's profile never runs.
func TestLoginShell(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("FROM_PROFILE=yes\n"), 0o644))
	env := map[string]string{"HOME": home, "ENV": "", "BASH_ENV": ""}
	p := start(t, Options{Cmd: "shopt -q login_shell && echo login $FROM_PROFILE", Login: true, Env: env})
	got := wait(t, p)
	require.True(t, sameResult(got, process.ExitedWith(0)), "result %s (output %q)", show(got), logText(p.Log(), 0))
	out := logText(p.Log(), logstore.Stdout)
	assert.Equal(t, "login yes\n", out, "stdout %q, want the profile of the test's own HOME read", out)
}

func sameResult(a, b process.Result) bool {
	if (a.ExitCode == nil) != (b.ExitCode == nil) || a.ExitCode != nil && *a.ExitCode != *b.ExitCode {
		return false
	}
	return a.Reason == b.Reason && a.Signal == b.Signal && a.Error == b.Error
}

func show(r process.Result) string {
	s := string(r.Reason)
	if r.ExitCode != nil {
		s += " code " + strconv.Itoa(*r.ExitCode)
	}
	if r.Signal != "" {
		s += " signal " + r.Signal
	}
	if r.Error != "" {
		s += " error " + r.Error
	}
	return s
}

func TestInfo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, Options{Cmd: "pwd", Cwd: dir, Name: "job", Shell: "sh"})
	wait(t, p)
	info := p.Info()
	got := logText(p.Log(), logstore.Stdout)
	assert.Equal(t, dir+"\n", got, "pwd printed %q, want %q", got, dir+"\n")
	assert.False(t, info.Kind != process.KindExec || info.Name != "job" || info.Cwd != dir || info.ShellCommand != "pwd" ||
		info.Shell != "sh" || !filepath.IsAbs(info.ResolvedShell) || info.PID == 0 || info.Stdin != process.StdinClosed ||
		info.KeepLogs != logstore.KeepUntilCleanup || info.StartedAt.IsZero(), "info %+v", info)
}

func TestInvalidOptionsStartNothing(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	touch := "touch " + marker
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"missing-cwd", Options{Cmd: touch, Cwd: "/nonexistent/dir"}},
		{"cwd-is-a-file", Options{Cmd: touch, Cwd: "/etc/passwd"}},
		{"relative-cwd", Options{Cmd: touch, Cwd: "tmp"}},
		{"unknown-shell", Options{Cmd: touch, Shell: "python3"}},
		{"neither-cmd-nor-argv", Options{}},
		{"both-cmd-and-argv", Options{Cmd: touch, Argv: []string{"touch", marker}}},
		{"empty-argv", Options{Argv: []string{}}},
		{"terminal-on-exec", Options{Cmd: touch, Terminal: &process.TerminalSize{Cols: 80, Rows: 24}}},
		{"bad-kind", Options{Cmd: touch, Kind: process.KindSession}},
		{"bad-stdin", Options{Cmd: touch, Stdin: "half"}},
		{"bad-keep-logs", Options{Cmd: touch, KeepLogs: "forever"}},
		{"unknown-user", Options{Cmd: touch, User: "no-such-user-4f2a"}},
		{"nul-in-id", Options{Cmd: touch, ID: "a\x00b"}},
		// Linux passes at most MaxArgBytes in one argument: such a cmd
		// was taken, and its process failed to start ("argument list too
		// long"), as did a PTY's.
		{"cmd-over-one-argument", Options{Cmd: touch + " #" + strings.Repeat("a", MaxArgBytes)}},
		{"pty-cmd-over-one-argument", Options{Kind: process.KindPTY, Cmd: touch + " #" + strings.Repeat("a", MaxArgBytes)}},
		{"argv-over-one-argument", Options{Argv: []string{"touch", marker, strings.Repeat("a", MaxArgBytes+1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Start(tc.opts)
			require.False(t, !errors.Is(err, process.ErrInvalidArgument) || p != nil, "Start: %v, %v; want an error wrapping ErrInvalidArgument", p, err)
		})
	}
	_, err := os.Stat(marker)
	assert.ErrorIs(t, err, os.ErrNotExist, "a command ran")
}

func TestUser(t *testing.T) {
	t.Parallel()
	opts := Options{Cmd: `echo "$(id -u) $HOME $USER"`, User: "nobody", Cwd: "/"}
	if os.Geteuid() != 0 {
		_, err := Start(opts)
		require.ErrorIs(t, err, process.ErrUnsupported, "Start as another user, not root, want ErrUnsupported")
		return
	}
	p := start(t, opts)
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	got := logText(p.Log(), logstore.Stdout)
	assert.Equal(t, "65534 /nonexistent nobody\n", got, "as nobody: %q", got)
}

// TestUserCannotEnterCwd: a process run as a user who cannot enter its
// cwd fails saying so, naming the directory; it said "fork/exec
// /usr/bin/bash: permission denied", blaming the shell.
func TestUserCannotEnterCwd(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	base := t.TempDir()
	for _, dir := range []string{filepath.Dir(base), base} { // the test's own are 0700
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	closed := filepath.Join(base, "closed")
	require.NoError(t, os.MkdirAll(filepath.Join(closed, "in"), 0o700))
	p := start(t, Options{Cmd: "true", User: "nobody", Cwd: filepath.Join(closed, "in")})
	r := wait(t, p)
	require.Equal(t, process.Failed, r.Reason, "%s", show(r))
	require.Contains(t, r.Error, "cannot enter "+closed+" (permission denied)")
}

// TestUnknownUserSaysSo: an unknown user is named once, with what is
// wrong (it read "user: user: unknown user NAME").
func TestUnknownUserSaysSo(t *testing.T) {
	t.Parallel()
	_, err := Start(Options{Cmd: "true", User: "no-such-user-4f2a"})
	require.ErrorIs(t, err, process.ErrInvalidArgument)
	require.Equal(t, `invalid argument: user "no-such-user-4f2a": no such user name or uid on this machine`, err.Error())
}

// TestEndedRecordIsLean: an ended process keeps its description and
// output, not what ran it (its command's environment, files, handles): a
// daemon keeps thousands of such records.
func TestEndedRecordIsLean(t *testing.T) {
	per := recordBytes(t, 100, Options{Cmd: "true"}, func(process.Result) {})
	t.Logf("an ended record: %d bytes", per)
	require.Less(t, per, int64(2048), "bytes per ended record")
}

// TestFailedRecordIsLean: a process whose start failed keeps no more than
// one that ended: not the environment it was to run with. One refused for
// an environment over the kernel's bound (E2BIG) kept it whole: 60 such
// records of 15 MiB held 1.19 GB.
func TestFailedRecordIsLean(t *testing.T) {
	big := strings.Repeat("e", 256<<10) // over MAX_ARG_STRLEN: execve refuses it
	per := recordBytes(t, 20, Options{Cmd: "true", Env: map[string]string{"BIG": big}}, func(r process.Result) {
		require.Equal(t, process.Failed, r.Reason, "%s", show(r))
		require.Contains(t, r.Error, "argument list too long")
	})
	t.Logf("a failed record: %d bytes", per)
	require.Less(t, per, int64(4096), "bytes per failed record")
}

// recordBytes starts n processes with opts, waits for each and checks its
// result, and returns the heap each one's record keeps. Processes are
// started with Start rather than start: a cleanup per process would be
// counted as part of the record. The tests that use it are not parallel.
func recordBytes(t *testing.T, n int, opts Options, check func(process.Result)) int64 {
	t.Helper()
	kept := make([]*Process, 0, n)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, p := range kept {
			assert.NoError(t, p.Stop(ctx), "stop")
		}
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		p, err := Start(opts)
		require.NoError(t, err, "Start")
		kept = append(kept, p)
		check(wait(t, p))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
}

// A process started with stdin closed reads end-of-file from the /dev/null
// every such process shares: no start opens it (os/exec would, through the
// Go scheduler, for each).
func TestClosedStdinOpensNothing(t *testing.T) {
	procs, stacks := tracedStarts(t, Options{Cmd: "cat; echo read $?"})
	for _, stack := range stacks {
		for _, f := range stack {
			require.NotContains(t, f, "childStdin", "a start opened /dev/null: %v", stack)
		}
	}
	for _, p := range procs {
		require.Equal(t, 0, *wait(t, p).ExitCode)
		require.Equal(t, "read 0\n", logText(p.Log(), logstore.Stdout))
	}
}

// The child's ends of a process's output pipes stay plain blocking
// descriptors, never offered to the Go poller: os.Pipe's were made
// non-blocking and added to it, then made blocking again for the child and
// removed as they were closed, each call through the scheduler. A child
// that fills its pipe still blocks rather than failing.
func TestOutputPipesCallAroundThePoller(t *testing.T) {
	procs, stacks := tracedStarts(t, Options{Cmd: "head -c 300000 /dev/zero"})
	calls := 0
	for _, stack := range stacks {
		if slices.Contains(stack, "github.com/conchsh/conch/exec.(*Process).startPipes") &&
			!slices.Contains(stack, "os.StartProcess") {
			calls++
		}
	}
	// The child's two ends closed once it has its copies; os.Pipe made 50.
	require.LessOrEqual(t, calls, 5*2, "calls through the scheduler to make the pipes of 5 processes")
	for _, p := range procs {
		require.Equal(t, 0, *wait(t, p).ExitCode)
		require.Len(t, logText(p.Log(), logstore.Stdout), 300000)
	}
}

// tracedStarts starts five processes with opts under the runtime's trace,
// after one start outside it (what a first start opens for every later
// one is open), and returns them and the stacks of the system calls made
// through the scheduler meanwhile.
func tracedStarts(t *testing.T, opts Options) ([]*Process, [][]string) {
	t.Helper()
	wait(t, start(t, Options{Cmd: "true"}))
	var procs []*Process
	stacks := tracetest.Syscalls(t, func() {
		for range 5 {
			procs = append(procs, start(t, opts))
		}
	})
	return procs, stacks
}

// A process whose output ended before it did arms no drain (a timer the Go
// poller would be woken to set and to stop, or follow's deadline); one
// whose background child holds its output open arms one.
func TestDrainTimerOnlyForOutputStillOpen(t *testing.T) {
	var armed atomic.Int32
	drainArmed = func() { armed.Add(1) }
	defer func() { drainArmed = nil }()
	// A second for the copies to see end-of-file, a loaded machine's
	// scheduler included; three for the background child to hold on.
	wait(t, start(t, Options{Cmd: "exec >&- 2>&-; sleep 1"}))
	require.Zero(t, armed.Load(), "armed for a process whose output had ended")
	wait(t, start(t, Options{Cmd: "sleep 3 & echo $!", DrainDelay: 50 * time.Millisecond}))
	require.Equal(t, int32(1), armed.Load())
}

// A process with no cwd runs in the daemon's directory, even once that was
// removed: it starts there by inheriting it, as no path leads there, and
// its info names the path the directory had. It once failed to start:
// "getwd: no such file or directory", and the daemon answered 500.
func TestDaemonDirectoryRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	require.NoError(t, os.Mkdir(dir, 0o755))
	t.Chdir(dir)
	require.NoError(t, os.Remove(dir))
	for _, opts := range []Options{
		{Cmd: "readlink /proc/$$/cwd"},
		{Argv: []string{"readlink", "/proc/self/cwd"}},
	} {
		p := start(t, opts)
		r := wait(t, p)
		require.True(t, r.Reason == process.Exited && r.ExitCode != nil && *r.ExitCode == 0, "%+v: %s", r, logText(p.Log(), 0))
		require.Equal(t, dir+" (deleted)\n", logText(p.Log(), logstore.Stdout))
		require.Equal(t, dir, p.Info().Cwd)
	}
}

// A process with no cwd is given the daemon's directory by the name
// os.Getwd gives it: $PWD when that names the same directory (a path
// through a symbolic link, say), else the directory's own path.
func TestDaemonDirectoryNamedAsGetwd(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real, other := filepath.Join(dir, "real"), filepath.Join(dir, "other")
	require.NoError(t, os.Mkdir(real, 0o755))
	require.NoError(t, os.Mkdir(other, 0o755))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	t.Chdir(link)
	for pwd, want := range map[string]string{link: link, other: real, "relative": real} {
		t.Setenv("PWD", pwd)
		getwd, err := os.Getwd()
		require.NoError(t, err)
		require.Equal(t, want, getwd, "PWD=%s", pwd)
		p := start(t, Options{Argv: []string{"true"}})
		wait(t, p)
		require.Equal(t, want, p.Info().Cwd, "PWD=%s", pwd)
	}
}

// TestLongestCmdRuns: a cmd of MaxArgBytes, the most one argument holds,
// runs.
func TestLongestCmdRuns(t *testing.T) {
	t.Parallel()
	cmd := "echo ran #"
	cmd += strings.Repeat("a", MaxArgBytes-len(cmd))
	p, err := Start(Options{Cmd: cmd})
	require.NoError(t, err)
	r := wait(t, p)
	require.True(t, r.Reason == process.Exited && r.ExitCode != nil && *r.ExitCode == 0, "%+v", r)
}

// TestHalfCharacterKeepsItsPlace: a program that writes half a character
// on stdout, then on stderr a while later, has them in that order: the
// half waited for its rest, and came after stderr's line, at the end.
func TestHalfCharacterKeepsItsPlace(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: `printf 'progress \342\226'; sleep 0.3; echo done >&2`})
	r := wait(t, p)
	require.True(t, r.Reason == process.Exited && r.ExitCode != nil && *r.ExitCode == 0, "%s", show(r))
	var order []string // runs of one channel's bytes, as frames gave them
	last := ""
	for _, f := range p.Log().Page(0, 0).Frames {
		if ch := f.Channel.String(); ch != last {
			order, last = append(order, ch+":"), ch
		}
		order[len(order)-1] += string(f.Data)
	}
	require.Equal(t, []string{"stdout:progress \xe2\x96", "stderr:done\n"}, order)
}

// A running process keeps none of its environment in the engine: up to the
// kernel's ~2 MB a process, it would be held for as long as the process ran.
// Not parallel: it reads the heap.
func TestRunningProcessKeepsNoEnv(t *testing.T) {
	before := heaptest.Live()
	var ps []*Process
	for i := range 8 {
		opts := Options{Argv: []string{"sleep", "30"}, Env: processtest.BigEnv()}
		if i%2 == 1 {
			opts.Kind = process.KindPTY
		}
		p, err := Start(opts)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	held := heaptest.Live() - before
	for _, p := range ps {
		require.Equal(t, process.Running, p.Info().State, "%+v", p.Info().Result)
		require.NoError(t, p.Kill(syscall.SIGKILL, 0, 0))
		<-p.Done()
	}
	// Eight environments of 1.4 MB: 11.5 MB if they were kept.
	require.Less(t, held, int64(4<<20), "the heap grew by %d bytes with 8 running processes", held)
}

// TestCwdDotDotAfterSymlink: a cwd whose ".." follows a symbolic link is
// the directory the kernel reaches, above the link's target, as for a
// session; it ran one above the link itself, Clean's lexical answer, a
// directory other than the one checked.
func TestCwdDotDotAfterSymlink(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real := filepath.Join(dir, "real")
	require.NoError(t, os.MkdirAll(filepath.Join(real, "sub"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "elsewhere"), 0o755))
	link := filepath.Join(dir, "elsewhere", "link")
	require.NoError(t, os.Symlink(filepath.Join(real, "sub"), link))
	p := start(t, Options{Argv: []string{"readlink", "/proc/self/cwd"}, Cwd: link + "/.."})
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	assert.Equal(t, real+"\n", logText(p.Log(), logstore.Stdout))
	assert.Equal(t, real, p.Info().Cwd)
}

// TestPWDIsTheCwd: a process's PWD names its own directory, by the path
// asked, unless env sets it; it was the daemon's PWD, which a program that
// reads $PWD (a shell checks it, Python and Node do not) took for its own.
func TestPWDIsTheCwd(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Argv: []string{"printenv", "PWD"}, Cwd: link}, link},
		{Options{Argv: []string{"printenv", "PWD"}, Cwd: real + "/"}, real},
		{Options{Kind: process.KindPTY, Argv: []string{"printenv", "PWD"}, Cwd: real}, real},
		{Options{Argv: []string{"printenv", "PWD"}, Cwd: real, Env: map[string]string{"PWD": "/asked"}}, "/asked"},
	} {
		p := start(t, tc.opts)
		r := wait(t, p)
		require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
		assert.Equal(t, tc.want, strings.TrimRight(logText(p.Log(), 0), "\r\n"), "%+v", tc.opts)
	}
}
