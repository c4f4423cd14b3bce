package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/server"
)

// TestBoundListenerShared: a listener served beside the API (conch
// sandboxd's gRPC and REST ports) counts its connections under the API's
// bound with the API's own, rather than under a bound of its own: each of
// the three held up to MaxConnections, fitted to half the limit of open
// files, and together up to one and a half times the limit. With the bound
// held there, the API refuses (429) and that listener waits to accept, and
// a place given back on either side serves the other.
func TestBoundListenerShared(t *testing.T) {
	t.Parallel()
	const bound = 3
	d := start(t, server.Options{MaxConnections: bound})
	require.Equal(t, bound, d.srv.MaxConnections())
	d.c.CloseIdleConnections()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := d.srv.BoundListener(raw)
	accepted := make(chan net.Conn, 2*bound)
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-acceptDone
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	})
	next := func() net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(30 * time.Second): // a hang guard
			t.Fatal("no connection accepted beside the API")
			return nil
		}
	}
	var held []net.Conn
	for range bound {
		conn, err := net.Dial("tcp", raw.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		held = append(held, next())
	}
	livez := func() (int, string) {
		conn := d.dial(t)
		defer conn.Close()
		_, err := fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	code, body := livez()
	require.Equal(t, http.StatusTooManyRequests, code, "the API has no place left once the listener beside it holds the bound: %s", body)
	require.Contains(t, body, "--max-connections")

	// One more beside the API waits, and is accepted once a place is given back.
	conn, err := net.Dial("tcp", raw.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	held[0].Close()
	held[0] = next()
	held[1].Close()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		code, body = livez()
		if code == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusTooManyRequests, code, body)
		require.True(t, time.Now().Before(deadline), "the API got no place given back")
		time.Sleep(10 * time.Millisecond)
	}
}
