package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

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
	events, done := follow(ctx, p.Log(), after)
	defer func() { cancel(); <-done }()

	// What a stream holds while its client reads nothing is bounded: the
	// frame being sent is the log's own, lent until it is written, and
	// its event is encoded into enc a piece at a time (see eventWriter).
	enc := eventWriter{w: w, buf: make([]byte, 0, eventPiece)}
	tick := time.NewTicker(time.Duration(s.heartbeat.Load()))
	defer tick.Stop()
	for {
		var write func() error
		var lent *lentEvent
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				return nil // ctx ended the follow
			case ev.End:
				return s.endStream(ctx, w, rc, p)
			case ev.Warning != nil:
				write = func() error {
					return writeEvent(w, api.EventWarning, "", api.Warning{
						Message:              ev.Warning.Message,
						FirstAvailableCursor: ev.Warning.FirstAvailable.String(),
					})
				}
			default:
				write = func() error { return enc.frame(ev.Frame, b64) }
			}
			lent = ev
		case <-tick.C:
			write = func() error {
				_, err := io.WriteString(w, ": ping\n\n")
				return err
			}
		case <-ctx.Done():
			return nil
		}
		err := s.send(ctx, rc, write)
		if lent != nil {
			lent.back <- struct{}{} // it is written, or never will be
		}
		if err != nil {
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

// lentEvent is one event of a FollowLent as a stream's follower hands it
// over: it is lent until the receiver sends on back, which it must once it
// is done with it, for every event but End.
type lentEvent struct {
	logstore.Event
	back chan struct{}
}

// follow runs l.FollowLent in a goroutine and hands its events over a
// channel, one at a time: the follower waits for each to be given back
// before it returns, so that a frame is neither copied nor the next one
// taken while a stream's client is slow to read it. The channel is closed
// when the follow ends; done is closed once the goroutine has returned.
func follow(ctx context.Context, l *logstore.Log, after logstore.Cursor) (<-chan *lentEvent, <-chan struct{}) {
	events := make(chan *lentEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		le := &lentEvent{back: make(chan struct{})}
		_ = l.FollowLent(ctx, after, func(ev logstore.Event) bool {
			le.Event = ev
			select {
			case events <- le:
			case <-ctx.Done():
				return false
			}
			if ev.End {
				return false
			}
			<-le.back // the receiver gives it back
			return true
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

// eventPiece is the size of the pieces a stream's event is encoded and
// written in: what a stream holds of it while its client reads nothing.
const eventPiece = 4 << 10

// An eventWriter writes a frame's log event to w as writeEvent would, the
// same bytes, but encoded a piece at a time into buf, which it reuses:
// neither the frame's data nor its JSON is ever whole in memory.
type eventWriter struct {
	w   io.Writer
	buf []byte
}

// frame writes f's log event; b64 forces base64 (see frameDTO).
func (e *eventWriter) frame(f *logstore.Frame, b64 bool) error {
	cursor := f.Cursor.String()
	e.buf = append(e.buf[:0], "id: "...)
	e.buf = append(e.buf, cursor...)
	e.buf = append(e.buf, "\nevent: "+api.EventLog+"\ndata: {\"cursor\":"...)
	e.buf = appendQuoted(e.buf, cursor)
	e.buf = append(e.buf, `,"channel":`...)
	e.buf = appendQuoted(e.buf, f.Channel.String())
	e.buf = append(e.buf, `,"data":"`...)
	var err error
	encoding := api.EncodingBase64
	if !b64 && f.IsText() {
		encoding = api.EncodingText
		err = e.text(f.Data)
	} else {
		err = e.base64(f.Data)
	}
	if err != nil {
		return err
	}
	e.buf = append(e.buf, `","encoding":`...)
	e.buf = appendQuoted(e.buf, encoding)
	e.buf = append(e.buf, `,"timestamp":`...)
	e.buf = strconv.AppendInt(e.buf, f.Time.UnixMilli(), 10)
	e.buf = append(e.buf, "}\n\n"...)
	return e.flush()
}

// flush writes out what buf holds.
func (e *eventWriter) flush() error {
	_, err := e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return err
}

// room makes room for n more bytes in buf, writing out what it holds when
// they would not fit.
func (e *eventWriter) room(n int) error {
	if cap(e.buf)-len(e.buf) >= n {
		return nil
	}
	return e.flush()
}

// base64 writes data in standard base64, a piece at a time.
func (e *eventWriter) base64(data []byte) error {
	const in = eventPiece / 4 * 3 / 2 // whole groups of 3, half a piece
	for len(data) > 0 {
		n := min(len(data), in)
		if err := e.room(base64.StdEncoding.EncodedLen(n)); err != nil {
			return err
		}
		e.buf = base64.StdEncoding.AppendEncode(e.buf, data[:n])
		data = data[n:]
	}
	return nil
}

// text writes data, valid UTF-8, as the inside of a JSON string, escaped as
// encoding/json escapes it (HTML characters too), a piece at a time.
func (e *eventWriter) text(data []byte) error {
	for i := 0; i < len(data); {
		if err := e.room(utf8.UTFMax + 2); err != nil { // the longest escape: \u2028
			return err
		}
		// A run of bytes that need no escape, as much as fits.
		j, end := i, i+cap(e.buf)-len(e.buf)
		for j < len(data) && j < end && data[j] < utf8.RuneSelf && jsonSafe(data[j]) {
			j++
		}
		if j > i {
			e.buf = append(e.buf, data[i:j]...)
			i = j
			continue
		}
		if b := data[i]; b < utf8.RuneSelf {
			e.buf = appendEscaped(e.buf, b)
			i++
			continue
		}
		c, size := utf8.DecodeRune(data[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			e.buf = append(e.buf, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			e.buf = append(e.buf, `\u202`...)
			e.buf = append(e.buf, hexDigits[c&0xF])
		default:
			e.buf = append(e.buf, data[i:i+size]...)
		}
		i += size
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// jsonSafe reports whether encoding/json writes the ASCII byte b as it is
// in a string, HTML characters escaped.
func jsonSafe(b byte) bool {
	return b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// appendEscaped appends the escape encoding/json writes for the ASCII byte
// b, one jsonSafe says is not safe.
func appendEscaped(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
}

// appendQuoted appends s, short and ASCII, as a JSON string.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := range len(s) {
		if b := s[i]; b < utf8.RuneSelf && jsonSafe(b) {
			dst = append(dst, b)
		} else if b < utf8.RuneSelf {
			dst = appendEscaped(dst, b)
		} else {
			dst = append(dst, `\ufffd`...)
		}
	}
	return append(dst, '"')
}
