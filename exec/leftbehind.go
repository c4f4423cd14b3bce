package exec

import (
	"sync"
	"time"
)

// An ended process whose cgroup something it started still runs in keeps
// the cgroup, so that what runs there stays contained and is ended with the
// process's record. Once that has ended too, nothing is left to contain: the
// cgroup (a directory in each hierarchy, and the files of it the engine
// holds open, five in a hybrid layout) goes. The sweeper below looks at each
// such cgroup, soon and then more and more rarely, and removes it once it is
// empty: a record of a process whose background child had exited held its
// cgroup until the record was deleted, and ten thousand ended records, the
// daemon's default bound, held more descriptors than the daemon may open.

// The looks at a left cgroup come after sweepFirst, then each twice as long
// after the one before, up to sweepEvery.
const (
	sweepFirst = 50 * time.Millisecond
	sweepEvery = 5 * time.Second
)

// sweeper is the goroutine that removes the cgroups of ended processes
// once they are empty; it runs only while there are some.
var sweeper struct {
	mu      sync.Mutex
	left    map[*Process]*sweep
	running bool
	wake    chan struct{} // a new cgroup to look at sooner than the next look
}

// sweep is when a left cgroup is looked at next, and the wait before the
// look after.
type sweep struct {
	next  time.Time
	every time.Duration
}

// leaveCgroup hands the cgroup of p, which ended with its cgroup populated,
// to the sweeper.
func leaveCgroup(p *Process) {
	sweeper.mu.Lock()
	defer sweeper.mu.Unlock()
	if sweeper.left == nil {
		sweeper.left = make(map[*Process]*sweep)
		sweeper.wake = make(chan struct{}, 1)
	}
	sweeper.left[p] = &sweep{next: time.Now().Add(sweepFirst), every: sweepFirst}
	if !sweeper.running {
		sweeper.running = true
		go sweepLeft()
	}
	select {
	case sweeper.wake <- struct{}{}:
	default:
	}
}

// sweepLeft looks at each left cgroup when it is due, removes the empty
// ones, and returns once none is left.
func sweepLeft() {
	t := time.NewTimer(sweepFirst)
	defer t.Stop()
	for {
		sweeper.mu.Lock()
		now := time.Now()
		var due []*Process
		var next time.Time
		for p, sw := range sweeper.left {
			if !sw.next.After(now) {
				due = append(due, p)
				continue
			}
			if next.IsZero() || sw.next.Before(next) {
				next = sw.next
			}
		}
		sweeper.mu.Unlock()
		for _, p := range due {
			empty := !p.cg.Populated()
			if empty {
				p.settleUsage()
				_ = p.cg.Destroy() // once: Stop's Destroy finds it done
			}
			sweeper.mu.Lock()
			if sw := sweeper.left[p]; empty {
				delete(sweeper.left, p)
			} else if sw != nil {
				sw.every = min(2*sw.every, sweepEvery)
				sw.next = time.Now().Add(sw.every)
				if next.IsZero() || sw.next.Before(next) {
					next = sw.next
				}
			}
			sweeper.mu.Unlock()
		}
		sweeper.mu.Lock()
		if len(sweeper.left) == 0 {
			sweeper.running = false
			sweeper.mu.Unlock()
			return
		}
		sweeper.mu.Unlock()
		if next.IsZero() {
			next = time.Now().Add(sweepFirst)
		}
		t.Reset(time.Until(next))
		select {
		case <-t.C:
		case <-sweeper.wake:
		}
	}
}

// forgetCgroup takes p's cgroup from the sweeper: it is being removed
// otherwise (the process's record was deleted).
func forgetCgroup(p *Process) {
	sweeper.mu.Lock()
	defer sweeper.mu.Unlock()
	if _, ok := sweeper.left[p]; !ok {
		return
	}
	delete(sweeper.left, p)
	if len(sweeper.left) == 0 {
		select { // to return now rather than at its next look
		case sweeper.wake <- struct{}{}:
		default:
		}
	}
}
