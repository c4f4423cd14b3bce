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

	"github.com/coder/websocket"
)

// Attachment is a live duplex with a PTY process: Read returns what the PTY
// writes (what was retained first), Write types into it. Read returns io.EOF
// once the process ended and every byte was read.
type Attachment struct {
	ws   *websocket.Conn
	conn net.Conn // binary messages of ws as a byte stream
}

// Attach opens a WebSocket to the PTY process with id. The attachment lives
// until Close, the end of the process, or the end of ctx.
func (c *Client) Attach(ctx context.Context, id string) (*Attachment, error) {
	u := *c.base
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	u.Path += processPath(id, "attach")
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	ws.SetReadLimit(-1)
	return &Attachment{ws: ws, conn: websocket.NetConn(ctx, ws, websocket.MessageBinary)}, nil
}

// Read reads bytes the PTY wrote.
func (a *Attachment) Read(p []byte) (int, error) {
	n, err := a.conn.Read(p)
	if err != nil && isNormalClose(err) {
		err = io.EOF
	}
	return n, err
}

// Write sends p to the PTY's input.
func (a *Attachment) Write(p []byte) (int, error) { return a.conn.Write(p) }

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
