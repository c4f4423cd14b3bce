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

// maxEventLine bounds one line of the stream: a 64 KiB frame of control
// characters grows to about 384 KiB of JSON.
const maxEventLine = 4 << 20

// Stream follows the process's logs: the retained frames after the cursor,
// then live frames, then a state and an eof event once the process ended. The
// iterator ends after eof, at the first error (which it yields), or when the
// loop breaks. A stream that ends without eof yields io.ErrUnexpectedEOF. A
// stream resumed at or past the last frame of an ended process yields eof
// alone (the daemon answers 204: nothing more will come). Once ctx ends,
// it yields ctx's error and ends, the events already received not yielded.
func (c *Client) Stream(ctx context.Context, id string, opts StreamOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		q := url.Values{}
		if opts.Cursor != "" {
			q.Set("cursor", opts.Cursor)
		}
		if opts.Base64 {
			q.Set("encoding", EncodingBase64)
		}
		h := http.Header{"Accept": {"text/event-stream"}}
		if opts.LastEventID != "" {
			h.Set("Last-Event-ID", opts.LastEventID)
		}
		resp, err := c.send(ctx, request{method: http.MethodGet, path: processPath(id, "logs", "stream"), query: q, header: h},
			http.StatusOK, http.StatusNoContent)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			yield(Event{Type: EventEOF}, nil) // resumed past the end of an ended process
			return
		}
		for ev, err := range readEvents(resp.Body) {
			// Events of a read already made come on after ctx ends: the
			// stream ends at ctx's end, not once they are read.
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) || ev.Type == EventEOF {
				return
			}
		}
		yield(Event{}, io.ErrUnexpectedEOF)
	}
}

// readEvents parses a text/event-stream into Events, skipping comments.
func readEvents(r io.Reader) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxEventLine)
		var typ, id string
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
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
		if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
			yield(Event{}, fmt.Errorf("read stream: %w", err))
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
