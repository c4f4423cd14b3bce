package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/conchsh/conch/api"
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
	// The query's cursor is parsed, and refused if it is none, even when
	// Last-Event-ID then wins over it: a query is read as written or
	// refused (docs/api.md).
	from := q.Get("cursor")
	after, err := parseCursor(from)
	if err != nil {
		return err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
		if after, err = parseCursor(from); err != nil {
			return err
		}
	}
	b64, err := parseEncoding(q.Get("encoding"))
	if err != nil {
		return err
	}
	if from != "" && pastTheEnd(p, after) {
		// Nothing will ever come: 204 is what stops an EventSource from
		// reconnecting after eof, every 3 s, forever.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err := issued(p, after); err != nil {
		return err // past the newest frame of a process that runs on
	}
	if gone, err := s.streamSlot(r); gone || err != nil {
		return err
	}
	defer func() { <-s.streams }()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil // the client is gone
	}

	// A write blocked on a client that reads nothing ends at Shutdown, which
	// would otherwise wait for it until its own deadline. Once the stream
	// is over, the connection may serve other requests: without a deadline.
	stop := context.AfterFunc(r.Context(), func() { _ = rc.SetWriteDeadline(time.Now()) })
	defer func() {
		if stop() {
			_ = rc.SetWriteDeadline(time.Time{})
		}
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events, done := follow(ctx, p.Log(), after, b64)
	defer func() { cancel(); <-done }()

	tick := time.NewTicker(time.Duration(s.heartbeat.Load()))
	defer tick.Stop()
	for {
		var write func() error
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				return nil // ctx ended the follow
			case ev.end:
				return s.endStream(ctx, w, rc, p)
			case ev.warning != nil:
				write = func() error {
					return writeEvent(w, api.EventWarning, "", api.Warning{
						Message:              ev.warning.Message,
						FirstAvailableCursor: ev.warning.FirstAvailable.String(),
					})
				}
			default:
				write = func() error {
					return writeEvent(w, api.EventLog, ev.frame.Cursor, ev.frame)
				}
			}
		case <-tick.C:
			write = func() error {
				_, err := io.WriteString(w, ": ping\n\n")
				return err
			}
		case <-ctx.Done():
			return nil
		}
		if err := s.send(ctx, rc, write); err != nil {
			s.log.Debug("stream ended by its client", "id", p.ID(), "err", err)
			return nil
		}
	}
}

// streamSlotWait is how long a stream past --max-streams waits for one to
// end before it is refused: a client that closes a stream and opens another
// at once (one that reconnects) reaches the daemon before the end of the
// stream it closed does.
const streamSlotWait = time.Second

// streamSlot takes a --max-streams slot for r's stream or attachment, which
// gives it back (<-s.streams) once it ends: false and nil when it did;
// gone when the client went away meanwhile; else the 429 that refuses r.
func (s *Server) streamSlot(r *http.Request) (gone bool, err error) {
	if s.takeStreamSlot(r.Context()) {
		return false, nil
	}
	if r.Context().Err() != nil {
		return true, nil
	}
	return false, errorf(http.StatusTooManyRequests, api.CodeResourceExhausted,
		"%d streams and attachments are open, the most at once (--max-streams): close one, or page the logs", s.opts.MaxStreams)
}

// takeStreamSlot takes one of the --max-streams slots (s.streams), waiting
// up to streamSlotWait for one to be given back, and reports whether it did;
// it gives up when ctx ends.
func (s *Server) takeStreamSlot(ctx context.Context) bool {
	select {
	case s.streams <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(streamSlotWait)
	defer t.Stop()
	select {
	case s.streams <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// endStream sends the state once the process is terminal, then eof.
func (s *Server) endStream(ctx context.Context, w io.Writer, rc *http.ResponseController, p process.Process) error {
	select {
	case <-p.Done():
	case <-ctx.Done():
		return nil
	}
	_ = s.send(ctx, rc, func() error {
		if err := writeEvent(w, api.EventState, "", waitResult(p.Info())); err != nil {
			return err
		}
		// eof's id is where the stream ended, so that a client resuming
		// from it, even after no frame at all, is told 204.
		_, _, last := p.Log().Bounds()
		return writeEvent(w, api.EventEOF, last.String(), struct{}{})
	})
	return nil
}

// pastTheEnd reports whether a stream of p resumed after the cursor after
// has nothing to send, ever: p ended, its log is closed, and after is at or
// past its last frame.
func pastTheEnd(p process.Process, after logstore.Cursor) bool {
	select {
	case <-p.Done():
	default:
		return false
	}
	if !p.Log().Closed() {
		return false // output still drains
	}
	_, _, last := p.Log().Bounds()
	return after >= last
}

// send writes an event and flushes it, giving it writeTimeout to reach the
// client: one that reads nothing is let go, and its follower with it. Once
// ctx is done it fails without writing, so that the deadline Shutdown set
// is not pushed back.
func (s *Server) send(ctx context.Context, rc *http.ResponseController, write func() error) error {
	err := rc.SetWriteDeadline(time.Now().Add(time.Duration(s.writeTimeout.Load())))
	if err != nil && !errors.Is(err, http.ErrNotSupported) { // served by another server
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	return rc.Flush()
}

// streamEvent is one event of a stream as its follower hands it over.
type streamEvent struct {
	frame   *api.LogFrame // a frame, its bytes copied out of the log
	warning *logstore.Warning
	end     bool
}

// follow runs l.FollowLent in a goroutine and hands its events over a
// channel, each frame as the api.LogFrame it is sent as (b64 forces base64),
// made before the next frame is taken, while its bytes are lent. The channel
// is closed when the follow ends; done is closed once the goroutine has
// returned.
func follow(ctx context.Context, l *logstore.Log, after logstore.Cursor, b64 bool) (<-chan streamEvent, <-chan struct{}) {
	events := make(chan streamEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		_ = l.FollowLent(ctx, after, func(ev logstore.Event) bool {
			se := streamEvent{warning: ev.Warning, end: ev.End}
			if ev.Frame != nil {
				f := frameDTO(ev.Frame, b64)
				se.frame = &f
			}
			select {
			case events <- se:
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
