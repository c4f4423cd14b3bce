package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// A drain comes before Shutdown when the daemon is asked to stop: the server
// stops taking new work (processes, sessions, commands, code contexts) and
// says so on /readyz, while the work it has goes on, with every answer and
// stream it owes. The drain is over once no exec, PTY or session-command
// process is left running and no request owed an answer is in flight.
// Requests about a session's own shell or interpreter (a wait on it, a
// stream of its log) are not owed: a session lives until Shutdown ends it.

// ErrDraining refuses new work while the server drains (see
// [Server.Drain]); the API answers it with 503 draining and Retry-After.
// Use errors.Is to test for it.
var ErrDraining = errors.New("draining: the daemon is stopping and takes no new work")

// retryAfter is the Retry-After of a refusal while draining, in seconds:
// soon enough for a client behind a load balancer to reach another daemon.
const retryAfter = "1"

// Drain stops the server from taking new work (new work is refused with
// ErrDraining, /readyz answers 503) and waits until the work in flight is
// over, answers and streams delivered, or ctx is done (then it returns
// ctx's error and the work goes on until Shutdown). Calling it again waits
// again; requests go on being served throughout.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		s.log.Info("drain started", "processes", s.active[slotProcess], "requests", s.owed)
		// With nothing in flight, the drain is over at once; with some,
		// the end of the last is followed by drainLinger.
		s.drainLingers = s.active[slotProcess] != 0 || s.owed != 0
	}
	s.checkDrainedLocked()
	drained := s.drained
	s.mu.Unlock()
	select {
	case <-drained:
		s.log.Info("drain finished")
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.log.Info("drain cut short", "processes", s.active[slotProcess], "requests", s.owed, "err", ctx.Err())
		s.mu.Unlock()
		return ctx.Err()
	}
}

// Draining reports whether Drain or Shutdown began: the server takes no new
// work.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining || s.closing
}

// BeginWork counts a unit of work that a drain waits for, such as a process
// or stream that a surface served beside this API started; end, called once
// it is over (more calls do nothing), gives it back. While the server drains
// it fails with ErrDraining.
func (s *Server) BeginWork() (end func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || s.closing {
		return nil, ErrDraining
	}
	s.owed++
	return sync.OnceFunc(s.settleOwed), nil
}

// owe counts a request in flight as owed an answer, until the returned
// func is called. Unlike BeginWork it is counted while draining too: a
// request about work in flight must be answered.
func (s *Server) owe() func() {
	s.mu.Lock()
	s.owed++
	if s.lingering != nil {
		// Answered, it starts the linger again (see drainLinger).
		s.lingering.Stop()
		s.lingering = nil
	}
	s.mu.Unlock()
	return sync.OnceFunc(s.settleOwed)
}

// drainingNow reports whether a drain began, before the shutdown (which
// refuses new work its own way).
func (s *Server) drainingNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining && !s.closing
}

func (s *Server) settleOwed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owed--
	s.checkDrainedLocked()
}

// drainLinger is how long a drain goes on once the last of the work it
// waited for is over, with nothing left in flight: a client whose command
// just ended asks at once for what it has not read of it (its log's pages,
// its record), and a drain that ended between its requests refused them,
// the result of a command that had run to its end lost. A request in that
// time is owed as any other, and the linger starts again once it is
// answered. A drain that began with nothing in flight ends at once.
const drainLinger = time.Second

// checkDrainedLocked ends the drain when nothing is left in flight, at once
// when the drain began so (Drain's own look) and drainLinger later when
// work ended under it. s.mu must be held.
func (s *Server) checkDrainedLocked() {
	if !s.draining || s.drainDone || s.active[slotProcess] != 0 || s.owed != 0 {
		if s.lingering != nil {
			s.lingering.Stop()
			s.lingering = nil
		}
		return
	}
	if !s.drainLingers {
		s.drainDone = true
		close(s.drained)
		return
	}
	if s.lingering != nil {
		return
	}
	// The timer's function checks that it is still the linger: one that
	// fired as a request came, and waited for s.mu while the request was
	// answered and started another, would end the drain at once.
	var t *time.Timer
	t = time.AfterFunc(time.Duration(s.linger.Load()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.lingering != t {
			return // stopped, another in its place
		}
		s.lingering = nil
		if !s.drainDone && s.active[slotProcess] == 0 && s.owed == 0 {
			s.drainDone = true
			close(s.drained)
		}
	})
	s.lingering = t
}

// owedKey is the context key of a request's settle func (see owe).
type owedKey struct{}

// notOwed tells the drain not to wait for the request r: it follows a
// session's own process, which lives until Shutdown.
func notOwed(r *http.Request) {
	if settle, ok := r.Context().Value(owedKey{}).(func()); ok {
		settle()
	}
}
