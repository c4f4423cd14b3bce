package proctree

import "sync"

// shared makes one scan of /proc serve every caller that wants it at once:
// a session's end scans /proc a few times, each scan reads a file of every
// process on the machine, and the end of many sessions together (a
// daemon's shutdown, a drain) made one scan per caller, each over the
// others' shells — 550 scans and 2.2 s for 255 sessions ended at once.
//
// A caller gets the result of a scan that began after it asked, never of
// one already under way, so it finds what a scan of its own would have: a
// process that existed when it asked is in it. A caller that comes while a
// scan runs waits for the next one, which every caller that comes before it
// begins shares.
type shared[T any] struct {
	scan func() T
	mu   sync.Mutex
	cur  *round[T] // the scan under way, if any
	next *round[T] // the scan that begins once cur ends, its callers gathering
}

// round is one scan and its result, ready once done is closed.
type round[T any] struct {
	done chan struct{}
	val  T
}

// get returns the result of a scan that began after get was called.
func (s *shared[T]) get() T {
	s.mu.Lock()
	if r := s.next; r != nil { // not begun yet: fresh enough
		s.mu.Unlock()
		<-r.done
		return r.val
	}
	r := &round[T]{done: make(chan struct{})}
	if prev := s.cur; prev != nil { // begun before this call: wait, and gather
		s.next = r
		s.mu.Unlock()
		<-prev.done
		s.mu.Lock()
		s.next = nil
	}
	s.cur = r
	s.mu.Unlock()

	r.val = s.scan()
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	close(r.done)
	return r.val
}
