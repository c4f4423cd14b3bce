package server

import (
	"context"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// The engine behind the API: one-shot processes from package exec,
// sessions from package shellsession.

// start checks opts, starts an exec or PTY process and tracks it.
func (s *Server) start(ctx context.Context, opts api.StartOptions) (process.Process, error) {
	if err := checkStart(&opts); err != nil {
		return nil, err
	}
	if opts.Kind == process.KindPTY && opts.Cmd == "" && len(opts.Argv) == 0 {
		// A PTY with nothing to run is a terminal on the shell itself.
		sh, err := shells.Resolve(opts.Shell)
		if err != nil {
			return nil, err
		}
		opts.Argv = append([]string{sh.Path}, sh.Prefix...)
		if opts.Login {
			opts.Argv = append(opts.Argv, "-l")
		}
		opts.Shell, opts.Login = "", false
	}
	if err := s.reserve(slotProcess); err != nil {
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
		Retention:        s.opts.LogRetention,
	})
	if err != nil {
		s.release(slotProcess)
		return nil, err
	}
	if err := s.track(p, slotProcess); err != nil {
		return nil, err
	}
	return p, nil
}

// startShell starts a session's shell and returns once it is ready. The
// caller checked opts.
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
	})
}

// submitTo queues a command in the session's shell. The caller checked
// opts.
func (s *Server) submitTo(sh *shellsession.Session, opts api.CommandOptions) (process.Process, error) {
	keep, _ := checkKeepLogs(opts.KeepLogs)
	c, err := sh.Submit(shellsession.CommandOptions{
		Cmd:              opts.Cmd,
		Name:             opts.Name,
		Stdin:            opts.Stdin,
		ExecutionTimeout: opts.ExecutionTimeout.Duration(),
		KeepLogs:         keep,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
