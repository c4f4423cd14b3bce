package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// livezOn sends a GET /livez without the token on conn and reads its
// answer: the response (its body read and closed) and the body.
func livezOn(t *testing.T, conn net.Conn) (*http.Response, string) {
	t.Helper()
	_, err := fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// livezOnce sends a GET /livez on conn (livezOn), which leaves the
// connection open and idle.
func livezOnce(t *testing.T, conn net.Conn) {
	t.Helper()
	resp, b := livezOn(t, conn)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.False(t, resp.Close, "the connection is kept open")
}

// livezIdle opens a connection and sends a GET /livez on it, as livezOnce
// does, which leaves it open and idle; sent again on a connection of its
// own while it is refused 429. A connection whose answer its client has
// read is idle to the daemon only a moment later (see
// TestIdleConnectionsCannotKeepClientsOut), so that when every other place
// is held by busy connections and ones just answered, there is none to
// close for it.
func livezIdle(t *testing.T, d *daemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		conn := d.dial(t)
		resp, b := livezOn(t, conn)
		if resp.StatusCode == http.StatusTooManyRequests {
			conn.Close()
			require.True(t, time.Now().Before(deadline), "refused until the hang guard: %s", b)
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
		require.False(t, resp.Close, "the connection is kept open")
		return
	}
}

// delivered waits until what was written on conn has reached the daemon's
// socket, each byte acknowledged by the daemon's end: on a loaded machine a
// write on loopback returns while its bytes may still wait for the kernel
// to take them to the socket, where the daemon, which peeks at what a
// socket holds, does not yet see them.
func delivered(t *testing.T, conn net.Conn) {
	t.Helper()
	rc, err := conn.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		var unacked int
		var info *unix.TCPInfo
		var ierr, serr error
		require.NoError(t, rc.Control(func(fd uintptr) {
			unacked, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
			info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}))
		require.NoError(t, ierr)
		require.NoError(t, serr)
		if unacked == 0 || info.State == unix.BPF_TCP_CLOSE {
			return // or reset: what reads it sees its end
		}
		require.True(t, time.Now().Before(deadline), "%d bytes written were never acknowledged", unacked)
		time.Sleep(time.Millisecond)
	}
}

// TestIdleConnectionsCannotKeepClientsOut: connections that hold no
// request, which need no token to open, cannot keep other clients off the
// API. A client without the token held --max-connections of them (each
// after a GET /livez, or having sent nothing), opened again as each
// closed, and every other client, the token's too, was answered 429 until
// they timed out, 2 minutes later. One past the bound now closes the
// connection idle longest.
//
// A connection whose answer its client has read is idle to the daemon
// only a moment later, once net/http is done with its request (see
// connState), and serves a request until then. Under load, connections
// opened after a GET /livez was answered went before it, eight and more
// of them; and a request came while every place was held by connections
// whose answers had gone, and was refused. So what is awaited is that
// each answered connection is closed, not that it went before those
// opened after it; the token's requests end their connections (the
// daemon closes one after its answer, and gives its place back first);
// and one refused is sent again, until the last is answered: what the
// peer cannot do is keep the token's requests out until the hang guard.
func TestIdleConnectionsCannotKeepClientsOut(t *testing.T) {
	t.Parallel()
	const bound = 8
	d := start(t, server.Options{MaxConnections: bound})
	// ended has each answered connection's end: what was read of it
	// until then, and its error.
	type end struct {
		i   int
		b   []byte
		err error
	}
	ended := make(chan end, bound)
	for i := range bound {
		conn := d.dial(t)
		livezOnce(t, conn)
		go func() {
			b, err := io.ReadAll(conn)
			ended <- end{i, b, err}
		}()
	}
	for range bound {
		d.dial(t) // sends nothing
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	refused := 0
	for round, closed, answered := 1, 0, false; round <= 20 || closed < bound || !answered; round++ {
		require.True(t, time.Now().Before(deadline), "after %d rounds, %d refused: %d of the %d answered connections closed", round-1, refused, closed, bound)
		if round > 20 {
			time.Sleep(5 * time.Millisecond) // for the connections' ends, with fewer held meanwhile
		}
		d.dial(t) // the peer opens another as each is closed
		status, body := d.closing(t, "GET", "/v1/sessions", "")
		answered = status == http.StatusOK
		if status == http.StatusTooManyRequests {
			refused++
			t.Logf("round %d refused, every place held by a connection that serves a request: %s", round, body)
		} else {
			require.Equal(t, http.StatusOK, status, "round %d: %s", round, body)
		}
		for more := true; more; {
			select {
			case e := <-ended:
				require.NoError(t, e.err, "connection %d is closed, not held to the hang guard", e.i)
				require.Empty(t, e.b)
				closed++
			default:
				more = false
			}
		}
	}
}

// TestBusyConnectionsNotClosedToMakeRoom: what is closed to make room is
// an idle connection only, never one that serves a request: a log stream,
// a PTY attachment and a wait, each still open and answering after many
// more connections than the bound came and went. Once every connection
// serves a request, one more is answered 429.
func TestBusyConnectionsNotClosedToMakeRoom(t *testing.T) {
	t.Parallel()
	const bound = 8
	d := start(t, server.Options{MaxConnections: bound})
	c := ctx(t)
	echo, err := d.c.Start(c, client.StartOptions{Cmd: "while read line; do echo got $line; done", Stdin: process.StdinOpen})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), echo.ID, client.KillOptions{Signal: "KILL"})
	pty, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: `while read -r line; do echo "got:$line"; done`})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), pty.ID, client.KillOptions{Signal: "KILL"})
	sleeper, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 120"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), sleeper.ID, client.KillOptions{Signal: "KILL"})

	// send sends a request with the token on a connection of its own,
	// and returns once the daemon's socket holds it: a connection whose
	// request has come whole is not closed to make room, but one whose
	// bytes are still on their way looks like one that sent nothing.
	send := func(path string) net.Conn {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", path, testToken)
		require.NoError(t, err)
		delivered(t, conn)
		return conn
	}
	streamConn := send("/v1/processes/" + echo.ID + "/logs/stream")
	stream := bufio.NewReader(streamConn)
	resp, err := http.ReadResponse(stream, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	att, err := d.c.Attach(c, pty.ID)
	require.NoError(t, err)
	defer att.Close()
	wait := send("/v1/processes/" + sleeper.ID + "/wait?timeout=120000")

	for range 3 * bound {
		livezIdle(t, d)
		d.dial(t)
	}

	// The client's own idle connection may have been closed to make
	// room: a request sent on it as it closes is lost to a reset, as at
	// an idle timeout.
	d.c.CloseIdleConnections()
	require.NoError(t, d.c.WriteStdin(c, echo.ID, []byte("hi\n"), false))
	readUntil(t, resp.Body, "got hi")
	_, err = att.Write([]byte("there\n"))
	require.NoError(t, err)
	readUntil(t, att, "got:there")
	require.NoError(t, d.c.Kill(c, sleeper.ID, client.KillOptions{Signal: "KILL"}))
	resp, err = http.ReadResponse(bufio.NewReader(wait), nil)
	require.NoError(t, err, "the wait is answered")
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))

	// Every place serving a request: the stream, the attachment, and
	// waits.
	waiter, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 120"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), waiter.ID, client.KillOptions{Signal: "KILL"})
	// sendWait sends a wait on a connection of its own; the status of
	// its answer comes on the channel (0: the connection ended first),
	// which none does while it waits.
	type waitConn struct {
		conn   net.Conn
		status chan int
	}
	sendWait := func() waitConn {
		w := waitConn{send("/v1/processes/" + waiter.ID + "/wait?timeout=120000"), make(chan int, 1)}
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(w.conn), nil)
			if err != nil {
				w.status <- 0
				return
			}
			resp.Body.Close()
			w.status <- resp.StatusCode
		}()
		return w
	}
	waits := make([]waitConn, 0, bound-2)
	for range bound - 2 {
		waits = append(waits, sendWait())
	}
	d.c.CloseIdleConnections()
	// refused says whether a request on a connection of its own is
	// answered 429, else 200. It is sent raw: a refusal comes at the
	// accept, before the request is sent, which a Transport takes for an
	// answer to no request, and fails.
	refused := func() bool {
		conn := d.dial(t)
		defer conn.Close()
		_, _ = fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return false
		}
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
		require.Contains(t, string(b), "--max-connections")
		return true
	}
	// Until the idle connections left, each of the last one's too (a
	// request's connection is idle a moment after its answer), are closed.
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for !refused() {
		require.True(t, time.Now().Before(deadline), "never refused with every place serving a request")
		for i, w := range waits {
			select {
			case status := <-w.status:
				// Refused at its accept: the place it would take was
				// held by a connection whose answer had gone, and
				// whose handler had yet to return (net/http calls it
				// idle only then). Sent again. A wait is never closed.
				require.Equal(t, http.StatusTooManyRequests, status, "wait %d is answered while it waits, or closed", i)
				t.Logf("wait %d refused at its accept: sent again", i)
				w.conn.Close()
				waits[i] = sendWait()
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A place given back is taken again, once the daemon has seen it go.
	waits[0].conn.Close()
	for refused() {
		require.True(t, time.Now().Before(deadline), "a place given back is not taken again")
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRefusedSlowBodiesCannotKeepClientsOut: a connection whose request
// was refused (401, no token) while its body still comes, slowly, is read
// to its end only to get the refusal to its client: it holds no request
// being served, and is closed to make room as an idle one is. A client
// without the token held the places with such bodies, a byte at a time,
// and every other client was answered 429.
func TestRefusedSlowBodiesCannotKeepClientsOut(t *testing.T) {
	t.Parallel()
	const bound = 8
	d := start(t, server.Options{MaxConnections: bound})
	for range bound {
		conn := postUnauthed(t, d, 100000)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		// Its body goes on coming, a byte at a time, while the daemon
		// reads it to its end.
		go func() {
			for range 50 {
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	status, body := d.raw(t, "GET", "/v1/sessions", "", authed())
	require.Equal(t, http.StatusOK, status, body)
}

// TestRefusalReadingItsRestKeepsItsAnswer: a refusal whose body is still
// being read and dropped may be closed to make room, but its answer reaches
// its client whole, with the rest of its body read: a flood of connections
// that sent nothing, past the bound, cut the answer's end (a 401 reached its
// client without its last chunk, an unexpected EOF) or reset it.
func TestRefusalReadingItsRestKeepsItsAnswer(t *testing.T) {
	t.Parallel()
	const bound = 4
	d := start(t, server.Options{MaxConnections: bound})
	const size = 64 << 10
	conn := postUnauthed(t, d, size)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	// Connections that send nothing, more than the bound, while the rest
	// of the body has yet to come.
	for range 2 * bound {
		d.dial(t)
	}
	_, _ = conn.Write([]byte(strings.Repeat(" ", size-1)))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the answer is whole")
	require.Contains(t, string(b), "unauthenticated")
}

// TestRefusalReadingItsRestOutlastsIdleOnes: a client that sends its whole
// body before it reads the answer, as Python's http.client does, gets its
// refusal while connections that sent nothing come past the bound: those,
// holding no request at all, are closed to make room before it. It was
// closed first, being idle longest, and its client saw a reset.
func TestRefusalReadingItsRestOutlastsIdleOnes(t *testing.T) {
	t.Parallel()
	const bound = 4
	d := start(t, server.Options{MaxConnections: bound})
	const size = 4 << 20
	// The rest is read for as long as the test may take, not for the
	// daemon's 5 s: a machine that stalled the test past them had the
	// daemon stop reading, and close the connection under the write.
	server.SetReadRest(d.srv, 2*size, time.Minute)
	conn := postUnauthed(t, d, size)
	// The refusal is sent, and the rest read, once its headers came: its
	// first byte is awaited, not read by the answer's reader below.
	br := bufio.NewReader(conn)
	_, err := br.Peek(1)
	require.NoError(t, err, "the refusal comes")
	for range 2 * bound {
		d.dial(t)
	}
	_, err = conn.Write([]byte(strings.Repeat(" ", size-1)))
	require.NoError(t, err, "the body is read to its end")
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(b))
}

// postUnauthed sends, on a connection of its own, a POST without the
// token whose body is size bytes, of which only the first is sent: the
// daemon refuses it 401, and reads the rest as it comes.
func postUnauthed(t *testing.T, d *daemon, size int) net.Conn {
	t.Helper()
	conn := d.dial(t)
	_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size)
	require.NoError(t, err)
	return conn
}

// TestRefusalWaitsForTheRequest: a connection refused at --max-connections
// is answered once its request begins to come, so that a Go client whose
// request is written a moment after it connected, as on a loaded machine,
// gets the 429 to act on. Written as the connection was accepted, the
// answer came before the request, which Go's transport takes for an answer
// to nothing asked and fails the request with ("readLoopPeekFailLocked").
// A client that sends nothing is answered all the same, a moment later.
func TestRefusalWaitsForTheRequest(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxConnections: 1})
	p := startClosing(t, d, `{"cmd":"sleep 120"}`) // not on a connection kept alive, which holds a place a moment after it is let go of
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	d.c.CloseIdleConnections()
	held := d.dial(t)
	_, err := fmt.Fprintf(held, "GET /v1/processes/%s/wait?timeout=120000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", p.ID, testToken)
	require.NoError(t, err)
	delivered(t, held)                           // not a connection that holds no request, closed to make room
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		conn := d.dial(t)
		resp, _ := livezOn(t, conn)
		conn.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			break // the wait holds the one place
		}
		require.True(t, time.Now().Before(deadline), "the wait never held the bound")
		time.Sleep(10 * time.Millisecond)
	}

	// Nothing comes before the request.
	conn := d.dial(t)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(150*time.Millisecond)))
	n, err := conn.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "%d bytes came before the request", n)
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second))) // a hang guard
	resp, b := livezOn(t, conn)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, b, "--max-connections")
	// A client that sends nothing gets it too.
	quiet := d.dial(t)
	resp, err = http.ReadResponse(bufio.NewReader(quiet), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	// Go's transport, its request asked for a moment after it connected.
	tr := &http.Transport{DialContext: func(c context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(c, network, addr)
		if err != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
		return conn, nil
	}}
	defer tr.CloseIdleConnections()
	for range 3 {
		req, err := http.NewRequestWithContext(ctx(t), "GET", d.url+"/livez", nil)
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err, "the refusal answers the request")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	}
}
