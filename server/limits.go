package server

import (
	"net/http"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/process"
)

// DefaultMaxCommandBytes bounds the text of a command (a session command's
// cmd, or an exec process's cmd) when Options leave it zero.
const DefaultMaxCommandBytes = 1 << 20

// checkCommandSize refuses a text over the limit with 413: the session's
// syntax check and the shell hold it whole, so its size is what one
// request may make them hold.
func (s *Server) checkCommandSize(text int64) error {
	if text > int64(s.opts.MaxCommandBytes) {
		e := errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
			"command text is %d bytes, over the limit of %d (--max-command-bytes)", text, s.opts.MaxCommandBytes)
		e.Cause = process.ErrInvalidArgument // for another surface (sandboxd) that maps engine errors
		return e
	}
	return nil
}

// MaxNameBytes bounds the name of a process, session or command (see
// api.MaxNameBytes).
const MaxNameBytes = api.MaxNameBytes

// checkName refuses a name over MaxNameBytes.
func checkName(name string) error {
	if len(name) > MaxNameBytes {
		return badRequest("name is %d bytes, at most %d", len(name), MaxNameBytes)
	}
	return nil
}

// textBytes is the size of a process's text, as --max-command-bytes
// bounds it: its command or code, and its argv (each argument with the
// byte that ends it).
func textBytes(cmd string, argv []string) int64 {
	n := int64(len(cmd))
	for _, a := range argv {
		n += int64(len(a)) + 1
	}
	return n
}

// textCost is what a process's text counts under the budgets of command
// text and ended records: its bytes, and for each argv element what it
// costs beyond them (process.ArgCost), which a million empty arguments
// would otherwise hold uncounted.
func textCost(cmd string, argv []string) int64 {
	return int64(len(cmd) + process.ArgvCost(argv))
}

// smallBodyLimit bounds the bodies of the routes that take a few short
// fields: no more is read for them, whatever --body-limit allows.
const smallBodyLimit = 64 << 10

// smallBodiesBudget bounds the bodies of those routes read at once, apart
// from the others' budget: 64 of them.
const smallBodiesBudget = 64 * smallBodyLimit

// smallBodies are the patterns of the routes whose bodies smallBodyLimit
// bounds.
var smallBodies = map[string]bool{
	"POST /v1/processes/{id}/kill":   true,
	"POST /v1/processes/{id}/resize": true,
}

// bodyLimit returns the most the route of pattern reads of a body, and the
// flag that sets it when one does.
func (s *Server) bodyLimit(pattern string) (int64, string) {
	if smallBodies[pattern] && s.opts.BodyLimit > smallBodyLimit {
		return smallBodyLimit, ""
	}
	return s.opts.BodyLimit, "--body-limit"
}
