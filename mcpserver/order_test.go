package mcpserver

import (
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"
)

// TestOrderCancel: the client's cancels of runs interrupt their commands
// in the order it sent them, each once its command is queued, and a run
// cancelled before its submission began submits nothing. Before, each
// run's handler interrupted its own command when it learned of its cancel:
// with the running command's call cancelled just after the queued one's,
// the running one's interrupt could come first and the queued command ran
// (TestStdioCancelled under load: 5 times in 50 runs with three busy
// loops beside it, none after).
func TestOrderCancel(t *testing.T) {
	o := newOrder()
	var mu sync.Mutex
	var interrupted []string
	o.interrupt = func(id string) {
		mu.Lock()
		defer mu.Unlock()
		interrupted = append(interrupted, id)
	}
	id := func(n int64) jsonrpc.ID {
		i, err := jsonrpc.MakeID(float64(n))
		require.NoError(t, err)
		return i
	}
	t2, t3, t4 := o.arrive(id(2), "s"), o.arrive(id(3), "s"), o.arrive(id(4), "s")

	// 2's command runs, 3's is being submitted, 4's submission has not begun.
	s2, ok := o.submitting(t2)
	require.True(t, ok)
	o.submitted(s2, "cmd2")
	s3, ok := o.submitting(t3)
	require.True(t, ok)

	done := make(chan struct{})
	go func() {
		defer close(done)
		o.cancel(id(3)) // waits for 3's submission
		o.cancel(id(2))
		o.cancel(id(4))
	}()
	time.Sleep(50 * time.Millisecond) // most often, 3's cancel waits by now
	o.submitted(s3, "cmd3")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancels did not return")
	}
	require.Equal(t, []string{"cmd3", "cmd2"}, interrupted)
	_, ok = o.submitting(t4)
	require.False(t, ok, "a run cancelled before its submission began submits nothing")
	for _, n := range []int64{t2, t3, t4} {
		require.True(t, o.cancelledByClient(n), "its handler sends no second interrupt")
	}
	t5 := o.arrive(id(5), "s")
	require.False(t, o.cancelledByClient(t5))
	o.answered(id(5))

	// Answered calls leave nothing behind.
	for _, n := range []int64{2, 3, 4} {
		o.answered(id(n))
	}
	require.Empty(t, o.runs)
	require.Empty(t, o.of)
}
