package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// Error is an API error: the status and code the client is told, a message
// for it, and the cause for the daemon's log. Handlers return it, or any
// error that apiError maps.
type Error struct {
	Status  int
	Code    api.Code
	Message string
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// errorf returns an *Error with status and code and a formatted message.
func errorf(status int, code api.Code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, api.CodeInvalidArgument, format, args...)
}

// errShuttingDown refuses new work once Shutdown began.
var errShuttingDown = fmt.Errorf("%w: the daemon is shutting down", process.ErrUnsupported)

// apiError maps any error a handler returns to what the client is told. It
// is the one place where engine errors become API codes.
func apiError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var tooLarge *http.MaxBytesError
	var full *process.StdinFullError
	var taken *nameTaken
	conflict := func(err error) bool {
		return errors.Is(err, process.ErrStdinNotOpen) || errors.Is(err, process.ErrNotPTY) ||
			errors.Is(err, process.ErrUnsupported) || errors.Is(err, shellsession.ErrSessionEnded)
	}
	switch {
	case errors.As(err, &taken):
		return &Error{http.StatusConflict, api.CodeAlreadyExists, taken.Error(), err}
	case errors.As(err, &tooLarge):
		return &Error{http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
			fmt.Sprintf("request body over %d bytes", tooLarge.Limit), err}
	case errors.Is(err, containment.ErrUnsupported):
		return &Error{http.StatusBadRequest, api.CodeUnsupportedOperation, err.Error(), err}
	case errors.Is(err, exec.ErrNeedsRoot):
		// What the daemon is, not a state it may leave: as limits its host
		// cannot apply, before the 409 of process.ErrUnsupported.
		return &Error{http.StatusBadRequest, api.CodeUnsupportedOperation, message(err, process.ErrUnsupported), err}
	case errors.As(err, &full):
		return &Error{Status: http.StatusConflict, Code: api.CodeStdinFull, Cause: err,
			Message: fmt.Sprintf("stdin queue full: the process has not read %d bytes written before, and the queue holds at most %d; %d bytes of this write were queued, the rest were not: write the rest once the process has read",
				full.Queued, full.Limit, full.Accepted)}
	case errors.Is(err, process.ErrNotFound):
		return &Error{http.StatusNotFound, api.CodeNotFound, err.Error(), err}
	case errors.Is(err, process.ErrInvalidArgument), errors.Is(err, shells.ErrUnknownShell),
		errors.Is(err, shells.ErrNotInstalled):
		return &Error{http.StatusBadRequest, api.CodeInvalidArgument, message(err, process.ErrInvalidArgument), err}
	case conflict(err):
		return &Error{http.StatusConflict, api.CodeUnsupportedOperation, message(err, process.ErrUnsupported), err}
	case errors.Is(err, ErrDraining):
		// The message does not repeat the code (docs/api.md).
		return &Error{http.StatusServiceUnavailable, api.CodeDraining, strings.TrimPrefix(err.Error(), "draining: "), err}
	case errors.Is(err, process.ErrLimit):
		return &Error{http.StatusTooManyRequests, api.CodeResourceExhausted, message(err, process.ErrLimit), err}
	case errors.Is(err, syscall.E2BIG):
		return &Error{http.StatusBadRequest, api.CodeInvalidArgument, fmt.Sprintf(
			"the environment and arguments are over what the kernel takes for a program (one string at most 128 KiB, all at most a quarter of the stack limit): %v", err), err}
	}
	if msg, ok := process.Exhausted(err); ok {
		return &Error{http.StatusTooManyRequests, api.CodeResourceExhausted, msg, err}
	}
	switch {
	case errors.Is(err, portlease.ErrNoFreePort):
		// Leases held elsewhere on the machine: one may be released.
		return &Error{http.StatusTooManyRequests, api.CodeResourceExhausted, err.Error(), err}
	case errors.Is(err, portlease.ErrLockDir):
		// No retry helps until someone fixes the directory; a session
		// without leasePort may still be started.
		return &Error{http.StatusBadRequest, api.CodeUnsupportedOperation, err.Error(), err}
	}
	return &Error{http.StatusInternalServerError, api.CodeInternal, err.Error(), err}
}

// message is err's text without the leading words of kind (the error it
// wraps, such as "invalid argument: "), which the code says already.
func message(err, kind error) string {
	return strings.TrimPrefix(err.Error(), kind.Error()+": ")
}

// writeError renders err as the API's error body. Internal errors are logged:
// they are bugs.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if contextDone(err) && r.Context().Err() != nil {
		if s.ctx.Err() == nil {
			// The client went away: there is nobody to tell.
			s.log.Debug("request abandoned", "method", r.Method, "path", r.URL.Path, "err", err)
			return
		}
		err = errShuttingDown
	}
	e := apiError(err)
	if e.Status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else if process.OutOfFiles(err) {
		s.log.Warn("out of open files: work refused", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	if sw, ok := w.(*statusWriter); ok && sw.wrote {
		return // too late for a status: the answer has begun
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if e.Code == api.CodeDraining {
		w.Header().Set("Retry-After", retryAfter)
	}
	inner := map[string]any{"code": string(e.Code), "message": e.Message}
	if full := (*process.StdinFullError)(nil); errors.As(e, &full) {
		inner["acceptedBytes"] = full.Accepted
	}
	if taken := (*nameTaken)(nil); errors.As(e, &taken) {
		inner["sessionId"] = taken.id
	}
	body, _ := json.Marshal(map[string]any{"error": inner})
	body = append(body, '\n')
	// Its length said, the answer is whole once it is sent: a refusal
	// flushed while the rest of its request's body is read (see readRest)
	// went chunked, its end written only after that, and a connection
	// closed meanwhile to make room cut it (see idleConns.closeIdlest).
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// contextDone reports whether err is the end of a request's context, which
// is no error to report: the client went away or the daemon is stopping.
func contextDone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
