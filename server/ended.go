package server

import (
	"context"
	"time"
	"unsafe"

	"github.com/conchsh/conch/process"
)

// endedTextBudget bounds the command text (the head of each, see
// process.KeepText) and the working directories (see cwdCost) that the
// ended records kept hold together.
const endedTextBudget = 64 << 20

// endedRecords keeps the order in which tracked processes ended, so that
// the records over Options.MaxEnded, or over endedTextBudget of text, go
// oldest first, as logs do under the log budget. Ended sessions and code
// contexts count too, and go with their commands: a session whose shell
// exits by itself (exit, a context's exit()) was kept until its deletion,
// and a client that never deleted them grew the daemon's memory and its
// session list without bound. s.mu guards it.
type endedRecords struct {
	order []endedAt      // the records in the order they ended; removed ones are skipped lazily
	head  int            // order[head:] are the ones not yet looked at
	live  map[string]int // ids in order whose records are kept, and the bytes of their text
	text  int64          // the bytes of text of the records kept
}

// endedAt is a record of order: its process's id and when it ended.
type endedAt struct {
	id string
	at time.Time
}

// noteEnded counts the record of p, which has ended (i is its Info), and forgets the
// oldest ended records while more than MaxEnded are kept.
func (s *Server) noteEnded(p process.Process, i process.Info) {
	text := len(i.ShellCommand) + len(i.Code) + process.ArgvCost(i.Argv) + cwdCost(i)
	var evict []string
	s.mu.Lock()
	e := &s.ended
	if e.live == nil {
		e.live = make(map[string]int)
	}
	if _, err := s.reg.Get(p.ID()); err == nil { // not deleted meanwhile
		e.insertLocked(endedAt{p.ID(), i.ExitedAt})
		e.live[p.ID()] = text
		e.text += int64(text)
	}
	for (len(e.live) > s.opts.MaxEnded || e.text > endedTextBudget) && e.head < len(e.order) {
		id := e.order[e.head].id
		e.order[e.head] = endedAt{}
		e.head++
		if n, ok := e.live[id]; ok {
			e.forgetLocked(id, n)
			evict = append(evict, id)
		}
	}
	e.compactLocked()
	s.mu.Unlock()
	for _, id := range evict {
		left, _ := s.reg.Get(id)
		s.forget(id) // a session's with its commands'
		s.stopLeftBehind(left)
	}
}

// forgetExpired forgets the record of the process with id, whose exit TTL
// has passed (see expiry), and stops what it left behind.
func (s *Server) forgetExpired(id string) {
	left, _ := s.reg.Get(id)
	s.forget(id)
	s.stopLeftBehind(left)
}

// stopLeftBehind stops what p, an ended exec or PTY process whose record
// the daemon forgot by itself (its exit TTL passed, MaxEnded newer ones are
// kept), left behind, as a DELETE of the record would: TERM, then KILL after
// the stop grace, and its cgroup removed. Once the record is gone, nothing
// else can: its leftovers ran on, unreachable, until the daemon's end. The
// caller does not wait, but for a Shutdown under way, which waits for it.
// p nil (the record was gone already) is nothing to do.
func (s *Server) stopLeftBehind(p process.Process) {
	if p == nil {
		return
	}
	if i := p.Info(); i.State != process.Terminal || (i.Kind != process.KindExec && i.Kind != process.KindPTY) {
		return // a session's and a context's end with them
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*process.StopGrace)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			s.log.Warn("stop what a forgotten process left", "id", p.ID(), "err", err)
		}
	}
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.background.Add(1)
	}
	s.mu.Unlock()
	if closing { // Shutdown's wait for the background is begun or done
		stop()
		return
	}
	go func() {
		defer s.background.Done()
		stop()
	}()
}

// cwdCost returns the bytes of the working directories the record i
// describes keeps: where it started (Info.Cwd) and, for a command or cell,
// the shell's or interpreter's once it ended (Result.Cwd), counted once
// when they are one string, as they are unless the command changed
// directory. A path past PATH_MAX is as long as a command makes it, up to
// the 64 KiB the engine reports (sentinel.MaxCwd): a session that went
// back and forth between two such directories made each record keep a copy
// of its own, counted by no budget.
func cwdCost(i process.Info) int {
	n := len(i.Cwd)
	if r := i.Result; r != nil && (len(r.Cwd) != len(i.Cwd) || unsafe.StringData(r.Cwd) != unsafe.StringData(i.Cwd)) {
		n += len(r.Cwd)
	}
	return n
}

// forgetLocked stops counting the record of id, which holds n bytes of
// text. s.mu must be held.
// insertLocked puts r in order by when it ended: each record's watcher
// notes it, and the watcher of a record that ended first may come second
// (a run answered, the next one sent and ended, before the goroutine that
// watched the first ran), which then forgot the newer of the two first.
// It comes last but for such a moment, so the walk back is short. s.mu must
// be held.
func (e *endedRecords) insertLocked(r endedAt) {
	if r.at.IsZero() {
		r.at = time.Now()
	}
	e.order = append(e.order, r)
	for j := len(e.order) - 1; j > e.head && e.order[j-1].at.After(r.at); j-- {
		e.order[j], e.order[j-1] = e.order[j-1], e.order[j]
	}
}

func (e *endedRecords) forgetLocked(id string, n int) {
	delete(e.live, id)
	e.text -= int64(n)
}

// compactLocked drops from order the ids of the records no longer kept,
// once they outnumber the kept ones and 1024: records forgotten otherwise
// than oldest first (with their session, deleted, past their on_exit_ttl)
// leave their ids behind, which order held for the daemon's life. Each
// drop copies the kept ids, at most as many as the ids dropped. s.mu must
// be held.
func (e *endedRecords) compactLocked() {
	gone := len(e.order) - len(e.live)
	if gone <= 1024 || gone <= len(e.live) {
		return
	}
	kept := make([]endedAt, 0, 2*len(e.live))
	for _, r := range e.order[e.head:] {
		if _, ok := e.live[r.id]; ok {
			kept = append(kept, r)
		}
	}
	e.order, e.head = kept, 0
}

// endedCount returns the number of ended records kept and the bytes of
// their text.
func (s *Server) endedCount() (records int, text int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ended.live), s.ended.text
}
