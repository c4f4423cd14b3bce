package server

import (
	"context"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// The engine behind the API: one-shot processes from package exec,
// sessions from package shellsession.

// start starts an exec or PTY process and tracks it. The engine checks the
// options (exec.Start); errors map to the API's codes in errors.go.
func (s *Server) start(ctx context.Context, opts api.StartOptions, hold bool) (process.Process, error) {
	if len(opts.Argv) == 0 {
		opts.Argv = nil // "argv": [] says nothing, as an absent argv
	}
	if err := checkName(opts.Name); err != nil {
		return nil, err
	}
	c := claim{slotProcess, textCost(opts.Cmd, opts.Argv)}
	if err := s.checkCommandSize(textBytes(opts.Cmd, opts.Argv)); err != nil {
		return nil, err
	}
	if err := s.reserve(c); err != nil {
		return nil, err
	}
	p, err := exec.Start(exec.Options{
		Kind:             opts.Kind,
		Cmd:              opts.Cmd,
		Argv:             opts.Argv,
		Name:             opts.Name,
		Cwd:              opts.Cwd,
		Env:              opts.Env,
		User:             opts.User,
		Shell:            opts.Shell,
		Login:            opts.Login,
		Stdin:            opts.Stdin,
		ExecutionTimeout: opts.ExecutionTimeout.Duration(),
		Terminal:         opts.Terminal,
		KeepLogs:         opts.KeepLogs,
		HoldLogs:         hold,
		Retention:        s.opts.LogRetention,
		Containment:      s.opts.Containment,
		Limits:           limits(opts.Limits),
	})
	if err != nil {
		s.release(c)
		return nil, err
	}
	if err := s.track(p, c); err != nil {
		return nil, err
	}
	return p, nil
}

// startShell starts a session's shell and returns once it is ready; the
// engine checks opts.
func (s *Server) startShell(ctx context.Context, opts api.SessionOptions, ports []int) (*shellsession.Session, error) {
	return shellsession.New(ctx, shellsession.Options{
		Name:      opts.Name,
		Cwd:       opts.Cwd,
		Env:       opts.Env,
		Shell:     opts.Shell,
		Login:     opts.Login,
		Retention: s.opts.LogRetention,
		Ports:     ports,
		StreamDir: s.opts.StreamDir,

		ReadyWithin: s.opts.ReadyWithin,
		Containment: s.opts.Containment,
		Limits:      limits(opts.Limits),
	})
}

// submitTo queues a command in the session's shell; the engine checks
// opts. With here, the command comes back as turn too: one that finds the
// session idle waits for the caller to run it on its own goroutine, with
// its TakeTurn (see shellsession.Session.Begin). turn is nil otherwise.
func (s *Server) submitTo(sh *shellsession.Session, opts api.CommandOptions, here, hold bool) (p process.Process, turn *shellsession.Command, err error) {
	o := shellsession.CommandOptions{
		Cmd:              opts.Cmd,
		Name:             opts.Name,
		Stdin:            opts.Stdin,
		ExecutionTimeout: opts.ExecutionTimeout.Duration(),
		KeepLogs:         opts.KeepLogs,
		HoldLogs:         hold,
	}
	if here {
		c, err := sh.Begin(o)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}
	c, err := sh.Submit(o)
	if err != nil {
		return nil, nil, err
	}
	return c, nil, nil
}

// apiLimits is the API's Limits of the engine's, nil for none.
func apiLimits(l containment.Limits) *api.Limits {
	if l.IsZero() {
		return nil
	}
	return &api.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUMillis: l.CPUMillis}
}

// limits is the engine's Limits of the API's.
func limits(l *api.Limits) containment.Limits {
	if l == nil {
		return containment.Limits{}
	}
	return containment.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUMillis: l.CPUMillis}
}
