package server

import (
	"sync"
	"time"
)

// expiry forgets the records of ended processes whose logs are kept
// on_exit_ttl, ExitTTL after each ended. Every record waits the same time,
// so they fall due in the order they were added: one timer, set for the
// oldest, serves them all, where a goroutine and a timer for each would
// cost every command one more goroutine to start, wake and keep for the
// whole ExitTTL. At most max wait: past that the oldest is forgotten at
// once, as MaxEnded has the oldest ended records forgotten first (a record
// with max newer ones waiting has mostly been forgotten already).
type expiry struct {
	ttl    time.Duration
	max    int
	forget func(id string)

	mu      sync.Mutex
	due     []dueRecord // due[head:] wait, oldest first
	head    int
	timer   *time.Timer // set for due[head]; nil while nothing waits
	stopped bool
	firing  sync.WaitGroup // the timer's runs under way; stop waits for them
}

// dueRecord is a record to forget at a time.
type dueRecord struct {
	id string
	at time.Time
}

// add has id forgotten ttl from now, or sooner when max newer ones wait;
// it does nothing once stop was called.
func (x *expiry) add(id string) {
	x.mu.Lock()
	if x.stopped {
		x.mu.Unlock()
		return
	}
	x.due = append(x.due, dueRecord{id, time.Now().Add(x.ttl)})
	if x.timer == nil {
		x.timer = time.AfterFunc(x.ttl, x.fire)
	}
	var over string
	if len(x.due)-x.head > x.max {
		over = x.due[x.head].id
		x.due[x.head] = dueRecord{}
		x.head++
		x.compact()
	}
	x.mu.Unlock()
	if over != "" {
		x.forget(over)
	}
}

// fire forgets the records that are due and sets the timer for the next.
func (x *expiry) fire() {
	x.mu.Lock()
	if x.stopped {
		x.mu.Unlock()
		return
	}
	x.firing.Add(1)
	defer x.firing.Done()
	now := time.Now()
	var ids []string
	for x.head < len(x.due) && !x.due[x.head].at.After(now) {
		ids = append(ids, x.due[x.head].id)
		x.due[x.head] = dueRecord{}
		x.head++
	}
	switch {
	case x.head == len(x.due):
		x.due, x.head, x.timer = x.due[:0], 0, nil
	default:
		x.compact()
		x.timer.Reset(x.due[x.head].at.Sub(now))
	}
	x.mu.Unlock()
	for _, id := range ids {
		x.forget(id)
	}
}

// compact moves the records waiting to the front of due once they are
// fewer than those gone. x.mu must be held.
func (x *expiry) compact() {
	if x.head > len(x.due)/2 {
		x.due = append(x.due[:0], x.due[x.head:]...)
		x.head = 0
	}
}

// stop forgets nothing more and waits for the timer's run under way.
func (x *expiry) stop() {
	x.mu.Lock()
	x.stopped = true
	if x.timer != nil {
		x.timer.Stop()
	}
	x.mu.Unlock()
	x.firing.Wait()
}
