package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"

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
		ReadyWithin: s.opts.ReadyWithin,
		Containment: s.opts.Containment,
		Limits:      limits(opts.Limits),
	})
}

// decodeCommand reads the body of a session's command or cell into opts,
// whose command fields are cmd, and refuses one that gives neither cmd nor
// code (`{}`, `null`, no body, `"cmd": null`): that is a caller's mistake,
// where `"cmd": ""` sends an empty command on purpose. So is a body that
// gives a shell session code, whatever its value: `"code": ""` ran an
// empty command, the field it named unread. A code context refuses a cmd
// that holds a command; an empty one is what the Go client sends beside
// every cell (its cmd is always sent), and alone it is an empty cell.
func (e *sessionEntry) decodeCommand(r *http.Request, opts any, cmd *api.CommandOptions) error {
	given, err := readJSON(r, opts)
	defer doneWithBody(r)
	if err != nil {
		return err
	}
	hasCmd, hasCode := slices.Contains(given, "cmd"), slices.Contains(given, "code")
	switch {
	case e.code != nil && cmd.Cmd != "":
		return badRequest("session %s is a %s code context: send its cell as code, not cmd", e.code.ID(), e.code.Language())
	case e.code == nil && hasCode:
		return badRequest("session %s is a shell session: send a command as cmd; code is for a code context (a session created with language)", e.shell.ID())
	case hasCmd || hasCode:
		return nil
	case e.code != nil:
		return badRequest(`give the cell as code (a string; "" runs an empty cell)`)
	}
	return badRequest(`give the command as cmd (a string; "" runs an empty command)`)
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
