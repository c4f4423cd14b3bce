// Package inputwatch keeps, for a running process with open input, whether
// it waits for input (see [inputwait]), and tells whoever waits on it when
// that changes.
//
// It costs nothing for a process without open input: no watcher runs. For
// one with open input it looks at /proc only when the process has been
// quiet (no new frame in its log) for Quiet, and then every Interval; a yes
// counts only when a second look, Confirm later, says yes too, no frame came
// between, and none of its output waits unread in its pipes or terminal, so
// that an answer saying it waits holds the prompt it printed.
package inputwatch

import (
	"sync"
	"time"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/logstore"
)

// Timing of the looks. A process that stays quiet and busy (a server with
// stdin open) is looked at less often, down to every MaxInterval, so a wait
// is seen within Quiet + MaxInterval + Confirm of the blocking read (P10
// asks for 500 ms), usually within Quiet + Interval + Confirm.
const (
	Quiet       = 50 * time.Millisecond
	Interval    = 100 * time.Millisecond
	MaxInterval = 300 * time.Millisecond
	Confirm     = 20 * time.Millisecond

	backoffAfter = 10 // looks in a quiet spell before they space out
)

// Tree is what a process with open input offers to be watched: its
// processes and its input, ok false when it has none open now.
type Tree interface {
	InputTree() (pids []int, in inputwait.Input, ok bool)
}

// Watched is the process a Watcher watches.
type Watched interface {
	Tree
	Log() *logstore.Log
	Done() <-chan struct{}
}

// Watcher says whether one process waits for input.
type Watcher struct {
	p    Watched
	poke chan struct{}

	mu      sync.Mutex // guards the fields below
	waiting bool
	gen     int           // counts Written calls: a look begun before one is stale
	changed chan struct{} // closed and replaced when waiting changes
}

// Start watches p until it is done. It returns nil when p never has input
// to wait on (ok false at once and for good is not known here, so the
// caller decides: it starts one only for processes with stdin open or a
// terminal).
func Start(p Watched) *Watcher {
	w := &Watcher{p: p, poke: make(chan struct{}, 1), changed: make(chan struct{})}
	go w.run()
	return w
}

// Waiting reports whether the process waits for input now.
func (w *Watcher) Waiting() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting
}

// Changed returns a channel closed when Waiting changes next.
func (w *Watcher) Changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Written tells the watcher that input was written: the process no longer
// waits until a new look says it does.
func (w *Watcher) Written() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.gen++
	w.mu.Unlock()
	w.set(false)
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

func (w *Watcher) set(v bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setLocked(v)
}

// setUnless sets waiting to v unless input was written since gen.
func (w *Watcher) setUnless(gen int, v bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == w.gen {
		w.setLocked(v)
	}
}

func (w *Watcher) setLocked(v bool) {
	if w.waiting != v {
		w.waiting = v
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

func (w *Watcher) run() {
	t := time.NewTimer(Quiet)
	defer t.Stop()
	interval, looks := Interval, 0
	for {
		select {
		case <-w.p.Done():
			w.set(false)
			return
		case <-w.poke:
			interval, looks = Interval, 0
		case <-t.C:
		}
		if quiet := time.Since(w.p.Log().LastFrameTime()); quiet < Quiet {
			w.set(false) // output came: it does not wait
			interval, looks = Interval, 0
			t.Reset(Quiet - quiet)
			continue
		}
		w.mu.Lock()
		gen := w.gen
		w.mu.Unlock()
		waiting := w.look()
		w.setUnless(gen, waiting)
		// A process starting up is looked at every Interval; one that has
		// stayed quiet for a second (a server with stdin open, a prompt
		// nobody answers yet), less often.
		if looks++; looks > backoffAfter {
			interval = min(interval*3/2, MaxInterval)
		}
		t.Reset(interval)
	}
}

// look reports whether the process waits, by two looks Confirm apart with
// no frame between.
func (w *Watcher) look() bool {
	_, _, before := w.p.Log().Bounds()
	var pids []int
	for i := range 2 {
		if i > 0 {
			time.Sleep(Confirm)
		}
		var in inputwait.Input
		var ok bool
		pids, in, ok = w.p.InputTree()
		if !ok {
			return false
		}
		waiting, err := inputwait.Waiting(pids, in)
		if err != nil || !waiting {
			return false
		}
	}
	if pending(pids) {
		return false
	}
	if q, ok := w.p.(stdinQueuer); ok && q.StdinQueued() > 0 {
		// Input written to it that its feeder has yet to put in its pipe
		// or terminal, as under load a moment after Written: it blocks
		// in a read that this input ends.
		return false
	}
	_, _, after := w.p.Log().Bounds()
	return before == after
}

// stdinQueuer is a watched process whose stdin is fed from a queue (exec
// processes, session commands, code cells): StdinQueued is what of it the
// process has not taken yet.
type stdinQueuer interface{ StdinQueued() int }
