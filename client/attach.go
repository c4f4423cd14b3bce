package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Attachment is a live duplex with a PTY process: Read returns what the PTY
// writes (what was retained first), Write types into it. Read returns io.EOF
// once the process ended and every byte was read, and a *GapError where the
// output has a gap (the client fell behind what the daemon retains); reading
// goes on after it.
type Attachment struct {
	ws    *websocket.Conn
	conn  net.Conn // binary messages of ws as a byte stream, for writes
	raw   *rawConn // the connection ws runs over; nil if the transport gave none
	ctx   context.Context
	rest  io.Reader // the rest of the binary message being read
	pongs pongs
	quiet *quiet // bounds how long Read waits on the daemon (see Read)
	id    string
}

// pongs orders an attachment's pongs with its writes. While a write of
// input or a resize is in progress, the attachment answers no ping of the
// daemon's: a pong is written after the write, and waits for it 5 s at
// most before the read that took the ping fails, and a write waits as long
// as the program leaves its input unread and the daemon holds it back. The
// daemon, which sees the input come or knows it holds it back, does not
// take a ping unanswered then for a client gone. A write that starts while
// a pong is on its way waits for it, which does not wait for the
// connection (see rawConn.Write).
type pongs struct {
	mu      sync.Mutex
	writing int           // writes of input and resizes in progress
	sent    chan struct{} // while a pong is on its way; closed once it went
	raw     *rawConn      // told that a pong is on its way; may be nil
}

// answer reports whether to answer a ping read, with ctx the context of
// its pong, which ends once the pong was written or failed, or in 5 s (the
// WebSocket library's bound); pongWait bounds it besides.
func (p *pongs) answer(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writing > 0 || p.sent != nil || p.raw != nil && p.raw.held() {
		return false
	}
	sent := make(chan struct{})
	p.sent = sent
	if p.raw != nil {
		p.raw.pong.Store(true)
	}
	var once sync.Once
	var timer *time.Timer
	gone := func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			timer.Stop()
			if p.raw != nil {
				p.raw.pong.Store(false)
			}
			p.sent = nil
			close(sent)
		})
	}
	timer = time.AfterFunc(pongWait, gone)
	context.AfterFunc(ctx, gone)
	return true
}

// pongWait bounds how long a write waits for a pong on its way.
const pongWait = 6 * time.Second

// start counts a write in progress, once no pong is on its way; end ends it.
func (p *pongs) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writing++
	for p.sent != nil {
		sent := p.sent
		p.mu.Unlock()
		<-sent
		p.mu.Lock()
	}
}

func (p *pongs) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writing--
}

// maxMessage bounds a message an attachment reads, its fragments together:
// far past any the daemon sends (32 KiB of output, or a gap's few bytes).
// A larger one, or one whose fragments never end, is not the daemon's: it
// closes the connection (1009, message too big), and Read returns an error
// that says so.
const maxMessage = 1 << 20

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
	// Reads run under the quiet timer's context: a frame of any kind,
	// a ping included, starts it again, and it runs only while Read
	// waits (see Read).
	q := c.newQuiet(ctx)
	q.hold()
	a := &Attachment{ctx: q.ctx, quiet: q, id: id}
	up := &upgrade{next: c.http.Transport}
	hc := *c.http
	hc.Transport = up
	// The handshake is bounded as a quiet attachment is: a daemon frozen
	// before it answers nothing. The library bounds the handshake alone by
	// the client's Timeout, not the attachment it makes.
	hc.Timeout = c.streamIdle
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: h,
		OnPingReceived: func(ctx context.Context, _ []byte) bool {
			q.wait() // a ping, answered or not: the daemon is there
			return a.pongs.answer(ctx)
		}})
	if err != nil {
		q.end()
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("attach %s: no answer from the daemon within %s: it is frozen or gone, or the network holds the connection: %w", id, c.streamIdle, err)
		}
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	a.ws, a.conn, a.raw = ws, websocket.NetConn(ctx, ws, websocket.MessageBinary), up.raw
	a.pongs.raw = up.raw        // before the first read, which takes the pings
	ws.SetReadLimit(maxMessage) // after NetConn, which lifts the bound

	return a, nil
}

// upgrade is the transport of an attachment's handshake: the next
// transport's, keeping the connection a 101 answer hands over (see rawConn).
type upgrade struct {
	next http.RoundTripper
	raw  *rawConn
}

func (t *upgrade) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			t.raw = &rawConn{ReadWriteCloser: rwc}
			resp.Body = t.raw
		}
	}
	return resp, err
}

// rawConn is the connection an attachment's WebSocket runs over, counting
// the bytes read from it and written to it: while Close waits for the
// daemon's answer, what moves says that the daemon still reads or writes.
//
// A pong is written behind: the connection takes no more while the daemon
// reads no more of it (its program leaves its input unread), and a pong
// that waited for it 5 s would end the connection. A write after it waits
// for it first.
type rawConn struct {
	io.ReadWriteCloser
	moved atomic.Int64
	pong  atomic.Bool // the writes now are a pong's (see pongs)

	mu     sync.Mutex
	behind chan struct{} // closed once the writes behind went
	err    error         // of a write behind
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.ReadWriteCloser.Read(p)
	c.moved.Add(int64(n))
	return n, err
}

func (c *rawConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	before := c.behind
	if c.pong.Load() {
		b := bytes.Clone(p)
		done := make(chan struct{})
		c.behind = done
		c.mu.Unlock()
		go func() {
			defer close(done)
			if before != nil {
				<-before
			}
			c.mu.Lock()
			failed := c.err != nil
			c.mu.Unlock()
			if failed {
				return
			}
			n, err := c.ReadWriteCloser.Write(b)
			c.moved.Add(int64(n))
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
			}
		}()
		return len(p), nil
	}
	c.mu.Unlock()
	if before != nil {
		<-before
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	n, err := c.ReadWriteCloser.Write(p)
	c.moved.Add(int64(n))
	return n, err
}

// held reports whether a write behind has not gone yet: the daemon reads
// no more of the connection, and would not read a pong written now.
func (c *rawConn) held() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.behind == nil {
		return false
	}
	select {
	case <-c.behind:
		return false
	default:
		return true
	}
}

// Close closes the connection, and waits for the writes behind, which
// fail then.
func (c *rawConn) Close() error {
	err := c.ReadWriteCloser.Close()
	c.mu.Lock()
	behind := c.behind
	c.mu.Unlock()
	if behind != nil {
		<-behind
	}
	return err
}

// How long Close lets the closing handshake go with nothing moving (no
// byte from the daemon, none of a waiting Write's input taken) before it
// ends the connection without it, and how often it looks.
// The daemon answers at once, after the output on its way; but while its
// program leaves its input unread it reads nothing more of the connection,
// the close included, and the handshake would wait out the library's 5 s
// and fail.
const (
	closeStall = 2 * time.Second
	closeLook  = 100 * time.Millisecond
)

// Read reads bytes the PTY wrote. Where the output has a gap it returns 0
// and a *GapError. A message over 1 MiB, larger than any the daemon sends,
// ends the attachment with an error.
//
// The daemon pings an attachment every 15 s: a Read that gets nothing from
// it, not a message and not a ping, for the Client's stream idle timeout
// (WithStreamIdleTimeout, 45 s by default) fails with an error that says
// so (context.DeadlineExceeded), and the attachment is over: the daemon is
// frozen (SIGSTOP) or gone, or a network holds the connection. Only the
// time Read waits counts, never the time the caller holds the output (the
// daemon sends no ping while its output waits unread).
func (a *Attachment) Read(p []byte) (n int, err error) {
	a.quiet.wait()
	defer func() {
		a.quiet.hold()
		switch {
		case err == nil || errors.Is(err, io.EOF):
		case a.quiet.fired():
			err = fmt.Errorf("attach %s: nothing from the daemon, not even a ping, within %s: it is frozen or gone, or the network holds the connection: %w",
				a.id, a.quiet.d, context.DeadlineExceeded)
		case errors.Is(err, websocket.ErrMessageTooBig):
			err = fmt.Errorf("attach: a message over %d bytes, larger than any the daemon sends: %w", maxMessage, err)
		}
	}()
	for {
		if a.rest != nil {
			n, err := a.rest.Read(p)
			if n > 0 {
				a.quiet.wait()
			}
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
		a.quiet.wait()
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
	a.pongs.start()
	defer a.pongs.end()
	return a.conn.Write(p)
}

// Resize changes the PTY's size.
func (a *Attachment) Resize(ctx context.Context, cols, rows uint16) error {
	b, err := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
	if err != nil {
		return err
	}
	a.pongs.start()
	defer a.pongs.end()
	return a.ws.Write(ctx, websocket.MessageText, b)
}

// Close ends the attachment; the process goes on. Output not read by then
// is dropped. Input a Write still sends goes first, however slowly; once
// nothing has moved for 2 s of the closing handshake, no byte in and none
// out (the daemon reads no more of the connection while the program leaves
// its input unread, the close included), the connection ends without it,
// and a Write still waiting then fails.
func (a *Attachment) Close() error {
	defer a.quiet.end()
	closed := make(chan error, 1)
	go func() { closed <- a.conn.Close() }()
	var ended bool
	if a.raw != nil {
		tick := time.NewTicker(closeLook)
		defer tick.Stop()
		last, since := a.raw.moved.Load(), time.Now()
	wait:
		for {
			select {
			case err := <-closed:
				closed <- err
				break wait
			case now := <-tick.C:
				if n := a.raw.moved.Load(); n != last {
					last, since = n, now
				} else if now.Sub(since) >= closeStall {
					ended = true
					a.raw.Close()
					break wait
				}
			}
		}
	}
	err := <-closed
	if ended || err != nil && (isNormalClose(err) || errors.Is(err, net.ErrClosed)) {
		return nil
	}
	return err
}

func isNormalClose(err error) bool {
	s := websocket.CloseStatus(err)
	return s == websocket.StatusNormalClosure || s == websocket.StatusGoingAway
}
