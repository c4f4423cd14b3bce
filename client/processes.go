package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/api"
)

// resourcePath is the path of the resource with id in collection
// (processes, sessions), followed by rest.
func resourcePath(collection, id string, rest ...string) string {
	p := "/v1/" + collection + "/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func processPath(id string, rest ...string) string { return resourcePath("processes", id, rest...) }

// endpoint is the daemon's URL for path, whose segments resourcePath
// escaped: an id keeps its escapes (a "/" in it goes as %2F, never as a
// segment of its own, and its "%" is not escaped twice). An empty id is
// refused: the path would name another resource.
func (c *Client) endpoint(path string) (url.URL, error) {
	if strings.Contains(path, "//") || strings.HasSuffix(path, "/") {
		what := "process"
		if strings.HasPrefix(path, "/v1/sessions/") {
			what = "session"
		}
		return url.URL{}, &Error{Code: CodeInvalidArgument, Message: "the " + what + " id is empty"}
	}
	u := *c.base
	u.RawPath = u.EscapedPath() + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return url.URL{}, err
	}
	u.Path = p
	return u, nil
}

// Start starts an exec or PTY process and returns it without waiting.
func (c *Client) Start(ctx context.Context, opts StartOptions) (*Process, error) {
	var p Process
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/processes", body: opts}, &p, http.StatusCreated)
	return &p, err
}

// Run starts a process and waits for it, at most opts.Timeout (or until it
// has been quiet for opts.IdleTimeout, or waits for input). It returns the
// RunResult once the process ended; when the wait ended first it returns the
// still running Process too, and the RunResult holds the output so far,
// Next and WaitingForInput. So the Process is nil exactly when it ended.
func (c *Client) Run(ctx context.Context, opts RunOptions) (*RunResult, *Process, error) {
	return c.run(ctx, "/v1/processes/run", opts)
}

// run posts body to path and decodes a 200 RunResult or a 202 Process.
func (c *Client) run(ctx context.Context, path string, body any) (*RunResult, *Process, error) {
	resp, err := c.send(ctx, request{method: http.MethodPost, path: path, body: body}, http.StatusOK, http.StatusAccepted)
	if err != nil {
		return nil, nil, err
	}
	defer closeBody(resp)
	if resp.StatusCode == http.StatusAccepted {
		// The process's fields and the output so far, in one object.
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, nil, fmt.Errorf("run: read answer: %w", err)
		}
		var p Process
		var r RunResult
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, nil, fmt.Errorf("run: decode process: %w", err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, nil, fmt.Errorf("run: decode output: %w", err)
		}
		return &r, &p, nil
	}
	var r RunResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, nil, fmt.Errorf("run: decode result: %w", err)
	}
	return &r, nil, nil
}

// Interact writes opts.Input to the process (then closes its stdin with
// opts.EOF), sends opts.Signal, and waits as Run does; the answer holds the
// output after opts.Cursor, or, without one, what came after the input.
// The Process is nil exactly when the process ended.
func (c *Client) Interact(ctx context.Context, id string, opts InteractOptions) (*RunResult, *Process, error) {
	return c.run(ctx, processPath(id, "interact"), opts)
}

// Ready waits until the process (or a process it started) listens on
// opts.Port and/or its output matches opts.Pattern, at most opts.Timeout.
// It returns the answer (Ready false with Result when the process ended
// first), or the still running Process when the wait ran out.
func (c *Client) Ready(ctx context.Context, id string, opts ReadyOptions) (*Ready, *Process, error) {
	q := url.Values{}
	if opts.Port != "" {
		q.Set("port", opts.Port)
	}
	if opts.Pattern != "" {
		q.Set("pattern", opts.Pattern)
	}
	if opts.Timeout > 0 {
		q.Set("timeout", strconv.FormatInt(max(opts.Timeout.Milliseconds(), 1), 10))
	}
	return waitAnswer[Ready](ctx, c, "ready", processPath(id, "ready"), q)
}

// List returns one page of processes.
func (c *Client) List(ctx context.Context, opts ListOptions) (*ProcessList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", opts.State)
	set("kind", string(opts.Kind))
	set("sessionId", opts.SessionID)
	set("name", opts.Name)
	set("cursor", opts.Cursor)
	if opts.PID != 0 {
		q.Set("pid", strconv.Itoa(opts.PID))
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var l ProcessList
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/processes", query: q}, &l, http.StatusOK)
	return &l, err
}

// Processes iterates over every process matching opts, page after page. It
// stops at the first error, which it yields. Pages that do not move on are
// an error, given before their records: one whose next cursor was asked for
// already (the daemon's cursors move on), one that names a next but holds
// no record (the daemon's hold one at least), and a record of a process
// listed already (the daemon lists each once, in the order it created
// them); each such page naming a new next all the same would be listed for
// ever. Nothing bounds a listing of new records, each page naming a new
// next: the daemon's goes on for as long as processes are created faster
// than it is paged.
func (c *Client) Processes(ctx context.Context, opts ListOptions) iter.Seq2[Process, error] {
	return func(yield func(Process, error) bool) {
		seen := map[string]bool{opts.Cursor: true}
		listed := map[string]bool{}
		for {
			page, err := c.List(ctx, opts)
			if err != nil {
				yield(Process{}, err)
				return
			}
			if page.Next != "" && len(page.Items) == 0 {
				yield(Process{}, fmt.Errorf("the list of processes: a page of no records names next %q: not the daemon's answer",
					api.Clip([]byte(page.Next))))
				return
			}
			for _, p := range page.Items {
				if listed[p.ID] {
					yield(Process{}, fmt.Errorf("the list of processes: pages that do not move on (process %q again): not the daemon's answer",
						api.Clip([]byte(p.ID))))
					return
				}
				listed[p.ID] = true
				if !yield(p, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			if seen[page.Next] {
				yield(Process{}, againError("the list of processes", "next", page.Next))
				return
			}
			seen[page.Next] = true
			opts.Cursor = page.Next
		}
	}
}

// againError says that pages of what (a listing, logs) do not move on: a
// page names cursor (its next, or its last frame's) that was asked for
// already, or none where it must.
func againError(what, field, cursor string) error {
	if cursor == "" {
		return fmt.Errorf("%s: a page of frames with no %s cursor: not the daemon's answer", what, field)
	}
	if len(cursor) > 100 {
		cursor = cursor[:100] + "..."
	}
	return fmt.Errorf("%s: pages that do not move on (%s %q again): not the daemon's answer", what, field, cursor)
}

// Get returns the process with id.
func (c *Client) Get(ctx context.Context, id string) (*Process, error) {
	var p Process
	_, err := c.call(ctx, request{method: http.MethodGet, path: processPath(id)}, &p, http.StatusOK)
	return &p, err
}

// Delete stops the process with id (TERM, then KILL after 5 s) and deletes it
// and its logs.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: processPath(id)}, nil, http.StatusNoContent)
	return err
}

// Kill signals the process with id and its descendants. The kill of a
// session or code context returns once it has ended: up to EscalateAfter
// (5 s when zero) and 5 s more when its shell outlives the signal, which a
// deadline on ctx must allow for.
func (c *Client) Kill(ctx context.Context, id string, opts KillOptions) error {
	_, err := c.call(ctx, request{method: http.MethodPost, path: processPath(id, "kill"), body: opts}, nil, http.StatusAccepted)
	return err
}

// Wait waits until the process with id ends, at most timeout (zero: until
// it ends). It returns the WaitResult, or the still running Process when the
// timeout ran out first: exactly one of the two is not nil when err is nil.
func (c *Client) Wait(ctx context.Context, id string, timeout time.Duration) (*WaitResult, *Process, error) {
	q := url.Values{}
	if timeout > 0 {
		q.Set("timeout", strconv.FormatInt(max(timeout.Milliseconds(), 1), 10))
	}
	return waitAnswer[WaitResult](ctx, c, "wait", processPath(id, "wait"), q)
}

// waitAnswer asks a route that waits: 200 with a T, or 202 with the still
// running Process when its timeout ran out first. Exactly one of the two is
// not nil when err is nil.
func waitAnswer[T any](ctx context.Context, c *Client, what, path string, q url.Values) (*T, *Process, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path, query: q}, http.StatusOK, http.StatusAccepted)
	if err != nil {
		return nil, nil, err
	}
	defer closeBody(resp)
	if resp.StatusCode == http.StatusAccepted {
		var p Process
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			return nil, nil, fmt.Errorf("%s: decode process: %w", what, err)
		}
		return nil, &p, nil
	}
	var r T
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, nil, fmt.Errorf("%s: decode answer: %w", what, err)
	}
	return &r, nil, nil
}

// Logs returns one page of the process's frames.
func (c *Client) Logs(ctx context.Context, id string, opts LogsOptions) (*LogsPage, error) {
	q := url.Values{}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Base64 {
		q.Set("encoding", EncodingBase64)
	}
	var p LogsPage
	_, err := c.call(ctx, request{method: http.MethodGet, path: processPath(id, "logs"), query: q}, &p, http.StatusOK)
	return &p, err
}

// WriteStdin writes data to the process's stdin, and closes it after them
// when eof is true.
func (c *Client) WriteStdin(ctx context.Context, id string, data []byte, eof bool) error {
	q := url.Values{}
	if eof {
		q.Set("eof", "true")
	}
	req := request{
		method: http.MethodPost, path: processPath(id, "stdin"), query: q,
		raw:    bytes.NewReader(data),
		header: http.Header{"Content-Type": {"application/octet-stream"}},
	}
	_, err := c.call(ctx, req, nil, http.StatusNoContent)
	return err
}

// Resize changes the size of a PTY process.
func (c *Client) Resize(ctx context.Context, id string, cols, rows uint16) error {
	body := map[string]uint16{"cols": cols, "rows": rows}
	_, err := c.call(ctx, request{method: http.MethodPost, path: processPath(id, "resize"), body: body}, nil, http.StatusNoContent)
	return err
}
