package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// TestAttachQuietDaemon: an attachment on which the daemon sends nothing
// more, not a message and not a ping, for the stream idle timeout (frozen:
// SIGSTOP, its host still answering TCP) ends its Read with an error that
// says so (context.DeadlineExceeded): Read once waited for ever. One whose
// daemon pings it more often than that, and sends nothing else, goes on;
// so does one whose reader holds the output for longer than that, as the
// daemon sends no ping while its output waits unread.
func TestAttachQuietDaemon(t *testing.T) {
	t.Parallel()
	const idle = 600 * time.Millisecond
	for _, daemon := range []string{"silent", "pinging", "held"} {
		t.Run(daemon, func(t *testing.T) {
			t.Parallel()
			ctx := guard(t)
			end := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := websocket.Accept(w, r, nil)
				if err != nil {
					return
				}
				defer ws.CloseNow()
				rctx := ws.CloseRead(r.Context())
				if ws.Write(rctx, websocket.MessageBinary, []byte("out")) != nil {
					return
				}
				switch daemon {
				case "pinging":
					// Pings, every third of the bound, for five bounds.
					for range 15 {
						select {
						case <-time.After(idle / 3):
						case <-rctx.Done():
							return
						}
						if ws.Ping(rctx) != nil {
							return
						}
					}
				case "held":
					<-end // the reader takes the rest once it is let go
					if ws.Write(rctx, websocket.MessageBinary, []byte("more")) != nil {
						return
					}
				default:
					<-rctx.Done() // silent, until the client lets go
					return
				}
				_ = ws.Close(websocket.StatusNormalClosure, "")
			}))
			c := quietClient(t, srv, idle)
			a, err := c.Attach(ctx, "p")
			require.NoError(t, err)
			defer a.Close()
			buf := make([]byte, 64)
			n, err := a.Read(buf)
			require.NoError(t, err)
			require.Equal(t, "out", string(buf[:n]))
			if daemon == "held" {
				time.Sleep(3 * idle) // the reader holds the output
				close(end)
			}
			read := make(chan error, 1)
			go func() {
				var err error
				for err == nil {
					_, err = a.Read(buf)
				}
				read <- err
			}()
			select {
			case err = <-read:
			case <-ctx.Done():
				a.Close()
				<-read
				t.Fatal("Read waits on a daemon that sends nothing")
			}
			if daemon == "silent" {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.ErrorContains(t, err, "attach p: nothing from the daemon, not even a ping, within 600ms")
				return
			}
			require.True(t, errors.Is(err, io.EOF), "the attachment ended by the daemon: %v", err)
		})
	}
}

// TestAttachHandshakeToQuietDaemon: a daemon frozen before the attachment
// (its host still taking connections, its process answering nothing) ends
// Attach once its handshake waited the stream idle timeout, with an error
// that says so (context.DeadlineExceeded): Attach once waited for ever.
// The bound is the handshake's alone: an attachment made lives on past it.
func TestAttachHandshakeToQuietDaemon(t *testing.T) {
	t.Parallel()
	ctx := guard(t)
	const idle = 300 * time.Millisecond
	let := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-let: // answers: the attachment then outlives the bound
		case <-r.Context().Done(): // frozen: never answers
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		rctx := ws.CloseRead(r.Context())
		for range 6 { // a ping a third of the bound, for two bounds, then output
			time.Sleep(idle / 3)
			if ws.Ping(rctx) != nil {
				return
			}
		}
		_ = ws.Write(rctx, websocket.MessageBinary, []byte("late"))
		_ = ws.Close(websocket.StatusNormalClosure, "")
	}))
	c := quietClient(t, srv, idle)
	_, err := c.Attach(ctx, "p")
	require.Error(t, err, "Attach waits on a daemon that does not answer its handshake")
	require.NoError(t, ctx.Err(), "Attach ended by the hang guard, not its own bound")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	close(let)
	a, err := c.Attach(ctx, "p")
	require.NoError(t, err)
	defer a.Close()
	got, err := io.ReadAll(a)
	require.NoError(t, err)
	require.Equal(t, "late", string(got))
}

// quietClient is a client of srv, closed with the test, whose stream idle
// timeout is idle.
func quietClient(t *testing.T, srv *httptest.Server, idle time.Duration) *Client {
	t.Helper()
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := New(srv.URL, "token", WithStreamIdleTimeout(idle), WithHTTPClient(&http.Client{Transport: tr}))
	require.NoError(t, err)
	return c
}
