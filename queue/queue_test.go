package queue

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type job struct {
	run    func()
	cancel func(error)
}

func (j job) Run()           { j.run() }
func (j job) Cancel(e error) { j.cancel(e) }

func TestOrderAndSerial(t *testing.T) {
	t.Parallel()
	var q Queue
	var mu sync.Mutex
	var order []int
	active := 0
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		require.NoError(t, q.Push(job{run: func() {
			defer wg.Done()
			mu.Lock()
			active++
			require.Equal(t, 1, active, "two jobs ran at once")
			order = append(order, i)
			mu.Unlock()
			time.Sleep(time.Microsecond)
			mu.Lock()
			active--
			mu.Unlock()
		}}))
	}
	wg.Wait()
	for i, v := range order {
		require.Equal(t, i, v)
	}
	q.Close(nil)
}

func TestCloseCancelsWaiting(t *testing.T) {
	t.Parallel()
	var q Queue
	release := make(chan struct{})
	started := make(chan struct{})
	require.NoError(t, q.Push(job{run: func() { close(started); <-release }}))
	<-started
	var got []error
	var mu sync.Mutex
	for range 3 {
		require.NoError(t, q.Push(job{
			run:    func() { t.Error("a cancelled job ran") },
			cancel: func(e error) { mu.Lock(); got = append(got, e); mu.Unlock() },
		}))
	}
	ended := errors.New("session ended")
	closed := make(chan struct{})
	go func() { q.Close(ended); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a job was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	require.Len(t, got, 3)
	for _, e := range got {
		require.ErrorIs(t, e, ended)
	}
	require.ErrorIs(t, q.Push(job{}), ErrClosed)
	require.Equal(t, 0, q.Len())
}

// Shut cancels the waiting jobs and refuses later pushes at once, without
// waiting for the running job, which goes on to its end.
func TestShutDoesNotWait(t *testing.T) {
	t.Parallel()
	var q Queue
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan struct{})
	require.NoError(t, q.Push(job{run: func() { close(started); <-release; close(done) }}))
	<-started
	cancelled := make(chan error, 1)
	require.NoError(t, q.Push(job{
		run:    func() { t.Error("a cancelled job ran") },
		cancel: func(e error) { cancelled <- e },
	}))
	ended := errors.New("session ended")
	q.Shut(ended)
	require.ErrorIs(t, <-cancelled, ended)
	require.ErrorIs(t, q.Push(job{}), ErrClosed)
	select {
	case <-done:
		t.Fatal("the running job ended before it was let go")
	default:
	}
	close(release)
	q.Close(nil) // waits for it
	<-done
}

// A caller that claims the idle queue runs its own job in its turn: jobs
// pushed meanwhile wait for Release, and Close waits for it too.
func TestClaim(t *testing.T) {
	t.Parallel()
	var q Queue
	require.True(t, q.Claim())
	require.False(t, q.Claim(), "claimed twice")
	ran := make(chan struct{})
	require.NoError(t, q.Push(job{run: func() { close(ran) }}))
	select {
	case <-ran:
		t.Fatal("a job ran during a claimed turn")
	case <-time.After(20 * time.Millisecond):
	}
	q.Release()
	<-ran
	// Idle again once the job pushed meanwhile has run.
	require.Eventually(t, q.Claim, 5*time.Second, time.Millisecond)

	closed := make(chan struct{})
	go func() { q.Close(nil); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned during a claimed turn")
	case <-time.After(20 * time.Millisecond):
	}
	q.Release()
	<-closed
	require.False(t, q.Claim(), "claimed a closed queue")
}

// A queue with jobs waiting cannot be claimed: they go first.
func TestClaimWaitsForPending(t *testing.T) {
	t.Parallel()
	var q Queue
	release := make(chan struct{})
	require.NoError(t, q.Push(job{run: func() { <-release }}))
	require.False(t, q.Claim(), "claimed while a job runs")
	close(release)
	require.Eventually(t, q.Claim, 5*time.Second, time.Millisecond)
	q.Release()
	q.Close(nil)
}

// A turn held for a job (Hold) is the job's until its holder takes it:
// Close cancels the job and ends the turn, and Take then reports false, so
// that a holder that never takes its turn does not keep Close waiting for
// ever; Drop gives the turn back to the queue.
func TestHold(t *testing.T) {
	t.Parallel()
	ended := errors.New("session ended")
	newJob := func(cancelled *[]error) *job {
		return &job{run: func() { t.Error("a held job ran on the worker") }, cancel: func(e error) { *cancelled = append(*cancelled, e) }}
	}

	t.Run("close before take", func(t *testing.T) {
		var q Queue
		var got []error
		j := newJob(&got)
		require.True(t, q.Hold(j))
		require.False(t, q.Claim(), "claimed a held turn")
		done := make(chan struct{})
		go func() { q.Close(ended); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Close waits for a turn nobody takes")
		}
		require.Len(t, got, 1)
		require.ErrorIs(t, got[0], ended)
		require.False(t, q.Take(j), "took a turn Close ended")
		require.False(t, q.Drop(j))
	})

	t.Run("take then close", func(t *testing.T) {
		var q Queue
		var got []error
		j := newJob(&got)
		require.True(t, q.Hold(j))
		require.True(t, q.Take(j))
		require.False(t, q.Take(j), "taken twice")
		require.False(t, q.Drop(j), "dropped a taken turn")
		closed := make(chan struct{})
		go func() { q.Close(nil); close(closed) }()
		select {
		case <-closed:
			t.Fatal("Close returned during a taken turn")
		case <-time.After(20 * time.Millisecond):
		}
		q.Release()
		<-closed
		require.Empty(t, got, "a job that ran was cancelled")
	})

	t.Run("drop", func(t *testing.T) {
		var q Queue
		var got []error
		j := newJob(&got)
		require.True(t, q.Hold(j))
		ran := make(chan struct{})
		require.NoError(t, q.Push(job{run: func() { close(ran) }}))
		require.True(t, q.Drop(j))
		select {
		case <-ran: // the job pushed during the hold runs once it is dropped
		case <-time.After(30 * time.Second):
			t.Fatal("the job pushed during a dropped hold did not run")
		}
		require.False(t, q.Take(j), "took a dropped turn")
		require.Eventually(t, q.Claim, 5*time.Second, time.Millisecond)
		q.Release()
		q.Close(nil)
		require.Empty(t, got)
	})
}
