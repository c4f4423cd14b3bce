package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// readyPoll is how often the daemon looks for a port (docs/api.md).
const readyPoll = 100 * time.Millisecond

// Calls waiting on one process's port share its looks: their number grows
// with the time waited, not with the calls. Each call looking for itself
// every 100 ms made 200 calls waiting on a port nobody opened cost a third
// of a core or more.
func TestReadyPortWaitersShareLooks(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "sleep 60"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})

	const waiters = 50
	before := server.PortLooks(d.srv)
	begun := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for range waiters {
		wg.Go(func() {
			r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Port: "1", Timeout: 1500 * time.Millisecond})
			if err == nil && (r != nil || still == nil) {
				err = fmt.Errorf("want 202, got %+v", r)
			}
			errs <- err
		})
	}
	wg.Wait()
	elapsed := time.Since(begun)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	looks := server.PortLooks(d.srv) - before
	// One look at once and one each readyPoll while any call waits; twice
	// that and some, for the calls that came after the others had gone.
	most := 2*int64(elapsed/readyPoll) + 10
	t.Logf("%d calls waiting %v made %d looks", waiters, elapsed, looks)
	require.Positive(t, looks)
	require.LessOrEqual(t, looks, most, "%d calls waiting %v made %d looks", waiters, elapsed, looks)
	require.Zero(t, server.PortWaiters(d.srv, p.ID), "the calls left")
}

// Every call waiting on a port that opens is told, whether it asked for
// that port or any.
func TestReadyPortOpensForEveryWaiter(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	var wg sync.WaitGroup
	defer wg.Wait() // after the kill, which ends the calls still waiting
	open := filepath.Join(t.TempDir(), "open")
	// The socket is bound, so that its port is known and kept, and
	// listens once the file is there.
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: `python3 -c '
import os, socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
while not os.path.exists("` + open + `"):
    time.sleep(0.05)
s.listen()
time.sleep(60)
'`})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	bound, _, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: `[0-9]+`})
	require.NoError(t, err)
	require.NotNil(t, bound, "its port printed")
	port, err := strconv.Atoi(bound.Match)
	require.NoError(t, err)

	const waiters = 40
	answers := make(chan *client.Ready, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		want := "any"
		if i%2 == 0 {
			want = bound.Match
		}
		wg.Go(func() {
			r, _, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Port: want})
			errs <- err
			answers <- r
		})
	}
	guard := time.Now().Add(30 * time.Second)
	for server.PortWaiters(d.srv, p.ID) < waiters {
		require.True(t, time.Now().Before(guard), "the calls did not all wait")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, os.WriteFile(open, nil, 0o600))
	for range waiters {
		require.NoError(t, <-errs)
		r := <-answers
		require.NotNil(t, r, "the wait ran out")
		require.True(t, r.Ready)
		require.Equal(t, port, r.Port)
	}
}

// A session command that ended with a job running is not ended first while
// the job runs; it is once the job ended too.
func TestReadyPortEndedWithItsJob(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	stop := filepath.Join(t.TempDir(), "stop")
	cmd, _, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "while [ ! -e " + stop + " ]; do sleep 0.05; done &"},
	})
	require.NoError(t, err)
	r, still, err := d.c.Ready(ctx(t), cmd.ProcessID, client.ReadyOptions{Port: "any", Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Nil(t, r, "ended first while its job ran")
	require.NotNil(t, still)
	require.NoError(t, os.WriteFile(stop, nil, 0o600))
	r, still, err = d.c.Ready(ctx(t), cmd.ProcessID, client.ReadyOptions{Port: "any"})
	require.NoError(t, err)
	require.Nil(t, still)
	require.False(t, r.Ready)
	require.NotNil(t, r.Result)
}
