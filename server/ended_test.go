package server_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/server"
)

// leaveBehind runs a process that ends at once leaving a sleep behind it,
// and returns its id and the sleep, which is killed at the test's end
// whatever happens.
func (d *daemon) leaveBehind(t *testing.T, keep api.KeepLogs) (string, proctree.Ident) {
	t.Helper()
	r := d.run(t, client.StartOptions{Cmd: "sleep 300 >/dev/null 2>&1 & echo $!", KeepLogs: keep})
	pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	require.NoError(t, err, "stdout %q", r.Stdout)
	left := proctree.IdentOf(pid)
	require.True(t, left.Alive(), "the sleep %d left behind is not running", pid)
	t.Cleanup(func() {
		if left.Alive() {
			_ = syscall.Kill(left.PID, syscall.SIGKILL)
		}
	})
	return r.ProcessID, left
}

// A record the daemon forgets by itself once its exit TTL has passed takes
// what the process left behind with it, as a DELETE would: nothing could
// reach those processes any more (kill and DELETE answer 404), and they
// ran on until the daemon's end.
func TestExpiredRecordStopsWhatItLeft(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{ExitTTL: 100 * time.Millisecond})
	c := ctx(t)
	id, left := d.leaveBehind(t, api.KeepOnExitTTL)
	require.Eventually(t, func() bool {
		_, err := d.c.Get(c, id)
		return client.HasCode(err, client.CodeNotFound)
	}, 20*time.Second, 10*time.Millisecond, "the record forgotten after its TTL")
	requireGone(t, left)
}

// Records the daemon forgets over MaxEnded take what their processes left
// behind with them; the records kept keep theirs, for their kill or DELETE.
func TestEvictedRecordStopsWhatItLeft(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxEnded: 3})
	c := ctx(t)
	var ids []string
	var left []proctree.Ident
	for range 5 {
		id, l := d.leaveBehind(t, "")
		ids, left = append(ids, id), append(left, l)
	}
	// The watcher counts a record once it saw the end: wait for it.
	for d.budget(t, "endedRecords").Used != 3 {
		require.NoError(t, c.Err())
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 2 {
		_, err := d.c.Get(c, ids[i])
		requireCode(t, err, client.CodeNotFound)
		requireGone(t, left[i])
	}
	for i := 2; i < 5; i++ {
		require.True(t, left[i].Alive(), "the sleep of kept record %s was stopped", ids[i])
		require.NoError(t, d.c.Delete(c, ids[i]))
		requireGone(t, left[i])
	}
}
