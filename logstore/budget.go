package logstore

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// closeSeq orders the Close of every log, for a Budget to drop the logs
// that ended first.
var closeSeq atomic.Uint64

// Budget bounds the memory of many logs together (all the logs of a
// daemon), beyond each one's own retention: the bytes of their frames and
// the frame tables that keep those frames, 64 bytes a slot, one to four
// slots a frame. Output in tiny writes alternating between stdout and
// stderr, a frame a byte, thus counts for the memory it takes, 65 times
// its bytes or more, not for its bytes alone. When the logs added to it hold
// more than its limit, it drops, until they hold at most seven eighths of
// it (so that it does not run at every write):
//
//   - first every frame of closed logs, the one closed first first;
//   - then, if the open logs alone are over it, the oldest frames of the open
//     logs holding the most, down to a level that all of them keep (as water
//     finds its level), each keeping its newest frame.
//
// A log that lost frames so says, as it does for its retention: pages have
// TruncatedHead, and followers get a Warning that names the budget.
type Budget struct {
	limit int64
	// bytes counts the bytes of the frames of the logs added, at every
	// write; tables the memory of their frame tables, only when one
	// doubles or halves, so that a write still costs one atomic add.
	bytes, tables atomic.Int64
	// evicted counts the bytes of the frames it dropped, ever.
	evicted atomic.Int64

	mu   sync.Mutex // guards logs; held while frames are dropped
	logs map[*Log]struct{}
}

// NewBudget returns a Budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: max(limit, 1), logs: make(map[*Log]struct{})}
}

// Limit returns the bytes the budget allows.
func (b *Budget) Limit() int64 { return b.limit }

// Used returns what the logs added hold now, in bytes, as b counts it
// against its limit: their frames' bytes and frame tables.
func (b *Budget) Used() int64 { return b.bytes.Load() + b.tables.Load() }

// Retained returns the bytes of output the logs added retain now, without
// the memory of their frame tables.
func (b *Budget) Retained() int64 { return b.bytes.Load() }

// Evicted returns the bytes of the frames b has dropped since it was made.
func (b *Budget) Evicted() int64 { return b.evicted.Load() }

// Add makes l count against b, with what it holds already. A log counts
// against one budget at most; adding it again changes nothing.
func (b *Budget) Add(l *Log) {
	b.mu.Lock()
	l.mu.Lock()
	if l.acct == nil {
		l.acct = b
		b.logs[l] = struct{}{}
		b.bytes.Add(int64(l.size))
		b.tables.Add(int64(l.frames.slots() * frameSize))
	}
	l.mu.Unlock()
	b.mu.Unlock()
	b.enforce()
}

// Remove stops l counting against b; its frames stay with it.
func (b *Budget) Remove(l *Log) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acct == b {
		l.acct = nil
		delete(b.logs, l)
		b.bytes.Add(-int64(l.size))
		b.tables.Add(-int64(l.frames.slots() * frameSize))
	}
}

// enforce drops frames while b is over its limit. A caller that finds
// another one at it leaves it to that one, which looks again before it
// stops.
func (b *Budget) enforce() {
	for b.Used() > b.limit && b.mu.TryLock() {
		b.shedLocked(b.limit - b.limit/8)
		b.mu.Unlock()
	}
}

// shedLocked drops frames until b uses at most low bytes, or only the
// newest frame of each open log is left. It counts, and levels, what each
// log holds with its frame table, so that a log of tiny frames loses as
// many as it must. b.mu must be held.
func (b *Budget) shedLocked(low int64) {
	entries := make([]budgetEntry, 0, len(b.logs))
	for l := range b.logs {
		l.mu.Lock()
		if held := l.heldLocked(); held > 0 {
			entries = append(entries, budgetEntry{l, l.closed, l.ended, held})
		}
		l.mu.Unlock()
	}
	// Closed logs first, the first closed first; then open logs, the
	// largest first.
	slices.SortFunc(entries, func(x, y budgetEntry) int {
		switch {
		case x.closed != y.closed:
			if x.closed {
				return -1
			}
			return 1
		case x.closed:
			return cmp.Compare(x.ended, y.ended)
		}
		return cmp.Compare(y.held, x.held)
	})
	for i, e := range entries {
		if b.Used() <= low {
			return
		}
		if !e.closed {
			b.shedOpen(entries[i:], int(b.Used()-low))
			return
		}
		e.l.mu.Lock()
		e.l.evicted = true
		before := e.l.size
		e.l.dropAllLocked()
		b.evicted.Add(int64(before - e.l.size))
		e.l.mu.Unlock()
	}
}

// budgetEntry is a log as a Budget saw it when it began to drop frames.
type budgetEntry struct {
	l      *Log
	closed bool
	ended  uint64
	held   int // the log's heldLocked
}

// shedOpen drops about excess bytes from the open logs of entries, sorted
// largest first: the level is what, held by every log over it, frees
// excess; each log over it loses its oldest frames down to it, keeping its
// newest. A frame table shrinks only once a quarter full, so a log of tiny
// frames may end below the level.
func (b *Budget) shedOpen(entries []budgetEntry, excess int) {
	level, sum := 0, 0
	for k, e := range entries {
		sum += e.held
		next := 0
		if k+1 < len(entries) {
			next = entries[k+1].held
		}
		if l := (sum - excess) / (k + 1); l >= next {
			level = max(l, 0)
			break
		}
	}
	for _, e := range entries {
		if e.held <= level {
			return
		}
		e.l.mu.Lock()
		e.l.evicted = true
		before := e.l.size
		for e.l.heldLocked() > level && e.l.frames.len() > 1 {
			e.l.popLocked()
		}
		b.evicted.Add(int64(before - e.l.size))
		e.l.mu.Unlock()
	}
}
