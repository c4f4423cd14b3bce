package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/conchsh/conch/api"
)

// The event types of a log stream.
const (
	EventLog     = api.EventLog
	EventWarning = api.EventWarning
	EventState   = api.EventState
	EventEOF     = api.EventEOF
)

// Event is one event of a log stream. Type says which field is set.
type Event struct {
	Type string
	// ID is the event's id: the frame's cursor for a log event. Resume a
	// stream after it with StreamOptions.LastEventID or Cursor.
	ID      string
	Frame   *LogFrame   // log
	Warning *Warning    // warning
	State   *WaitResult // state
}

// Warning is the data of a warning event.
type Warning = api.Warning

// StreamOptions choose where a log stream starts.
type StreamOptions struct {
	Cursor string // frames after this cursor; empty: from the start
	// LastEventID resumes after this event id, as a reconnecting browser
	// would; it wins over Cursor.
	LastEventID string
	Base64      bool // force base64 encoding of every frame
}

// maxEventLine bounds one line of the stream, and one event's lines
// together: a 64 KiB frame of control characters grows to about 384 KiB of
// JSON. A longer one is not the daemon's, and ends the stream.
const maxEventLine = 4 << 20

// Stream follows the process's logs: the retained frames after the cursor,
// then live frames, then a state and an eof event once the process ended. The
// iterator ends after eof, at the first error (which it yields), or when the
// loop breaks.
//
// A stream the daemon closes before its eof — it lets a reader go that has
// taken no event for 30 s, as one piped into a pager that waits does — or
// whose connection breaks, is resumed after the last frame received (with
// Last-Event-ID), so that a slow reader loses nothing but what retention
// dropped meanwhile, which a warning event says, as for any reader that
// falls behind. A resumption that finds the process ended with every frame
// read gives its state, then eof; a stream cut after its state gives eof
// and is not resumed, so that the state comes once.
//
// The rule for trying again, which the TypeScript and Python SDKs follow
// too: a stream's first request that fails (it cannot be sent, as with no
// daemon at the address, or the daemon refuses it, 429, 502, 503 or 504
// included) yields its error at once, as any other call's does. A
// resumption that cannot be sent (the daemon restarting), that is cut again
// with no event, or that is refused with 429 (the daemon at its
// --max-streams, as when another client took the place the cut gave back),
// 502, 503 or 504 is tried again; each try waits 50 ms, doubled from one
// try to the next (50, 100, 200, 400, 800 ms), or the refusal's
// Retry-After if that is longer (at most 30 s). After 5 resumptions in a
// row with no event, the stream yields the cut (io.ErrUnexpectedEOF, for a
// body that ended early) with the last failure; a resumption the daemon
// refuses otherwise (404: the process is gone) yields the cut with that
// refusal at once.
//
// A stream asked at or past the last frame of an ended process (the daemon
// answers 204: nothing more will come) yields the process's state, as a
// wait gives it, then eof, whose ID is the cursor asked, as a stream asked
// before its end would have ended. Once ctx ends, it
// yields ctx's error and ends, the events already received not yielded.
//
// The daemon sends a heartbeat every 15 s on a quiet stream: one that
// sends nothing, not even that, for the Client's stream idle timeout
// (WithStreamIdleTimeout, 45 s by default), the head of its answer
// included, is frozen or gone, or a network holds the connection, and the
// stream yields an error that says so (context.DeadlineExceeded) and ends,
// rather than wait as long again on a new connection. Only the time the
// stream waits on the daemon counts, never the time the caller holds an
// event.
//
// An event over 4 MiB, a line of it or its lines together (comments
// aside), larger than any the daemon sends, ends the stream with an error
// that says so: the stream is not the daemon's, and is not resumed.
func (c *Client) Stream(ctx context.Context, id string, opts StreamOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		last := opts.LastEventID // where a resumption starts: the last frame's cursor
		var resumed error        // the cut that the stream is resumed after
		stated := false
		for fruitless := 0; ; {
			q := c.newQuiet(ctx)
			resp, err := c.openStream(q.ctx, id, opts, last)
			if err != nil && ctx.Err() != nil {
				q.end()
				yield(Event{}, ctx.Err())
				return
			}
			if err != nil && q.fired() {
				q.end()
				yield(Event{}, q.err(id))
				return
			}
			if err != nil {
				q.end()
			}
			if err != nil && resumed != nil {
				apiErr := (*Error)(nil)
				refused := errors.As(err, &apiErr)
				if refused && !passing(apiErr.Status) {
					yield(Event{}, fmt.Errorf("%w; resuming it: %w", resumed, err))
					return
				}
				// Not sent (the daemon restarting), or a refusal that may
				// pass: the daemon at its --max-streams (one more client
				// took the place the cut gave back), a proxy's 502 or 504,
				// a 503. It is asked again as a cut with no event is,
				// within the same budget.
				if fruitless++; fruitless > maxResumes {
					yield(Event{}, fmt.Errorf("%w; resumed %d times in a row with no event: %w", resumed, maxResumes, err))
					return
				}
				wait := backoff(fruitless)
				if refused {
					wait = max(wait, min(apiErr.RetryAfter, maxPause))
				}
				if !pause(ctx, wait) {
					yield(Event{}, ctx.Err())
					return
				}
				continue
			}
			if err != nil {
				yield(Event{}, err) // a first request: its error at once, as any other call's
				return
			}
			if resp.StatusCode == http.StatusNoContent {
				resp.Body.Close()
				q.end()
				if !stated {
					// The process ended and every frame after the cursor
					// was sent: before it, or to the stream a cut took
					// the state from. Its state is what a wait answers.
					r, err := c.ended(ctx, id)
					if err != nil {
						yield(Event{}, err)
						return
					}
					if !yield(Event{Type: EventState, State: r}, nil) {
						return
					}
				}
				at := last
				if at == "" {
					at = opts.Cursor // asked at the end: eof carries its cursor
				}
				yield(Event{Type: EventEOF, ID: at}, nil) // nothing more will come
				return
			}
			took := false
			cut := error(io.ErrUnexpectedEOF) // the body ended before eof
			for ev, err := range readEvents(q.reader(resp.Body)) {
				// Events of a read already made come on after ctx ends: the
				// stream ends at ctx's end, not once they are read.
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				if re := (*readError)(nil); errors.As(err, &re) {
					cut = err
					break
				}
				if err != nil {
					resp.Body.Close()
					q.end()
					yield(Event{}, err)
					return
				}
				took = true
				switch ev.Type {
				case EventLog:
					last = ev.ID
				case EventState:
					stated = true
				}
				// The time the caller holds an event is not the daemon's.
				q.hold()
				if !yield(ev, nil) || ev.Type == EventEOF {
					resp.Body.Close()
					q.end()
					return
				}
				q.wait()
			}
			resp.Body.Close()
			q.end()
			if ctx.Err() != nil {
				yield(Event{}, ctx.Err())
				return
			}
			if q.fired() {
				yield(Event{}, q.err(id))
				return
			}
			if stated {
				// The daemon sends the state once every frame was sent:
				// only eof was left, and a stream asked again with no
				// frame to resume after (the process wrote nothing) would
				// be sent the state a second time.
				yield(Event{Type: EventEOF, ID: last}, nil)
				return
			}
			if took {
				fruitless = 0
			}
			if fruitless++; fruitless > maxResumes {
				yield(Event{}, fmt.Errorf("stream of %s cut, then resumed %d times in a row with no event: %w", id, maxResumes, cut))
				return
			}
			if !pause(ctx, backoff(fruitless)) {
				yield(Event{}, ctx.Err())
				return
			}
			resumed = cut
		}
	}
}

// quiet ends a stream's connection once the daemon has sent nothing, not
// even a heartbeat, for the client's stream idle timeout while the stream
// waits on it: the head of its answer, then each read of its events; never
// while the caller holds an event. Its context is the connection's.
type quiet struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      *time.Timer
	d      time.Duration
}

// errQuiet is the cause of a connection quiet ended.
var errQuiet = errors.New("the daemon sent nothing")

// newQuiet starts the quiet timer of a connection of a stream asked under
// ctx.
func (c *Client) newQuiet(ctx context.Context) *quiet {
	qctx, cancel := context.WithCancelCause(ctx)
	return &quiet{ctx: qctx, cancel: cancel, d: c.streamIdle, t: time.AfterFunc(c.streamIdle, func() { cancel(errQuiet) })}
}

func (q *quiet) hold() { q.t.Stop() }

func (q *quiet) wait() { q.t.Reset(q.d) }

// end stops the timer and lets the connection's context go.
func (q *quiet) end() {
	q.t.Stop()
	q.cancel(nil)
}

// fired reports whether the connection ended for its quiet.
func (q *quiet) fired() bool { return errors.Is(context.Cause(q.ctx), errQuiet) }

// err is the error a stream of process id ends with once quiet fired: a
// frozen or gone daemon, or a network that holds the connection. It is not
// resumed: a new connection would wait as long again.
func (q *quiet) err(id string) error {
	return fmt.Errorf("stream of %s: nothing from the daemon, not even a heartbeat, within %s: it is frozen or gone, or the network holds the connection: %w",
		id, q.d, context.DeadlineExceeded)
}

// reader returns r, each read of which that brings bytes starts the
// timer again.
func (q *quiet) reader(r io.Reader) io.Reader { return quietReader{r, q} }

type quietReader struct {
	r io.Reader
	q *quiet
}

func (r quietReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.q.t.Reset(r.q.d)
	}
	return n, err
}

// maxResumes is how many times in a row a stream is resumed that brings no
// event (cut again, not sent, or refused with a status that may pass)
// before it gives up: a daemon that closes every stream at once is not
// asked for ever. The TypeScript and Python SDKs take the same count.
const maxResumes = 5

// backoff is the pause before the n-th resumption in a row since the last
// event (from 1): 50 ms, doubled each time, as the SDKs pause.
func backoff(n int) time.Duration {
	return 50 * time.Millisecond << (n - 1)
}

// maxPause bounds how long a Retry-After makes a resumption wait.
const maxPause = 30 * time.Second

// passing reports whether a resumption refused with status may be asked
// again: 429, the daemon at its --max-streams (with no Retry-After) or its
// connection limit; a proxy's 502 or 504; a 503.
func passing(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// pause waits d, and reports false if ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// openStream asks for the process's log stream: as opts say, or after the
// frame whose cursor is last once one came.
func (c *Client) openStream(ctx context.Context, id string, opts StreamOptions, last string) (*http.Response, error) {
	q := url.Values{}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Base64 {
		q.Set("encoding", EncodingBase64)
	}
	h := http.Header{"Accept": {"text/event-stream"}}
	if last != "" {
		h.Set("Last-Event-ID", last) // it wins over the cursor
	}
	return c.send(ctx, request{method: http.MethodGet, path: processPath(id, "logs", "stream"), query: q, header: h, stream: true},
		http.StatusOK, http.StatusNoContent)
}

// ended returns the WaitResult of a process that has ended. A wait with no
// timeout is answered once the process ended; one answered 202 (running
// still) all the same is asked again after a pause, 50 ms doubled each
// time up to 2 s, not at once: a daemon that answers so at once would be
// asked for ever as fast as it answers.
func (c *Client) ended(ctx context.Context, id string) (*WaitResult, error) {
	for n := 1; ; n++ {
		r, _, err := c.Wait(ctx, id, 0)
		if err != nil || r != nil {
			return r, err
		}
		if !pause(ctx, min(backoff(min(n, 7)), maxWaitPause)) {
			return nil, ctx.Err()
		}
	}
}

// maxWaitPause bounds the pause before a wait answered 202 is asked again.
const maxWaitPause = 2 * time.Second

// readError is a failure to read a stream's body: its connection broke, or
// the daemon closed it before its eof.
type readError struct{ err error }

func (e *readError) Error() string { return "read stream: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// readEvents parses a text/event-stream into Events, skipping comments.
func readEvents(r io.Reader) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxEventLine)
		var typ, id string
		var data strings.Builder
		size := 0 // of the event's lines so far
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				size = 0
				if typ == "" && data.Len() == 0 {
					continue
				}
				ev, err := decodeEvent(typ, id, data.String())
				if !yield(ev, err) || err != nil {
					return
				}
				typ, id = "", ""
				data.Reset()
				continue
			}
			if strings.HasPrefix(line, ":") {
				continue
			}
			if size += len(line) + 1; size > maxEventLine {
				yield(Event{}, fmt.Errorf("read stream: an event over %d bytes", maxEventLine))
				return
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				typ = value
			case "id":
				id = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
		}
		switch err := sc.Err(); {
		case errors.Is(err, bufio.ErrTooLong):
			yield(Event{}, fmt.Errorf("read stream: an event line over %d bytes: %w", maxEventLine, err))
		case err != nil && !errors.Is(err, context.Canceled):
			yield(Event{}, &readError{err})
		}
	}
}

func decodeEvent(typ, id, data string) (Event, error) {
	ev := Event{Type: typ, ID: id}
	var target any
	switch typ {
	case EventLog:
		ev.Frame = new(LogFrame)
		target = ev.Frame
	case EventWarning:
		ev.Warning = new(Warning)
		target = ev.Warning
	case EventState:
		ev.State = new(WaitResult)
		target = ev.State
	case EventEOF:
		return ev, nil
	default:
		return ev, fmt.Errorf("stream: unknown event %q", typ)
	}
	if err := json.Unmarshal([]byte(data), target); err != nil {
		return ev, fmt.Errorf("stream: %s event: %w", typ, err)
	}
	return ev, nil
}
