package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/coder/websocket"
)

// Attachment is a live duplex with a PTY process: Read returns what the PTY
// writes (what was retained first), Write types into it. Read returns io.EOF
// once the process ended and every byte was read, and a *GapError where the
// output has a gap (the client fell behind what the daemon retains); reading
// goes on after it.
type Attachment struct {
	ws   *websocket.Conn
	conn net.Conn // binary messages of ws as a byte stream, for writes
	ctx  context.Context
	rest io.Reader // the rest of the binary message being read
	// writing counts the writes of input in progress. While one is, the
	// attachment answers no ping of the daemon's: a pong is written after
	// the write, and waits for it 5 s at most before the read that took
	// the ping fails, and a write waits as long as the program leaves its
	// input unread and the daemon holds it back. The daemon, which sees
	// the input come or knows it holds it back, does not take a ping
	// unanswered then for a client gone.
	writing atomic.Int32
}

// GapError is what Attachment.Read returns where the output has a gap:
// Bytes bytes were dropped before this client read them.
type GapError struct{ Bytes int64 }

func (e *GapError) Error() string {
	return fmt.Sprintf("attach: %d bytes of output were dropped before they were read", e.Bytes)
}

// Attach opens a WebSocket to the PTY process with id. The attachment lives
// until Close, the end of the process, or the end of ctx.
func (c *Client) Attach(ctx context.Context, id string) (*Attachment, error) {
	u, err := c.endpoint(processPath(id, "attach"))
	if err != nil {
		return nil, err
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	a := &Attachment{ctx: ctx}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h,
		OnPingReceived: func(context.Context, []byte) bool { return a.writing.Load() == 0 }})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	ws.SetReadLimit(-1)
	a.ws, a.conn = ws, websocket.NetConn(ctx, ws, websocket.MessageBinary)
	return a, nil
}

// Read reads bytes the PTY wrote. Where the output has a gap it returns 0
// and a *GapError.
func (a *Attachment) Read(p []byte) (int, error) {
	for {
		if a.rest != nil {
			n, err := a.rest.Read(p)
			if err == io.EOF {
				a.rest, err = nil, nil
				if n == 0 {
					continue
				}
			}
			return n, err
		}
		typ, r, err := a.ws.Reader(a.ctx)
		if err != nil {
			if isNormalClose(err) {
				err = io.EOF
			}
			return 0, err
		}
		if typ == websocket.MessageBinary {
			a.rest = r
			continue
		}
		msg, err := io.ReadAll(r)
		if err != nil {
			return 0, err
		}
		var m struct {
			Type  string `json:"type"`
			Bytes int64  `json:"bytes"`
		}
		if json.Unmarshal(msg, &m) == nil && m.Type == "gap" {
			return 0, &GapError{Bytes: m.Bytes}
		}
	}
}

// Write sends p to the PTY's input. It waits while the program leaves its
// input unread and the daemon holds back what it cannot queue.
func (a *Attachment) Write(p []byte) (int, error) {
	a.writing.Add(1)
	defer a.writing.Add(-1)
	return a.conn.Write(p)
}

// Resize changes the PTY's size.
func (a *Attachment) Resize(ctx context.Context, cols, rows uint16) error {
	b, err := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
	if err != nil {
		return err
	}
	return a.ws.Write(ctx, websocket.MessageText, b)
}

// Close ends the attachment; the process goes on.
func (a *Attachment) Close() error {
	err := a.conn.Close()
	if err != nil && (isNormalClose(err) || errors.Is(err, net.ErrClosed)) {
		return nil
	}
	return err
}

func isNormalClose(err error) bool {
	s := websocket.CloseStatus(err)
	return s == websocket.StatusNormalClosure || s == websocket.StatusGoingAway
}
