// Package queue runs jobs one at a time, in the order they were pushed.
//
// A Queue starts a worker goroutine only while it has work, so an idle queue
// costs no goroutine; a caller that would only wait for its job can run it
// itself in a turn it claims (Claim), or holds for the job until it runs it
// (Hold), which Close ends should the caller never take it. Jobs waiting
// their turn can be failed all at once with Close, as when the session they
// belong to ends.
package queue

import (
	"errors"
	"sync"
)

// ErrClosed is returned by Push after Close.
var ErrClosed = errors.New("queue closed")

// Job is one unit of work.
type Job interface {
	// Run does the job. It is called at most once, on the worker goroutine.
	Run()
	// Cancel is called instead of Run when the queue is closed before the
	// job's turn, with the error given to Close.
	Cancel(err error)
}

// Queue runs jobs serially. The zero value is ready to use.
type Queue struct {
	mu      sync.Mutex // guards everything below
	pending []Job
	running bool  // a worker goroutine is alive
	closed  error // non-nil once Close was called
	held    Job   // the job a turn was claimed for with Hold, until Take, Drop or Close
	idle    *sync.Cond
}

// Push appends j. It runs after every job pushed before it has finished.
func (q *Queue) Push(j Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil {
		return ErrClosed
	}
	q.pending = append(q.pending, j)
	if !q.running {
		q.running = true
		go q.work()
	}
	return nil
}

// Claim takes the queue's turn for the caller when the queue is idle — no
// job running or waiting — and reports whether it did. The caller then does
// its own work in that turn, on its own goroutine: no worker starts, and
// nothing hops between goroutines. Jobs pushed meanwhile wait for Release,
// and Close waits for it as it waits for a running job.
func (q *Queue) Claim() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil || q.running || len(q.pending) > 0 {
		return false
	}
	q.running = true
	return true
}

// Hold claims the queue's turn for j as Claim does, for a caller that runs
// j later, on a goroutine of its own: it must then call Take, and Release
// after j if Take reported true, or Drop. Until Take, the turn is j's, not
// the caller's: Close cancels j (with Job.Cancel, as it cancels the jobs
// waiting) and ends the turn, and Drop gives the turn back, so that a
// holder that never takes its turn wedges nothing. j is compared with ==:
// it must be of a comparable type, such as a pointer.
func (q *Queue) Hold(j Job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil || q.running || len(q.pending) > 0 {
		return false
	}
	q.running, q.held = true, j
	return true
}

// Take begins the turn Hold claimed for j: it reports true when the caller
// now runs j in it and must call Release once done, and false when the
// turn has ended already (Close cancelled j, or Drop gave it back) or was
// never j's.
func (q *Queue) Take(j Job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil || q.held != j {
		return false
	}
	q.held = nil
	return true
}

// Drop gives back the turn Hold claimed for j when j ends without running
// in it (it was deleted), and reports whether it did: false once Take,
// Close or Drop has ended the hold.
func (q *Queue) Drop(j Job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil || q.held != j {
		return false
	}
	q.held = nil
	q.releaseLocked()
	return true
}

// Release ends a turn taken with Claim: jobs pushed during it run next, on
// a worker goroutine.
func (q *Queue) Release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *Queue) releaseLocked() {
	if len(q.pending) > 0 && q.closed == nil {
		go q.work()
		return
	}
	q.running = false
	if q.idle != nil {
		q.idle.Broadcast()
	}
}

// Len returns the number of jobs waiting (not counting the running one).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

func (q *Queue) work() {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 || q.closed != nil {
			q.running = false
			if q.idle != nil {
				q.idle.Broadcast()
			}
			q.mu.Unlock()
			return
		}
		j := q.pending[0]
		q.pending[0] = nil
		q.pending = q.pending[1:]
		q.mu.Unlock()
		j.Run()
	}
}

// Close cancels every waiting job with err (ErrClosed if nil), and the job
// a turn is held for that was not taken (see Hold), refuses later pushes,
// and waits for the running job, if any, to return. It is idempotent.
func (q *Queue) Close(err error) {
	q.Shut(err)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle == nil {
		q.idle = sync.NewCond(&q.mu)
	}
	for q.running {
		q.idle.Wait()
	}
}

// Shut is Close without the wait: the running job, if any, goes on, and no
// other runs after it. It is idempotent: the waiting jobs get the first
// call's error.
func (q *Queue) Shut(err error) {
	if err == nil {
		err = ErrClosed
	}
	q.mu.Lock()
	var cancel []Job
	if q.closed == nil {
		q.closed = err
		cancel, q.pending = q.pending, nil
	}
	if q.held != nil {
		// Its holder never took the turn: it ends here, and the holder's
		// Take reports false.
		cancel = append([]Job{q.held}, cancel...)
		q.held = nil
		q.releaseLocked()
	}
	q.mu.Unlock()
	for _, j := range cancel {
		j.Cancel(err)
	}
}
