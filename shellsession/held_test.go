package shellsession

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// openFiles counts this process's descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(es)
}

// TestHeldStreamsCostTheirReadEnds: a background job that keeps its
// command's output streams (sleep 60 & with no redirection) costs the
// engine the two read ends it cannot close without the job's writes
// dying of SIGPIPE, and nothing more: each such command kept an epoll set
// and a goroutine of its own too until its job ended, with no bound, and
// at the daemon's limit of open files every later command of the session
// failed. The session's held streams share one reader.
func TestHeldStreamsCostTheirReadEnds(t *testing.T) {
	s := newSession(t, Options{Shell: "bash"})
	for range 5 { // the pool and the spare sets fill
		run(t, s, CommandOptions{Cmd: "true"})
	}
	const n = 30
	fds, goroutines := openFiles(t), runtime.NumGoroutine()
	s.mu.Lock()
	t.Logf("pool %d, live %d, spare sets %d", len(s.pool), s.live, len(s.epolls))
	s.mu.Unlock()
	for range n {
		expectRun(t, s, "sleep 60 &", 0, "")
	}
	// Goroutines of earlier tests may still be ending: generous margins.
	grownFds, grownGoroutines := openFiles(t)-fds, runtime.NumGoroutine()-goroutines
	t.Logf("%d commands that left a job holding their streams: %d more descriptors, %d more goroutines", n, grownFds, grownGoroutines)
	require.LessOrEqual(t, grownFds, 2*n+4, "more than the two read ends per command")
	require.Less(t, grownGoroutines, n/3, "a goroutine per command")
	require.Equal(t, n, s.heldCommands())

	// The jobs' writes are still read, and discarded: no later command sees them.
	expectRun(t, s, "kill $(jobs -p); wait; echo done", 0, "done\n")
	// Some streams the jobs let go of fill the pool, and the held streams'
	// epoll set is kept: a few descriptors more than before, at most.
	require.Eventually(t, func() bool { return openFiles(t) <= fds+6 }, deadline, 10*time.Millisecond,
		"the streams are not closed once their jobs ended: %d descriptors, %d before", openFiles(t), fds)
	s.mu.Lock()
	t.Logf("pool %d, live %d, spare sets %d", len(s.pool), s.live, len(s.epolls))
	s.mu.Unlock()
	require.Eventually(t, func() bool { return s.heldCommands() == 0 }, deadline, 10*time.Millisecond)
	expectRun(t, s, "echo after", 0, "after\n")
}

// TestOutOfDescriptorsForStreams: a command that cannot get its streams
// because the daemon has no descriptors left fails saying so: which limit,
// that earlier commands' background jobs hold their streams, and what to
// do. It said "prepare streams: watch the streams: epoll_create1: too many
// open files", nothing of the jobs that held them.
//
// The descriptors are counted out in a process of the test's own: the
// limit applies to the whole process.
func TestOutOfDescriptorsForStreams(t *testing.T) {
	t.Parallel()
	out := reapertest.RunChild(t, "TestOutOfDescriptorsForStreamsChild", "CONCH_TEST_FD_CHILD=1")
	require.Contains(t, out, "failed as it should: ", "%s", out)
}

func TestOutOfDescriptorsForStreamsChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_FD_CHILD") == "" {
		t.Skip("run by TestOutOfDescriptorsForStreams")
	}
	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	s := newSession(t, Options{Shell: "bash"})
	for range 5 {
		run(t, s, CommandOptions{Cmd: "true"})
	}
	top := 0
	es, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range es {
		fd, _ := strconv.Atoi(e.Name())
		top = max(top, fd)
	}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(top + 1 + 40), Max: rl.Max}))
	var r process.Result
	held := 0
	for ; held < 100; held++ {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		_, r, err = s.Run(ctx, CommandOptions{Cmd: "sleep 60 &"})
		cancel()
		require.NoError(t, err)
		if r.Reason != process.Exited {
			break
		}
	}
	require.Equal(t, process.Failed, r.Reason, "no command failed with 40 descriptors free: %+v", r)
	for _, want := range []string{"RLIMIT_NOFILE", strconv.Itoa(held) + " earlier commands", ">/dev/null 2>&1 &", "delete the session"} {
		require.True(t, strings.Contains(r.Error, want), "%q says nothing of %q", r.Error, want)
	}
	t.Logf("failed as it should: %s", r.Error)
}
