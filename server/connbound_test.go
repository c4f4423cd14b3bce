package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// TestBoundListenerShared: a listener served beside the API (conch
// sandboxd's gRPC and REST ports) counts its connections under the API's
// bound with the API's own, rather than under a bound of its own: each of
// the three held up to MaxConnections, fitted to half the limit of open
// files, and together up to one and a half times the limit. Each beside
// takes at most a quarter of the bound, so that one's flood cannot keep
// the other waiting, and together at most half, and then waits to accept,
// so that the API still serves; with the rest held by the API's own, the
// API refuses (429); a place given back on either side serves the other.
func TestBoundListenerShared(t *testing.T) {
	t.Parallel()
	const bound = 8
	d := start(t, server.Options{MaxConnections: bound})
	require.Equal(t, bound, d.srv.MaxConnections())
	p := startClosing(t, d, `{"cmd":"sleep 120"}`) // not on a connection kept alive, which holds a place a moment after it is let go of
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})

	rawA, acceptedA := serveBeside(t, d, 2*bound)
	rawB, acceptedB := serveBeside(t, d, 2*bound)
	next := func(accepted chan net.Conn) net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(30 * time.Second): // a hang guard
			t.Fatal("no connection accepted beside the API")
			return nil
		}
	}
	dialBeside := func(raw net.Listener) {
		conn, err := net.Dial("tcp", raw.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
	}
	var beside []net.Conn
	for range bound / 4 {
		dialBeside(rawA)
		beside = append(beside, next(acceptedA))
	}
	dialBeside(rawA) // waits: it holds its quarter
	for range bound / 4 {
		dialBeside(rawB) // not kept waiting by the other's
		next(acceptedB)
	}
	dialBeside(rawB) // waits: those beside hold half the bound
	accepted := acceptedA

	livez := func() (int, string) {
		conn := d.dial(t)
		defer conn.Close()
		resp, b := livezOn(t, conn)
		return resp.StatusCode, b
	}
	code, body := livez()
	require.Equal(t, http.StatusOK, code, "the API serves while those beside hold their half: %s", body)

	var waits []net.Conn
	for range bound / 2 {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "GET /v1/processes/%s/wait?timeout=120000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", p.ID, testToken)
		require.NoError(t, err)
		delivered(t, conn)          // not a connection that holds no request, closed to make room
		waits = append(waits, conn) // serving, waiting on the process
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard: the livez connection may still count a moment
	for {
		code, body = livez()
		if code == http.StatusTooManyRequests {
			break
		}
		require.True(t, time.Now().Before(deadline), "the API had more places than the bound left it")
		time.Sleep(10 * time.Millisecond)
	}
	require.Contains(t, body, "--max-connections")

	// A place given back beside is taken by the one waiting there.
	beside[0].Close()
	beside[0] = next(accepted)
	// One given back by the API serves the API.
	waits[0].Close()
	deadline = time.Now().Add(30 * time.Second) // a hang guard
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

// TestBoundListenerEvictsIdleAPIConnections: connections to the API that
// sent nothing, or are idle between requests, which need no token to
// open, held the whole bound, and one to a port beside the API (conch
// sandboxd's, its control plane's way in) waited for the API's idle
// timeout, two minutes. It closes the API's idlest to make room, as a
// connection to the API does.
func TestBoundListenerEvictsIdleAPIConnections(t *testing.T) {
	t.Parallel()
	const bound = 4
	d := start(t, server.Options{MaxConnections: bound})
	d.c.CloseIdleConnections()
	raw, accepted := serveBeside(t, d, 1)
	// The API's connections, idle between requests, kept alive, hold the
	// whole bound.
	for range bound {
		kept := d.dial(t)
		require.NoError(t, kept.SetDeadline(time.Time{}))
		_, err := fmt.Fprintf(kept, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(kept), nil)
		require.NoError(t, err)
		resp.Body.Close()
	}
	conn, err := net.Dial("tcp", raw.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	select {
	case c := <-accepted:
		accepted <- c // closed at the end
	case <-time.After(30 * time.Second): // a hang guard, far below the API's idle timeout
		t.Fatal("the connection beside the API waited for the API's idle ones")
	}
}

// TestBoundListenerTakesAConnectionGoneIdle: a connection beside the API
// that finds the bound held by the API's connections, each serving a
// request, waits; when one of them goes idle, its answer written, it is
// closed to make room. The connection beside waited on until one closed,
// as the idle one did only at the API's idle timeout, two minutes on.
func TestBoundListenerTakesAConnectionGoneIdle(t *testing.T) {
	t.Parallel()
	const bound = 4
	d := start(t, server.Options{MaxConnections: bound})
	// Started on a connection the daemon closes once it answered: the
	// client's own, kept alive, would hold a place a moment after it is
	// let go of, and a wait would be refused for it.
	p := startClosing(t, d, `{"cmd":"sleep 120"}`)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	raw, accepted := serveBeside(t, d, 1)
	waits := make([]net.Conn, 0, bound)
	for range bound {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "GET /v1/processes/%s/wait?timeout=120000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", p.ID, testToken)
		require.NoError(t, err)
		delivered(t, conn)          // not a connection that holds no request, closed to make room
		waits = append(waits, conn) // serving, waiting on the process
	}
	// Every wait is being served once a new connection to the API is
	// refused: the bound holds no idle one (their accepts come apart).
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		resp, _ := d.send(t, "GET", "/livez", "", nil)
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		require.True(t, time.Now().Before(deadline), "the waits never held the bound")
		time.Sleep(10 * time.Millisecond)
	}
	beside, err := net.Dial("tcp", raw.Addr().String())
	require.NoError(t, err)
	defer beside.Close()
	select {
	case <-accepted:
		t.Fatal("a place beside the API while every one of the bound served a request")
	case <-time.After(200 * time.Millisecond): // it waits (a wrong place given may show later: not a timing claim)
	}
	// The process ends (killed from outside: the API has no place for a
	// kill): every wait is answered, and its connection, kept alive, goes
	// idle.
	require.NoError(t, syscall.Kill(p.PID, syscall.SIGKILL))
	resp, err := http.ReadResponse(bufio.NewReader(waits[0]), nil)
	require.NoError(t, err)
	resp.Body.Close()
	select {
	case got := <-accepted:
		accepted <- got // closed at the end
	case <-time.After(30 * time.Second): // a hang guard, far below the API's idle timeout
		t.Fatal("the connection beside the API waited on once the API's had gone idle")
	}
}

// serveBeside serves a listener beside d's API, bounded by
// Server.BoundListener, and returns it and the connections it accepts (up
// to most of them waiting to be taken), each closed at the test's end.
func serveBeside(t *testing.T, d *daemon, most int) (net.Listener, chan net.Conn) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := d.srv.BoundListener(raw)
	accepted := make(chan net.Conn, most)
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
	return raw, accepted
}
