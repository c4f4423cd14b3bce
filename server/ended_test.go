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

// A command or cell that never started has no startedAt: killed while
// queued, or failed by its session's end. It had one, its end's, and the
// duration metric, which counts from creation for one that never started,
// read 0 s for it.
func TestNeverStartedHasNoStart(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	for _, opts := range []client.SessionOptions{{}, {Language: "python"}} {
		sess, err := d.c.CreateSession(c, opts)
		require.NoError(t, err)
		busy := client.CommandOptions{Cmd: "sleep 30"}
		queued := client.CommandOptions{Cmd: "echo q"}
		if opts.Language != "" {
			busy = client.CommandOptions{Code: "import time; time.sleep(30)"}
			queued = client.CommandOptions{Code: "print('q')"}
		}
		ran, err := d.c.Submit(c, sess.ID, busy)
		require.NoError(t, err)
		// It has started before its session is killed: a session killed
		// first ends it queued too, on a loaded machine.
		for {
			p, err := d.c.Get(c, ran.ID)
			require.NoError(t, err)
			if !p.StartedAt.IsZero() {
				break
			}
			require.True(t, p.ExitedAt.IsZero(), "%s: %+v", opts.Language, p)
			select {
			case <-c.Done():
				t.Fatalf("%s: never started", opts.Language) // the hang guard
			case <-time.After(5 * time.Millisecond):
			}
		}
		killed, err := d.c.Submit(c, sess.ID, queued)
		require.NoError(t, err)
		failed, err := d.c.Submit(c, sess.ID, queued)
		require.NoError(t, err)
		require.NoError(t, d.c.Kill(c, killed.ID, client.KillOptions{}))
		require.NoError(t, d.c.Kill(c, sess.ID, client.KillOptions{Signal: "KILL"}))
		for _, id := range []string{ran.ID, killed.ID, failed.ID} {
			w, _, err := d.c.Wait(c, id, time.Minute)
			require.NoError(t, err)
			require.NotNil(t, w)
		}
		for _, id := range []string{killed.ID, failed.ID} {
			p, err := d.c.Get(c, id)
			require.NoError(t, err)
			require.True(t, p.StartedAt.IsZero(), "%s %s: %+v", opts.Language, id, p)
			require.False(t, p.ExitedAt.IsZero())
		}
		p, err := d.c.Get(c, ran.ID)
		require.NoError(t, err)
		require.False(t, p.StartedAt.IsZero(), "%s: the one that ran", opts.Language)
	}
}
