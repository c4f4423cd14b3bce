package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/conchsh/conch/shellsession"
)

// Probes for an orchestrator, served without a token: /livez answers 200
// while the process serves; /readyz answers 200 when the server takes work,
// 503 while it starts, drains or cannot start a shell.

// shellCheckTimeout bounds one check that a shell starts.
const shellCheckTimeout = 10 * time.Second

// shellRecheck is how old the last check may be before /readyz starts
// another (answering from the last one meanwhile): a shell that could start
// may stop being able to (a full disk, a pid limit), and the other way.
const shellRecheck = 30 * time.Second

// The statuses of /livez and /readyz.
const (
	statusOK       = "ok"
	statusReady    = "ready"
	statusStarting = "starting"
	statusDraining = "draining"
	statusUnready  = "unready"
)

// probeAnswer is the body of /livez and /readyz.
type probeAnswer struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

func (s *Server) livez(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, probeAnswer{Status: statusOK})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	a := s.readiness()
	code := http.StatusOK
	if a.Status != statusReady {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, code, a)
}

// Ready reports whether the server takes work: nil when it does, else why
// not (it starts, drains, or cannot start a shell). /readyz answers from it.
func (s *Server) Ready() error {
	if a := s.readiness(); a.Status != statusReady {
		return fmt.Errorf("%s: %s", a.Status, a.Message)
	}
	return nil
}

// readiness is what /readyz answers now. It starts a check that a shell
// starts when none was made or the last one is old.
func (s *Server) readiness() probeAnswer {
	s.checkShell()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining || s.closing:
		return probeAnswer{Status: statusDraining, Message: "the daemon is stopping and takes no new work"}
	case !s.shellChecked:
		return probeAnswer{Status: statusStarting, Message: "checking that a shell starts"}
	case s.shellErr != nil:
		return probeAnswer{Status: statusUnready, Message: "cannot start a shell: " + s.shellErr.Error()}
	}
	return probeAnswer{Status: statusReady}
}

// checkShell starts a check that a session's shell (the default one, with
// the server's stream directory) starts, unless one runs, or one finished
// less than shellRecheck ago. The check's goroutine is Shutdown's to wait
// for.
func (s *Server) checkShell() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.shellChecking || (s.shellChecked && time.Since(s.shellCheckedAt) < shellRecheck) {
		return
	}
	s.shellChecking = true
	s.background.Go(func() {
		err := s.startShellOnce()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.shellChecking = false
		s.shellChecked, s.shellErr, s.shellCheckedAt = true, err, time.Now()
	})
}

// startShellOnce starts the default shell as a session would, and ends it.
func (s *Server) startShellOnce() error {
	ctx, cancel := context.WithTimeout(s.ctx, shellCheckTimeout)
	defer cancel()
	sh, err := shellsession.New(ctx, shellsession.Options{StreamDir: s.opts.StreamDir, Retention: 1 << 10})
	if err != nil {
		return err
	}
	return sh.Close()
}
