package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/codecontext"
	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// sessionEntry is a live session: its shell, or its interpreter for a code
// context, and the ports it leased.
type sessionEntry struct {
	shell *shellsession.Session // nil for a code context
	code  *codecontext.Context  // nil for a shell session
	ports []*portlease.Lease
	// limits are the limits that bound the session's cgroup: those it was
	// created with, the daemon's defaults for the fields it left zero; nil
	// for none.
	limits *api.Limits
}

// process returns the session's own process: its shell or interpreter.
func (e *sessionEntry) process() process.Process {
	if e.code != nil {
		return e.code
	}
	return e.shell
}

// close ends the shell or interpreter and every process under it.
func (e *sessionEntry) close() error {
	if e.code != nil {
		return e.code.Close()
	}
	return e.shell.Close()
}

func (e *sessionEntry) releasePorts() {
	for _, l := range e.ports {
		_ = l.Release()
	}
}

// session returns the live session with id, or ErrNotFound.
func (s *Server) session(id string) (*sessionEntry, error) {
	if e, ok := s.sessionOf(id); ok {
		return e, nil
	}
	return nil, fmt.Errorf("session %s: %w", id, process.ErrNotFound)
}

// sessionOf returns the session with id, if there is one: for the daemon's
// own looks, which make no error of its absence (every process that ends
// is looked up so).
func (s *Server) sessionOf(id string) (*sessionEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions[id]
	return e, ok
}

func (s *Server) isSession(id string) bool {
	_, ok := s.sessionOf(id)
	return ok
}

// portNumbers returns the numbers of the session's leased ports.
func (e *sessionEntry) portNumbers() []int {
	if len(e.ports) == 0 {
		return nil
	}
	ports := make([]int, len(e.ports))
	for i, l := range e.ports {
		ports[i] = l.Port()
	}
	return ports
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var opts api.SessionOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	if err := checkName(opts.Name); err != nil {
		return err
	}
	if opts.Language != "" {
		if err := checkContext(opts); err != nil {
			return err
		}
	}
	if opts.UniqueName {
		if opts.Name == "" {
			return badRequest("uniqueName without a name: give the name the session is to have alone")
		}
		done, err := s.claimName(r.Context(), opts.Name)
		if err != nil {
			return err
		}
		defer done()
	}
	if err := s.reserve(claim{k: slotSession}); err != nil {
		return err
	}
	e, err := s.newSession(r, opts)
	if err != nil {
		s.release(claim{k: slotSession})
		return err
	}
	return writeJSON(w, http.StatusCreated, s.processDTO(e.process()))
}

// nameTaken refuses a session created with uniqueName: the running session
// id has its name.
type nameTaken struct {
	name, id string
}

func (e *nameTaken) Error() string {
	return fmt.Sprintf("session %s is running with the name %q, asked to be unique", e.id, e.name)
}

// claimName makes the creation of a session called name the only one under
// way with uniqueName until done is called: another waits for it first. A
// running session of that name is a *nameTaken error, naming the newest
// such session.
func (s *Server) claimName(ctx context.Context, name string) (done func(), err error) {
	for {
		s.mu.Lock()
		busy, ok := s.naming[name]
		if !ok {
			break
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	claimed := make(chan struct{})
	s.naming[name] = claimed
	entries := make([]*sessionEntry, 0, len(s.sessions))
	for _, e := range s.sessions {
		entries = append(entries, e)
	}
	s.mu.Unlock()
	done = func() {
		s.mu.Lock()
		delete(s.naming, name)
		s.mu.Unlock()
		close(claimed)
	}
	// Looked at outside s.mu: a session made by name while the claim is
	// held is made without uniqueName, which asks for no check.
	var newest *process.Info
	for _, e := range entries {
		i := e.process().Info()
		if i.Name == name && i.State != process.Terminal && (newest == nil || !i.CreatedAt.Before(newest.CreatedAt)) {
			newest = &i
		}
	}
	if newest != nil {
		done()
		return nil, &nameTaken{name: name, id: newest.ID}
	}
	return done, nil
}

// newSession starts a session's shell with its port leases and tracks it.
// The caller has reserved its place.
func (s *Server) newSession(r *http.Request, opts api.SessionOptions) (*sessionEntry, error) {
	e := &sessionEntry{limits: apiLimits(limits(opts.Limits).Or(s.opts.Containment.Defaults()))}
	if opts.LeasePort {
		l, err := (*s.leasePort.Load())()
		if err != nil {
			return nil, err // "lease port: ..." says what failed
		}
		e.ports = append(e.ports, l)
	}
	var err error
	if opts.Language != "" {
		e.code, err = s.startContext(r.Context(), opts, e.portNumbers())
	} else {
		e.shell, err = s.startShell(r.Context(), opts, e.portNumbers())
	}
	if err == nil && r.Context().Err() != nil {
		// The client went away as the start ended: nobody would know the
		// session, which would hold its place until listed and deleted.
		_ = e.close()
		err = r.Context().Err()
	}
	if err != nil {
		e.releasePorts()
		return nil, err
	}
	sh := e.process()
	s.mu.Lock()
	s.sessions[sh.ID()] = e
	s.mu.Unlock()
	if err := s.track(sh, claim{k: slotSession}); err != nil {
		s.mu.Lock()
		delete(s.sessions, sh.ID())
		s.mu.Unlock()
		_ = e.close()
		e.releasePorts()
		return nil, err
	}
	return e, nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	items := []api.Process{}
	for _, p := range s.reg.All() {
		if i := p.Info(); i.Kind == process.KindSession && i.System {
			items = append(items, s.processDTO(p))
		}
	}
	return writeJSON(w, http.StatusOK, struct {
		Items []api.Process `json:"items"`
	}{items})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	e, err := s.session(r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.processDTO(e.process()))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	if err := s.removeSession(r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeSession ends the session with id and every process under it, and
// forgets its records and ports. A second call finds nothing.
func (s *Server) removeSession(id string) error {
	s.mu.Lock()
	e, ok := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("session %s: %w", id, process.ErrNotFound)
	}
	err := e.close()
	s.forgetCommands(id)
	s.removeRecord(id)
	e.releasePorts()
	if err == nil {
		s.settle(id)
	}
	if err != nil {
		return fmt.Errorf("end session %s: %w", id, err)
	}
	return nil
}

func (s *Server) submitCommand(w http.ResponseWriter, r *http.Request) error {
	e, err := s.session(r.PathValue("id"))
	if err != nil {
		return err
	}
	var opts api.CommandOptions
	if err := e.decodeCommand(r, &opts, &opts); err != nil {
		return err
	}
	p, _, err := s.submit(e, opts, false, false)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, s.processDTO(p))
}

func (s *Server) runCommand(w http.ResponseWriter, r *http.Request) error {
	e, err := s.session(r.PathValue("id"))
	if err != nil {
		return err
	}
	var opts api.CommandRunOptions
	if err := e.decodeCommand(r, &opts, &opts.CommandOptions); err != nil {
		return err
	}
	limit, err := s.outputLimit(opts.OutputLimit)
	if err != nil {
		return err
	}
	// A command of the shell with no stdin to feed runs on this goroutine
	// when the session is idle (see submit): the wait is the run.
	here := e.code == nil && opts.Stdin != process.StdinOpen
	// Under keepLogs none the log keeps its frames for the answer, which
	// reads them, and drops them after.
	p, ran, err := s.submit(e, opts.CommandOptions, here, opts.KeepLogs == api.KeepNone)
	if err != nil {
		return err
	}
	defer p.Log().Release()
	aw := answerWait{timeout: opts.Timeout.Duration(), idle: opts.IdleTimeout.Duration()}
	if ran == nil {
		return s.answerRun(w, r, p, aw, runAnswer{limit: limit, plain: opts.Plain})
	}
	defer ran.watch()
	aw.turn = ran.turn
	return s.answerRun(w, r, p, aw, runAnswer{limit: limit, plain: opts.Plain})
}

// submit queues a command in the session and tracks it. With here, in a
// shell session, a command that finds the session idle comes back with the
// turn it holds: the caller runs it (its TakeTurn, which returns at once
// for a command queued behind others) and then has it watched
// (ranHere.watch), which submit leaves to it. Otherwise ran is nil and a
// watcher starts.
func (s *Server) submit(e *sessionEntry, opts api.CommandOptions, here, hold bool) (p process.Process, ran *ranHere, err error) {
	if err := checkName(opts.Name); err != nil {
		return nil, nil, err
	}
	c := claim{slotProcess, textBytes(cmp.Or(opts.Cmd, opts.Code), nil)}
	if err := s.checkCommandSize(c.text); err != nil {
		return nil, nil, err
	}
	if err := s.reserve(c); err != nil {
		return nil, nil, err
	}
	var turn *shellsession.Command
	if e.code != nil {
		p, err = s.submitCell(e.code, opts, hold)
	} else {
		p, turn, err = s.submitTo(e.shell, opts, here, hold)
	}
	if err != nil {
		s.release(c)
		return nil, nil, err
	}
	release, err := s.register(p, c)
	if err != nil {
		if turn != nil {
			turn.TakeTurn(cancelled) // stopped as it registered: gives its turn back
		}
		return nil, nil, err
	}
	if turn == nil {
		go s.watch(p, release)
		return p, nil, nil
	}
	return p, &ranHere{s: s, turn: turn, release: release}, nil
}

// ranHere is a command that runs on the goroutine of the request that
// submitted it.
type ranHere struct {
	s       *Server
	turn    *shellsession.Command // the command
	release func()
}

// watch does what follows the command's end on the request's goroutine, once
// its answer has gone, when it has ended; else a goroutine watches it.
func (h *ranHere) watch() {
	h.turn.TakeTurn(cancelled) // a no-op once run; hands the command to a goroutine if not
	select {
	case <-h.turn.Done():
		h.s.afterEnd(h.turn, h.release)
		h.s.watchers.Done()
	default:
		go h.s.watch(h.turn, h.release)
	}
}

// cancelled is a context that is done.
var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
