package exec

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// A process on pipes is owned by one goroutine while it runs, which waits
// on its outputs and its exit together (see follow); a copy of each output
// and a wait for the exit took three.
func TestOneGoroutineAProcess(t *testing.T) {
	if !pidfdsWork() {
		t.Skip("this kernel gives no pidfds: a process has three goroutines")
	}
	wait(t, start(t, Options{Cmd: "true"})) // what a first start leaves running
	const n = 10
	before := runtime.NumGoroutine()
	var procs []*Process
	for range n {
		procs = append(procs, start(t, Options{Argv: []string{"sleep", "30"}}))
	}
	// One each, and room for a goroutine of something else (a timer's)
	// that comes and goes meanwhile: three each would be 30.
	require.LessOrEqual(t, runtime.NumGoroutine()-before, n+n/2, "goroutines for %d running processes", n)
	for _, p := range procs {
		require.NoError(t, p.Kill(syscall.SIGKILL, 0, 0))
		r := wait(t, p)
		require.Equal(t, process.Signaled, r.Reason, "result %s", show(r))
	}
}

// Output that a child left behind floods after the process exits is read
// for the drain delay and no longer: the process is done and its log closed
// although the output never ends nor pauses.
func TestDrainEndsAFlood(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "cat /dev/zero & echo started", DrainDelay: 300 * time.Millisecond})
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	require.Greater(t, len(logText(p.Log(), logstore.Stdout)), 1<<20, "bytes of the flood read")
	require.True(t, p.Log().Closed(), "log open after done")
}

// Where the kernel gives no pidfds, a process's outputs are copied and its
// exit waited for by goroutines of their own, with the same results.
func TestWithoutPidfds(t *testing.T) {
	works := pidfdsWork
	pidfdsWork = func() bool { return false }
	defer func() { pidfdsWork = works }()
	p := start(t, Options{Cmd: "echo out; echo err >&2; exit 3"})
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(3)), "result %s", show(r))
	require.Equal(t, "out\n", logText(p.Log(), logstore.Stdout))
	require.Equal(t, "err\n", logText(p.Log(), logstore.Stderr))
	require.Equal(t, -1, p.pidfd)
	p = start(t, Options{Cmd: "(sleep 0.3; echo mid; sleep 5; echo late) & echo early", DrainDelay: time.Second})
	wait(t, p)
	require.Equal(t, "early\nmid\n", logText(p.Log(), logstore.Stdout))
}

// The edge that says an output's writers have closed may come with its last
// bytes, and no edge follows it: the end-of-file after them is read then. A
// process whose output ended with it is done at its exit, with no drain
// waited for (missed, the end-of-file was seen only at the drain's end).
func TestLastBytesAndEndOfFileTogether(t *testing.T) {
	if !pidfdsWork() {
		t.Skip("this kernel gives no pidfds")
	}
	var armed atomic.Int32
	drainArmed = func() { armed.Add(1) }
	defer func() { drainArmed = nil }()
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	want := b.String()
	for range 10 {
		p := start(t, Options{Cmd: "seq 1 2000", DrainDelay: time.Hour})
		r := wait(t, p) // the drain's end, an hour away, would fail its hang guard
		require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
		require.Equal(t, want, logText(p.Log(), logstore.Stdout))
	}
	require.Zero(t, armed.Load(), "drain timers armed for output that ended with its process")
}

// The outputs' write ends stay open in this process until the process
// exits (see follow): one that closed its outputs and lives on wakes follow
// for nothing before its exit, where their hang-up woke it, and the exit
// then took a sleep and a wake of its own.
func TestNoWakeBeforeTheExit(t *testing.T) {
	if !pidfdsWork() {
		t.Skip("this kernel gives no pidfds")
	}
	const id = "no-wake-before-the-exit"
	var early atomic.Int32
	followWoke = func(p *Process, exited bool) {
		if p.id == id && !exited {
			early.Add(1)
		}
	}
	defer func() { followWoke = nil }()
	dir := t.TempDir()
	p := start(t, Options{ID: id, Cmd: "exec >&- 2>&-; : >closed; read x; exit 4", Cwd: dir, Stdin: process.StdinOpen})
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "closed"))
		return err == nil
	}, 20*time.Second, time.Millisecond, "the process never closed its outputs")
	require.NoError(t, p.WriteStdin([]byte("\n")))
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(4)), "result %s", show(r))
	require.Zero(t, early.Load(), "wake-ups before the exit")
	require.True(t, p.Log().Closed(), "log open after done")
}
