package server

import (
	"context"
	"fmt"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/codecontext"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Code contexts: a session created with a language runs that language's
// interpreter (package codecontext) instead of a shell, and takes cells
// (code) instead of commands (cmd). Everything else — listing, deleting,
// the registry, answers — is a session's.

// checkContext checks the options of a new code context.
func checkContext(opts api.SessionOptions) error {
	switch {
	case opts.Shell != "":
		return badRequest("give shell or language, not both: language makes the session a code context")
	case opts.Login:
		return badRequest("login applies to a shell session, not to a code context")
	}
	_, err := codecontext.ParseLanguage(opts.Language)
	return err
}

// startContext starts a code context's interpreter and returns once it is
// ready. The caller checked opts.
func (s *Server) startContext(ctx context.Context, opts api.SessionOptions, ports []int) (*codecontext.Context, error) {
	lang, err := codecontext.ParseLanguage(opts.Language)
	if err != nil {
		return nil, err
	}
	return codecontext.New(ctx, codecontext.Options{
		Name:        opts.Name,
		Language:    lang,
		Cwd:         opts.Cwd,
		Env:         opts.Env,
		Retention:   s.opts.LogRetention,
		Ports:       ports,
		Dir:         s.opts.StreamDir,
		Containment: s.opts.Containment,
		Limits:      limits(opts.Limits),
	})
}

// checkBody refuses a command for a code context and a cell for a shell
// session, saying which one the session takes.
func (e *sessionEntry) checkBody(opts api.CommandOptions) error {
	switch {
	case e.code != nil && opts.Cmd != "":
		return badRequest("session %s is a %s code context: send its cell as code, not cmd", e.code.ID(), e.code.Language())
	case e.code == nil && opts.Code != "":
		return badRequest("session %s is a shell session: send a command as cmd; code is for a code context (a session created with language)", e.shell.ID())
	}
	return nil
}

// submitCell queues a cell in the context. The caller checked opts.
func (s *Server) submitCell(c *codecontext.Context, opts api.CommandOptions, hold bool) (process.Process, error) {
	keep, err := logstore.ParseKeepLogs(string(opts.KeepLogs))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", process.ErrInvalidArgument, err)
	}
	cell, err := c.Submit(codecontext.CellOptions{
		Code:             opts.Code,
		Name:             opts.Name,
		Stdin:            opts.Stdin,
		ExecutionTimeout: opts.ExecutionTimeout.Duration(),
		KeepLogs:         keep,
		HoldLogs:         hold,
	})
	if err != nil {
		return nil, err
	}
	return cell, nil
}
