package server

import (
	"fmt"
	"net/http"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// sessionEntry is a live session: its shell and the ports it leased.
type sessionEntry struct {
	shell *shellsession.Session
	ports []*portlease.Lease
}

func (e *sessionEntry) releasePorts() {
	for _, l := range e.ports {
		_ = l.Release()
	}
}

// session returns the live session with id, or ErrNotFound.
func (s *Server) session(id string) (*sessionEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.sessions[id]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("session %s: %w", id, process.ErrNotFound)
}

func (s *Server) isSession(id string) bool {
	_, err := s.session(id)
	return err == nil
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
	var opts client.SessionOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	if err := checkSession(opts); err != nil {
		return err
	}
	if err := s.reserve(slotSession); err != nil {
		return err
	}
	e, err := s.newSession(r, opts)
	if err != nil {
		s.release(slotSession)
		return err
	}
	return writeJSON(w, http.StatusCreated, s.processDTO(e.shell))
}

// newSession starts a session's shell with its port leases and tracks it.
// The caller has reserved its place.
func (s *Server) newSession(r *http.Request, opts client.SessionOptions) (*sessionEntry, error) {
	e := &sessionEntry{}
	if opts.LeasePort {
		l, err := portlease.Acquire()
		if err != nil {
			return nil, fmt.Errorf("lease a port: %w", err)
		}
		e.ports = append(e.ports, l)
	}
	sh, err := s.startShell(r.Context(), opts, e.portNumbers())
	if err != nil {
		e.releasePorts()
		return nil, err
	}
	e.shell = sh
	s.mu.Lock()
	s.sessions[sh.ID()] = e
	s.mu.Unlock()
	if err := s.track(sh, slotSession); err != nil {
		s.mu.Lock()
		delete(s.sessions, sh.ID())
		s.mu.Unlock()
		_ = sh.Close()
		e.releasePorts()
		return nil, err
	}
	return e, nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	items := []client.Process{}
	for _, p := range s.reg.All() {
		if i := p.Info(); i.Kind == process.KindSession && i.System {
			items = append(items, s.processDTO(p))
		}
	}
	return writeJSON(w, http.StatusOK, struct {
		Items []client.Process `json:"items"`
	}{items})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	e, err := s.session(r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.processDTO(e.shell))
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
	err := e.shell.Close()
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
	var opts client.CommandOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	p, err := s.submit(e, opts)
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
	var opts client.CommandRunOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	limit, err := s.outputLimit(opts.OutputLimit)
	if err != nil {
		return err
	}
	p, err := s.submit(e, opts.CommandOptions)
	if err != nil {
		return err
	}
	return s.answerRun(w, r, p, answerWait{
		timeout: opts.Timeout.Duration(), idle: opts.IdleTimeout.Duration(),
	}, runAnswer{limit: limit, plain: opts.Plain})
}

// submit queues a command in the session and tracks it.
func (s *Server) submit(e *sessionEntry, opts client.CommandOptions) (process.Process, error) {
	if err := s.checkCommandSize(opts.Cmd); err != nil {
		return nil, err
	}
	if err := checkCommand(opts); err != nil {
		return nil, err
	}
	if err := s.reserve(slotProcess); err != nil {
		return nil, err
	}
	p, err := s.submitTo(e.shell, opts)
	if err != nil {
		s.release(slotProcess)
		return nil, err
	}
	if err := s.track(p, slotProcess); err != nil {
		return nil, err
	}
	return p, nil
}
