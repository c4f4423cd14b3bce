package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// streamLogs answers a text/event-stream of the process's frames after the
// cursor (Last-Event-ID wins over the query's cursor), then its state and
// eof once it ended. Comments keep an idle stream alive through proxies.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from := q.Get("cursor")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
	}
	after, err := parseCursor(from)
	if err != nil {
		return err
	}
	b64, err := parseEncoding(q.Get("encoding"))
	if err != nil {
		return err
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil // the client is gone
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events, done := follow(ctx, p.Log(), after)
	defer func() { cancel(); <-done }()

	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		var err error
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				return nil // ctx ended the follow
			case ev.End:
				return s.endStream(ctx, w, rc, p)
			case ev.Warning != nil:
				err = writeEvent(w, client.EventWarning, "", client.Warning{
					Message:              ev.Warning.Message,
					FirstAvailableCursor: ev.Warning.FirstAvailable.String(),
				})
			default:
				err = writeEvent(w, client.EventLog, ev.Frame.Cursor.String(), frameDTO(ev.Frame, b64))
			}
		case <-tick.C:
			_, err = io.WriteString(w, ": ping\n\n")
		case <-ctx.Done():
			return nil
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			s.log.Debug("stream ended by its client", "id", p.ID(), "err", err)
			return nil
		}
	}
}

// endStream sends the state once the process is terminal, then eof.
func (s *Server) endStream(ctx context.Context, w io.Writer, rc *http.ResponseController, p process.Process) error {
	select {
	case <-p.Done():
	case <-ctx.Done():
		return nil
	}
	if err := writeEvent(w, client.EventState, "", waitResult(*p.Info().Result)); err != nil {
		return nil
	}
	if err := writeEvent(w, client.EventEOF, "", struct{}{}); err != nil {
		return nil
	}
	_ = rc.Flush()
	return nil
}

// follow runs l.Follow in a goroutine and hands its events over a channel
// (each Frame is the follower's own copy). The channel is closed when the
// follow ends; done is closed once the goroutine has returned.
func follow(ctx context.Context, l *logstore.Log, after logstore.Cursor) (<-chan logstore.Event, <-chan struct{}) {
	events := make(chan logstore.Event)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		_ = l.Follow(ctx, after, func(ev logstore.Event) bool {
			select {
			case events <- ev:
				return !ev.End
			case <-ctx.Done():
				return false
			}
		})
	}()
	return events, done
}

// writeEvent writes one server-sent event; data is JSON on one line.
func writeEvent(w io.Writer, event, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id != "" {
		_, err = fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", id, event, b)
	} else {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	return err
}
