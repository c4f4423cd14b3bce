package client

import (
	"context"
	"net/http"
)

func sessionPath(id string, rest ...string) string { return resourcePath("sessions", id, rest...) }

// CreateSession starts a session's shell and returns the session once the
// shell is ready.
func (c *Client) CreateSession(ctx context.Context, opts SessionOptions) (*Process, error) {
	var p Process
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/sessions", body: opts}, &p, http.StatusCreated)
	return &p, err
}

// Sessions lists every session.
func (c *Client) Sessions(ctx context.Context) ([]Process, error) {
	var l ProcessList
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/sessions"}, &l, http.StatusOK)
	return l.Items, err
}

// Session returns the session with id; its Cwd is the shell's current
// directory.
func (c *Client) Session(ctx context.Context, id string) (*Process, error) {
	var p Process
	_, err := c.call(ctx, request{method: http.MethodGet, path: sessionPath(id)}, &p, http.StatusOK)
	return &p, err
}

// DeleteSession ends the session's shell and every process under it, and
// deletes its command records.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: sessionPath(id)}, nil, http.StatusNoContent)
	return err
}

// Submit queues a command in the session and returns it without waiting.
func (c *Client) Submit(ctx context.Context, sessionID string, opts CommandOptions) (*Process, error) {
	var p Process
	_, err := c.call(ctx, request{method: http.MethodPost, path: sessionPath(sessionID, "commands"), body: opts}, &p, http.StatusCreated)
	return &p, err
}

// RunCommand runs a command in the session and waits for it as Run does
// (opts.Timeout, opts.IdleTimeout, or until it waits for input). It returns
// the RunResult once the command ended; when the wait ended first, the
// still queued or running command too, with the output so far in the
// RunResult.
func (c *Client) RunCommand(ctx context.Context, sessionID string, opts CommandRunOptions) (*RunResult, *Process, error) {
	return c.run(ctx, sessionPath(sessionID, "commands", "run"), opts)
}
