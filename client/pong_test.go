package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// gate holds back the writes of the connections it is set on while it is
// shut, as a socket whose buffers are full holds back its writer while
// the daemon reads no more of it.
type gate struct {
	mu      sync.Mutex
	open    chan struct{} // closed while the gate is open
	waiting atomic.Int32  // writes held back
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// pass waits while the gate is shut, or until closed is.
func (g *gate) pass(closed chan struct{}) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case <-open:
	case <-closed:
	}
}

type gatedConn struct {
	net.Conn
	g      *gate
	once   sync.Once
	closed chan struct{}
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.g.pass(c.closed)
	return c.Conn.Write(p)
}

func (c *gatedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// recv is the next value of ch, or fails the test once ctx ends.
func recv[T any](t *testing.T, ctx context.Context, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatal("nothing came before the guard")
		panic("unreachable")
	}
}

// pongStall is longer than the 5 s the WebSocket library lets a control
// frame wait to be written before it gives up on the connection.
const pongStall = 6 * time.Second

// TestAttachPongHeldBack: a ping the daemon sends while the client's
// writes are held back (the daemon reads no more of the connection while
// its program leaves its input unread) does not end the attachment, however
// long they are held: after a write of input that went out whole, the
// pong waits for the connection without failing the read, and during a
// resize, as during a write, no pong is written. Once the daemon reads
// again, the attachment goes on: it reads the output and writes input.
// The pong of the first once failed its write after 5 s and closed the
// connection, and that of the second waited for the resize, failing the
// read after 5 s.
func TestAttachPongHeldBack(t *testing.T) {
	t.Parallel()
	for _, during := range []string{"after write", "resize", "write"} {
		t.Run(during, func(t *testing.T) {
			t.Parallel()
			testAttachPongHeldBack(t, during)
		})
	}
}

func testAttachPongHeldBack(t *testing.T, during string) {
	ctx := guard(t)
	input := make(chan string, 16)
	ping, send := make(chan struct{}), make(chan struct{})
	pinged := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		rctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			defer cancel()
			for {
				typ, b, err := ws.Read(rctx)
				if err != nil {
					return
				}
				if typ == websocket.MessageBinary {
					input <- string(b)
				}
			}
		}()
		for _, step := range []chan struct{}{ping, send} {
			select {
			case <-step:
			case <-rctx.Done():
				return
			}
			if step == ping {
				go func() { pinged <- ws.Ping(rctx) }()
			} else if ws.Write(rctx, websocket.MessageBinary, []byte("out")) != nil {
				return
			}
		}
		<-rctx.Done()
	}))
	t.Cleanup(srv.Close)
	g := newGate()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: c, g: g, closed: make(chan struct{})}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := New(srv.URL, "token", WithHTTPClient(&http.Client{Transport: tr}))
	require.NoError(t, err)
	a, err := c.Attach(ctx, "p")
	require.NoError(t, err)
	defer a.Close()
	type read struct {
		s   string
		err error
	}
	reads := make(chan read, 16)
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := a.Read(buf)
			reads <- read{string(buf[:n]), err}
			if err != nil {
				return
			}
		}
	}()

	_, err = a.Write([]byte("a"))
	require.NoError(t, err)
	require.Equal(t, "a", recv(t, ctx, input))
	g.shut()
	held := make(chan error, 1)
	switch during {
	case "resize":
		go func() { held <- a.Resize(ctx, 80, 24) }()
	case "write":
		go func() { _, err := a.Write([]byte("b")); held <- err }()
	default:
		held <- nil
	}
	if during != "after write" {
		for g.waiting.Load() == 0 {
			require.NoError(t, ctx.Err(), "the %s waits at the gate", during)
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(ping)
	select {
	case r := <-reads:
		t.Fatalf("read while the writes are held back: %q, %v", r.s, r.err)
	case <-time.After(pongStall):
	}
	g.release()
	require.NoError(t, recv(t, ctx, held))
	if during == "write" {
		require.Equal(t, "b", recv(t, ctx, input))
	}
	close(send)
	r := recv(t, ctx, reads)
	require.NoError(t, r.err)
	require.Equal(t, "out", r.s)
	_, err = a.Write([]byte("c"))
	require.NoError(t, err)
	require.Equal(t, "c", recv(t, ctx, input))
	if during == "after write" {
		require.NoError(t, recv(t, ctx, pinged), "the pong came once the daemon read again")
	}
	require.NoError(t, a.Close())
}
