package server

import (
	"context"
	"slices"
	"sync"
)

// turns serialises the interact calls on one process in the order they
// came: a call's answer holds what its own input caused, so the next call
// writes only once it has answered.
type turns struct {
	mu      sync.Mutex
	waiting []chan struct{} // the calls in order; the first one's channel is closed: it runs
}

// take waits for the caller's turn, or for ctx; done ends the turn.
func (q *turns) take(ctx context.Context) (done func(), err error) {
	me := make(chan struct{})
	q.mu.Lock()
	q.waiting = append(q.waiting, me)
	if len(q.waiting) == 1 {
		close(me)
	}
	q.mu.Unlock()
	done = func() { q.leave(me) }
	select {
	case <-me:
		return done, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// leave takes me out of the line, and gives the turn to the next call when
// me had it.
func (q *turns) leave(me chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.waiting, me)
	if i < 0 {
		return
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	if i == 0 && len(q.waiting) > 0 {
		close(q.waiting[0])
	}
}

// turns returns the line of interact calls on the process with id.
func (s *Server) turns(id string) *turns {
	q, _ := s.interacts.LoadOrStore(id, &turns{})
	return q.(*turns)
}

// leftLine is called by each interact call once it has left q, the line of
// the process with id: when that was the last call in it and the process's
// record is gone, the line goes too. A call that found the record, then
// took its place in line after a DELETE had removed the record (and the
// line with it, see removeRecord), made the line anew: kept, it was never
// removed.
func (s *Server) leftLine(id string, q *turns) {
	q.mu.Lock()
	empty := len(q.waiting) == 0
	q.mu.Unlock()
	if !empty {
		return
	}
	if _, err := s.reg.Get(id); err != nil {
		s.interacts.CompareAndDelete(id, q)
	}
}
