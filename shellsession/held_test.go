package shellsession

import (
	"os"
	"runtime"
	"testing"
	"time"

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
