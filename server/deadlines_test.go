package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each context ends at its own deadline, not before, with
// DeadlineExceeded as its cause, in the order of the deadlines whatever
// the order they came in; one let go first never ends for its deadline.
func TestDeadlinesEndEachWaitInTime(t *testing.T) {
	var ds deadlines
	defer ds.stop()
	type wait struct {
		d    time.Duration
		ctx  context.Context
		stop func()
	}
	begun := time.Now()
	var ws []*wait
	for _, d := range []time.Duration{60, 20, 40, 30} {
		w := &wait{d: d * time.Millisecond}
		w.ctx, w.stop = ds.with(t.Context(), w.d)
		ws = append(ws, w)
	}
	ws[3].stop() // let go before its deadline
	for _, i := range []int{1, 2, 0} {
		w := ws[i]
		select {
		case <-w.ctx.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("the wait of %v never ended", w.d)
		}
		require.GreaterOrEqual(t, time.Since(begun), w.d, "ended before its deadline")
		require.ErrorIs(t, context.Cause(w.ctx), context.DeadlineExceeded)
		for _, later := range ws {
			if later.d > w.d && later != ws[3] {
				require.NoError(t, later.ctx.Err(), "the wait of %v ended with that of %v", later.d, w.d)
			}
		}
		w.stop()
	}
	require.ErrorIs(t, context.Cause(ws[3].ctx), context.Canceled, "let go: ended by its stop, not its deadline")
	ds.mu.Lock()
	defer ds.mu.Unlock()
	require.Zero(t, ds.due.Len(), "deadlines left")
}

// A wait that ends early leaves the timer armed for its deadline, so that
// the next wait, whose deadline is further off, arms nothing: one timer
// armed anew for each run was what woke the scheduler's threads.
func TestDeadlinesLeaveTheTimerArmed(t *testing.T) {
	var ds deadlines
	defer ds.stop()
	armed := func() time.Time {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		return ds.armed
	}
	_, stop := ds.with(t.Context(), time.Hour)
	first := armed()
	require.False(t, first.IsZero(), "not armed")
	stop()
	require.Equal(t, first, armed(), "disarmed when its wait ended")
	ctx, stop := ds.with(t.Context(), time.Hour)
	require.Equal(t, first, armed(), "armed again for a later deadline")
	stop()
	// An earlier deadline arms the timer for itself, and ends in time.
	ctx, stop = ds.with(t.Context(), 10*time.Millisecond)
	defer stop()
	require.True(t, armed().Before(first), "not armed for an earlier deadline")
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the earlier deadline never came")
	}
	require.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
}
