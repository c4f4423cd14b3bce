package server

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// deadlines ends the waits of requests that are bounded by a timeout (a
// run's answer, a wait for a process or for its readiness) with one
// runtime timer for all of them. A timer of its own for each request (context.WithTimeout) was the
// earliest the runtime had whenever no other request was in flight, and a
// new earliest timer wakes a thread of the Go scheduler, on another
// processor, to look at it: for each run, in the middle of it. The shared
// timer is armed for the earliest deadline and left armed when the request
// it was armed for ends early, as requests mostly do: a later request's
// deadline, further off, then arms nothing. Armed so for a deadline no
// longer held, it fires before any that is, ends nothing, and is armed
// again for the earliest held.
type deadlines struct {
	mu    sync.Mutex
	due   deadlineHeap
	t     *time.Timer // made at the first deadline
	armed time.Time   // when t fires; zero when it is not armed
	done  bool        // stopped: no timer is armed again
}

// deadline is one request's: its context's cancel and its place in the heap.
type deadline struct {
	at     time.Time
	cancel context.CancelCauseFunc
	i      int // index in deadlines.due; -1 once out of it
}

// with returns a context of ctx that ends after d with
// context.DeadlineExceeded as its cause, and the func that lets it go,
// which the caller must call once it no longer waits.
func (ds *deadlines) with(ctx context.Context, d time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	e := &deadline{at: time.Now().Add(d), cancel: cancel, i: -1}
	ds.mu.Lock()
	heap.Push(&ds.due, e)
	if !ds.done && (ds.armed.IsZero() || e.at.Before(ds.armed)) {
		ds.armLocked(e.at)
	}
	ds.mu.Unlock()
	return ctx, func() {
		ds.mu.Lock()
		if e.i >= 0 {
			heap.Remove(&ds.due, e.i)
		}
		ds.mu.Unlock()
		cancel(nil)
	}
}

// armLocked arms the timer for at. ds.mu must be held.
func (ds *deadlines) armLocked(at time.Time) {
	ds.armed = at
	if ds.t == nil {
		ds.t = time.AfterFunc(time.Until(at), ds.fire)
		return
	}
	ds.t.Reset(time.Until(at))
}

// fire ends the contexts whose deadline has come and arms the timer for
// the earliest left.
func (ds *deadlines) fire() {
	var ended []context.CancelCauseFunc
	ds.mu.Lock()
	now := time.Now()
	for len(ds.due) > 0 && !ds.due[0].at.After(now) {
		ended = append(ended, heap.Pop(&ds.due).(*deadline).cancel)
	}
	ds.armed = time.Time{}
	if len(ds.due) > 0 && !ds.done {
		ds.armLocked(ds.due[0].at)
	}
	ds.mu.Unlock()
	for _, cancel := range ended {
		cancel(context.DeadlineExceeded)
	}
}

// stop disarms the timer for good; the contexts still waiting end with
// their parents.
func (ds *deadlines) stop() {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.done = true
	ds.armed = time.Time{}
	if ds.t != nil {
		ds.t.Stop()
	}
}

// deadlineHeap orders deadlines earliest first (container/heap).
type deadlineHeap []*deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}

func (h *deadlineHeap) Push(x any) {
	e := x.(*deadline)
	e.i = len(*h)
	*h = append(*h, e)
}

func (h *deadlineHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.i = -1
	*h = old[:n-1]
	return e
}
