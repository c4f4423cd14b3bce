package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/process"
)

// resizeMessage is the text message that resizes an attached PTY.
type resizeMessage struct {
	Type string `json:"type"`
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// gapMessage is the text message that tells an attached client, where its
// output has a gap, how many bytes it missed.
type gapMessage struct {
	Type  string `json:"type"` // "gap"
	Bytes int64  `json:"bytes"`
}

// attach upgrades to a WebSocket duplex with a PTY process: what the PTY
// wrote (the retained output first, then live) goes out as binary messages,
// with a text gap message where the client missed output; binary messages
// in are typed into it, and a text resize message resizes it. The socket
// closes normally once the process ended and its output was sent.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	// What the process is comes before how the client asked: an exec
	// process was told 426 (send a WebSocket handshake), then 409 once it
	// did, where the contract says 409 for any process that is no PTY.
	ep, ok := p.(*exec.Process)
	if !ok || p.Info().Kind != process.KindPTY {
		return fmt.Errorf("%w: attach to process %s of kind %s", process.ErrNotPTY, p.ID(), p.Info().Kind)
	}
	if err := checkUpgrade(w, r); err != nil {
		return err
	}
	// An attachment holds what a stream does (its buffers, a goroutine or
	// three), for as long as its client keeps it: it takes a stream's
	// place under --max-streams, or 4096 idle ones took half a gigabyte.
	if gone, err := s.streamSlot(r); gone || err != nil {
		return err
	}
	defer func() { <-s.streams }()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	a, err := ep.Attach(ctx)
	if err != nil {
		return err
	}
	defer a.Close()
	// http.Server does not wait for hijacked connections: Shutdown does.
	s.hijacked.Add(1)
	defer s.hijacked.Done()
	hj := &hijackRecorder{ResponseWriter: w}
	conn, err := websocket.Accept(hj, r, nil)
	if err != nil {
		s.log.Debug("attach: upgrade refused", "id", p.ID(), "err", err)
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.opts.BodyLimit)

	var typing atomic.Int64
	input := make(chan struct{})
	go func() {
		defer close(input)
		defer cancel()
		s.attachInput(ctx, conn, a, &typing)
	}()
	defer func() { cancel(); <-input }()
	pinger := make(chan struct{})
	go func() {
		defer close(pinger)
		s.keepAlive(ctx, conn, cancel, &typing,
			func() (int64, int, bool) { return outflow(hj.conn) },
			func() bool { return hungUp(hj.conn) })
	}()
	defer func() { cancel(); <-pinger }()

	buf := make([]byte, 32<<10)
	for {
		n, err := a.Read(buf)
		if n > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return nil // the client is gone
			}
		}
		var gap *exec.GapError
		if errors.As(err, &gap) {
			msg, _ := json.Marshal(gapMessage{Type: "gap", Bytes: gap.Bytes})
			if werr := conn.Write(ctx, websocket.MessageText, msg); werr != nil {
				return nil
			}
			continue
		}
		switch {
		case errors.Is(err, io.EOF):
			conn.Close(websocket.StatusNormalClosure, "process ended")
			return nil
		case err != nil:
			conn.Close(websocket.StatusGoingAway, "")
			return nil
		}
	}
}

// attachInput copies the client's messages to the PTY until the socket or
// ctx ends. It adds one to typing as each write to the PTY starts and one
// as it ends: while the program leaves its input unread, a write waits,
// and so does the rest of what the client sent, its pongs with it.
//
// A binary message is typed in as it comes, a piece at a time: read whole
// first, each message the client left unfinished held up to --body-limit
// of the daemon's memory, outside every budget. A text message, a resize,
// is read up to maxResizeMessage; a longer one is ignored.
func (s *Server) attachInput(ctx context.Context, conn *websocket.Conn, a *exec.Attachment, typing *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		typ, r, err := conn.Reader(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			err = typeIn(r, a, buf, typing)
		} else {
			var n int
			n, err = io.ReadFull(r, buf[:maxResizeMessage+1])
			switch {
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				err = resize(a, buf[:n])
			case err == nil: // too long for a resize: read on to its end
				if _, err = io.CopyBuffer(io.Discard, r, buf); err == nil {
					err = errors.New("a text message too long for a resize")
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil || errors.As(err, new(websocket.CloseError)) || errors.Is(err, websocket.ErrMessageTooBig) {
				return
			}
			s.log.Debug("attach: input dropped", "err", err)
		}
	}
}

// maxResizeMessage is the longest text message read as a resize.
const maxResizeMessage = 1 << 10

// typeIn writes a binary message to the PTY as it is read, through buf. An
// error of the write is the caller's to log; the message is read to its
// end meanwhile, for the next one.
func typeIn(r io.Reader, a *exec.Attachment, buf []byte, typing *atomic.Int64) error {
	var werr error
	for {
		n, err := r.Read(buf)
		if n > 0 && werr == nil {
			typing.Add(1)
			_, werr = a.Write(buf[:n])
			typing.Add(1)
		}
		switch {
		case err == io.EOF:
			return werr
		case err != nil:
			return err
		}
	}
}

// keepAlive pings the client every heartbeat, so that proxies keep an idle
// attachment open and a client that vanished without closing is noticed: a
// ping unanswered for a heartbeat ends the attachment.
//
// While output waits for the client (its connection holds bytes it has not
// acknowledged, see out), a ping would wait behind them, for longer than a
// heartbeat with a client that takes them slowly (its socket's buffers hold
// megabytes), and its write may wait for them too, which the WebSocket ends
// the connection for past 5 s: none is sent then, and what the client
// acknowledges says whether it is there. One that took none of the output
// for a heartbeat is gone; a pong late while it took some is no sign of
// that either.
//
// Pongs are read by attachInput's reads, so one may wait behind input the
// program has not read: a client unanswering, or taking no output, while
// input was held back (typing, see attachInput) ends the attachment only if
// gone says the client's connection was closed or failed.
func (s *Server) keepAlive(ctx context.Context, conn *websocket.Conn, end context.CancelFunc, typing *atomic.Int64, out func() (acked int64, unacked int, ok bool), gone func() bool) {
	tick := time.NewTicker(time.Duration(s.heartbeat.Load()))
	defer tick.Stop()
	// held reports whether input was held back since typing was before.
	held := func(before int64) bool {
		after := typing.Load()
		return (after != before || after%2 == 1) && !gone()
	}
	waiting, last := false, int64(0) // output waited at the last tick, and what was acknowledged then
	before := typing.Load()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		acked, unacked, ok := out()
		if ok && unacked > 0 {
			if waiting && acked == last && !held(before) {
				s.log.Debug("attach: output not taken for a heartbeat", "unacknowledged", unacked)
				end()
				return
			}
			waiting, last, before = true, acked, typing.Load()
			continue
		}
		waiting, before = false, typing.Load()
		pctx, cancel := context.WithTimeout(ctx, time.Duration(s.heartbeat.Load()))
		err := conn.Ping(pctx)
		cancel()
		if err == nil {
			continue
		}
		if ctx.Err() == nil {
			if held(before) {
				continue // the pong may wait behind the input held back
			}
			if now, unacked, ok := out(); ok && unacked > 0 && now != acked {
				continue // the pong waits behind output the client takes
			}
			s.log.Debug("attach: ping unanswered", "err", err)
		}
		end()
		return
	}
}

// hijackRecorder keeps the connection the WebSocket upgrade hijacks, which
// websocket.Conn does not hand out.
type hijackRecorder struct {
	http.ResponseWriter
	conn net.Conn // set by Hijack, before Accept returns
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn = c
	return c, brw, err
}

// resize applies a text message, which must be a resize.
func resize(a *exec.Attachment, msg []byte) error {
	var m resizeMessage
	if err := unmarshalStrict(msg, &m); err != nil {
		return err
	}
	if m.Type != "resize" {
		return fmt.Errorf("unknown message type %q", m.Type)
	}
	size := process.TerminalSize{Cols: m.Cols, Rows: m.Rows}
	if err := checkSize(size); err != nil {
		return err
	}
	return a.Resize(size)
}

// checkUpgrade refuses, in the API's error shape, a request that is not a
// WebSocket handshake websocket.Accept would take: Accept answers those in
// text. A plain request is told 426 and the protocol to upgrade to.
func checkUpgrade(w http.ResponseWriter, r *http.Request) error {
	if !r.ProtoAtLeast(1, 1) || !hasToken(r.Header, "Connection", "upgrade") || !hasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		return errorf(http.StatusUpgradeRequired, api.CodeInvalidArgument,
			"attach is a WebSocket: send Connection: Upgrade and Upgrade: websocket over HTTP/1.1")
	}
	if v := r.Header.Get("Sec-WebSocket-Version"); v != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		return badRequest("Sec-WebSocket-Version %q: only 13 is supported", v)
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return badRequest("want one Sec-WebSocket-Key header, got %d", len(keys))
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0])); err != nil || len(k) != 16 {
		return badRequest("Sec-WebSocket-Key %q is not 16 bytes in base64", keys[0])
	}
	return nil
}

// hasToken reports whether the comma-separated values of header name hold
// token, ignoring case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
