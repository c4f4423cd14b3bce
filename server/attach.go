package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/process"
)

// resizeMessage is the text message that resizes an attached PTY.
type resizeMessage struct {
	Type string `json:"type"`
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// attach upgrades to a WebSocket duplex with a PTY process: what the PTY
// wrote (the retained output first, then live) goes out as binary messages;
// binary messages in are typed into it, and a text resize message resizes
// it. The socket closes normally once the process ended and its output was
// sent.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	ep, ok := p.(*exec.Process)
	if !ok {
		return fmt.Errorf("%w: attach to process %s of kind %s", process.ErrNotPTY, p.ID(), p.Info().Kind)
	}
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
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Debug("attach: upgrade refused", "id", p.ID(), "err", err)
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.opts.BodyLimit)

	input := make(chan struct{})
	go func() {
		defer close(input)
		defer cancel()
		s.attachInput(ctx, conn, a)
	}()
	defer func() { cancel(); <-input }()

	buf := make([]byte, 32<<10)
	for {
		n, err := a.Read(buf)
		if n > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return nil // the client is gone
			}
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
// ctx ends.
func (s *Server) attachInput(ctx context.Context, conn *websocket.Conn, a *exec.Attachment) {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			_, err = a.Write(data)
		} else {
			err = resize(a, data)
		}
		if err != nil {
			s.log.Debug("attach: input dropped", "err", err)
		}
	}
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
