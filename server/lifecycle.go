package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// slot is what a running process counts against: the session limit or the
// process limit.
type slot int

const (
	slotProcess slot = iota
	slotSession
	slotCount
)

func (k slot) String() string {
	if k == slotSession {
		return "sessions"
	}
	return "processes"
}

// claim is what a process holds while it lives: a place under the limit of
// its slot, and the bytes of its text (command, code, argv) counted against
// the command-text budget, since the daemon holds that text until the
// process ends (queued in its session, or in the started command's argv).
type claim struct {
	k    slot
	text int64
}

// held is a tracked process and the claim it holds still.
type held struct {
	p process.Process
	c claim
}

// reserve takes c's place under the limit of its slot and its text under
// the command-text budget, or fails with ErrLimit (or because the server
// drains or shuts down). release gives them back, or settle once the claim
// is held by a tracked process.
//
// A tracked process gives its claim back when its watcher gets to its end,
// which comes after the clients may have seen that end: a run or wait that
// answered, a record that reads terminal. A client that starts another at
// once would be refused for a place nobody holds, so a refusal first gives
// back the claims of the processes that have ended, and tries again.
func (s *Server) reserve(c claim) error {
	err := s.tryReserve(c)
	if errors.Is(err, process.ErrLimit) {
		s.settleEnded(c.k)
		err = s.tryReserve(c)
	}
	return err
}

// tryReserve is reserve without the second try.
func (s *Server) tryReserve(c claim) error {
	limit := s.opts.MaxProcesses
	if c.k == slotSession {
		limit = s.opts.MaxSessions
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errShuttingDown
	}
	if s.draining {
		return ErrDraining
	}
	if s.active[c.k] >= limit {
		return fmt.Errorf("%w: the daemon runs its most %s already (%d, --max-%s): end one, or try again once one has ended",
			process.ErrLimit, c.k, limit, c.k)
	}
	if c.text > 0 && s.textHeld+c.text > s.opts.CommandTextBudget {
		return fmt.Errorf("%w: command text budget full: commands not yet ended hold %d bytes of text, at most %d (--command-text-budget), and this one has %d; submit it once some have ended",
			process.ErrLimit, s.textHeld, s.opts.CommandTextBudget, c.text)
	}
	s.active[c.k]++
	s.textHeld += c.text
	return nil
}

func (s *Server) release(c claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(c)
}

// releaseLocked is release with s.mu held.
func (s *Server) releaseLocked(c claim) {
	s.active[c.k]--
	s.textHeld -= c.text
	s.checkDrainedLocked()
}

// track registers p, which holds c, and watches it (see watch).
func (s *Server) track(p process.Process, c claim) error {
	release, err := s.register(p, c)
	if err != nil {
		return err
	}
	go s.watch(p, release)
	return nil
}

// register registers p, which holds c, and counts a watcher of it; it
// returns what gives c back, which the watcher calls (see watch, afterEnd):
// settle, which gives it back once, whoever calls it first. A process
// started while the server shuts down is stopped at once, since Shutdown
// may have listed the registry already.
func (s *Server) register(p process.Process, c claim) (release func(), err error) {
	s.mu.Lock()
	closing := s.closing
	if !closing {
		if err := s.reg.Add(p); err != nil {
			s.mu.Unlock()
			s.release(c)
			return nil, err
		}
		s.releases[p.ID()] = held{p, c}
		s.watchers.Add(1)
		s.budget.Add(p.Log())
	}
	s.mu.Unlock()
	if closing {
		ctx, cancel := context.WithTimeout(context.Background(), 2*process.StopGrace)
		defer cancel()
		_ = p.Stop(ctx)
		s.release(c)
		return nil, errShuttingDown
	}
	s.watchInput(p)
	s.logStart(p.Info())
	id := p.ID()
	return func() { s.settle(id) }, nil
}

// watch waits for p to end, as the watcher register counted: c is given
// back when it ends, and its record is forgotten ExitTTL later when its logs
// are kept on_exit_ttl. It returns then, or when the server stopped.
func (s *Server) watch(p process.Process, release func()) {
	defer s.watchers.Done()
	select {
	case <-p.Done():
		s.afterEnd(p, release)
	case <-s.stopped:
	}
}

// afterEnd does what follows the end of p, which a watcher counted by
// register saw; a record whose logs are kept on_exit_ttl is handed to the
// expiry.
func (s *Server) afterEnd(p process.Process, release func()) {
	i := p.Info()
	s.metrics.processEnded(i)
	s.logEnd(i)
	release()
	s.noteEnded(p, i)
	if e, ok := s.sessionOf(i.ID); ok {
		e.releasePorts() // an ended session has no use for them
	}
	if i.KeepLogs == logstore.KeepOnExitTTL {
		s.expiry.add(i.ID)
	}
}

// settle gives back the claim of the tracked process with id, which has
// ended; a second call finds nothing to give back. It is called when its
// watcher gets to its end, and at once by whoever knows of the end before:
// a client that deleted a process may start another right away. The claim
// leaves releases as it is given back, under one lock, so that a call
// that finds it gone knows it was given back already.
func (s *Server) settle(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.releases[id]; ok {
		delete(s.releases, id)
		s.releaseLocked(h.c)
	}
}

// settleEnded gives back at once the claims under slot k of the processes
// whose records read terminal, which their watchers have not got to yet.
// Only processes hold command text, so that a refusal for the text budget
// needs them only too. It looks at every process that holds a claim, which
// costs a little, and only a refusal pays it.
func (s *Server) settleEnded(k slot) {
	s.mu.Lock()
	holding := make([]process.Process, 0, s.active[k])
	for _, h := range s.releases {
		if h.c.k == k {
			holding = append(holding, h.p)
		}
	}
	s.mu.Unlock()
	for _, p := range holding {
		if p.Info().State == process.Terminal {
			s.settle(p.ID())
		}
	}
}

// stopAll ends every session and process the server started and waits for
// them, or for ctx.
func (s *Server) stopAll(ctx context.Context) {
	s.mu.Lock()
	sessions := make([]*sessionEntry, 0, len(s.sessions))
	for _, e := range s.sessions {
		sessions = append(sessions, e)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range sessions {
		wg.Go(func() {
			if err := e.close(); err != nil {
				s.log.Warn("end session", "id", e.process().ID(), "err", err)
			}
		})
	}
	wg.Wait()
	// An ended process has nothing left to stop unless processes tagged
	// with its id live on: two looks at /proc for every record rather than
	// two for each (a scan can miss what forks and exits as it reads), so
	// that shutdown does not grow with the records kept.
	live := proctree.TagsAlive()
	maps.Copy(live, proctree.TagsAlive())
	for _, p := range s.reg.All() {
		i := p.Info()
		if i.Kind == process.KindSession {
			continue // ended with its session above
		}
		if i.State == process.Terminal && !live[p.ID()] {
			continue
		}
		wg.Go(func() {
			if err := p.Stop(ctx); err != nil {
				s.log.Warn("stop process", "id", p.ID(), "err", err)
			}
		})
	}
	wg.Wait()
	s.log.Info("stopped every process")
}

// removeRecord removes the record of the process with id from the registry,
// and its logs from the log budget. It reports whether this call removed
// it: of calls at once, one does.
func (s *Server) removeRecord(id string) (removed bool) {
	s.mu.Lock()
	if n, ok := s.ended.live[id]; ok {
		s.ended.forgetLocked(id, n)
		s.ended.compactLocked()
	}
	s.mu.Unlock()
	p, err := s.reg.Get(id)
	if err != nil || !s.reg.Remove(id) {
		return false // gone already, or another call is removing it
	}
	s.budget.Remove(p.Log())
	s.inputs.Delete(id)
	s.interacts.Delete(id)
	return true
}

// forget removes the record of the process with id; a session's record goes
// with its commands' records.
func (s *Server) forget(id string) {
	s.mu.Lock()
	e := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if e != nil {
		s.forgetCommands(id)
		e.releasePorts()
	}
	s.removeRecord(id)
}

// forgetCommands removes the records of the session's commands.
func (s *Server) forgetCommands(sessionID string) {
	for _, p := range s.reg.All() {
		if i := p.Info(); i.SessionID == sessionID && !i.System {
			s.removeRecord(p.ID())
			if i.State == process.Terminal {
				s.settle(p.ID())
			}
		}
	}
}
