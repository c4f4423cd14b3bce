package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/unreadconn"
	"github.com/conchsh/conch/server"
)

// openUnread opens a log stream of the process with id and reads its
// header, then nothing more. Its receive buffer is small, so that the
// kernel does not take megabytes on its behalf.
func openUnread(t *testing.T, addr, id string) net.Conn {
	t.Helper()
	conn := dialSmall(t, addr)
	fmt.Fprintf(conn, "GET /v1/processes/%s/logs/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", id, addr, testToken)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return conn
}

// dialSmall connects to addr with a small receive buffer, so that the
// kernel does not take megabytes on the reader's behalf.
func dialSmall(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := unreadconn.Dial(ctx(t), addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	return conn
}

// bulky starts a process whose retained output, as JSON (a NUL is
// \u0000), is far more than the socket buffers of a stream hold, and waits
// for it to end.
func bulky(t *testing.T, d *daemon) string {
	t.Helper()
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "head -c 3000000 /dev/zero"})
	require.NoError(t, err)
	_, _, err = d.c.Wait(ctx(t), p.ID, 0)
	require.NoError(t, err)
	return p.ID
}

// waitStuck waits until the daemon's end of conn has a send queue that is
// large and no longer moves: the stream's writer is blocked on a client
// that reads nothing.
func waitStuck(t *testing.T, conn net.Conn) {
	t.Helper()
	last := -1
	require.Eventually(t, func() bool {
		q := sendQueue(t, conn)
		stuck := q >= 256<<10 && q == last
		last = q
		return stuck
	}, 20*time.Second, 20*time.Millisecond, "the daemon's send queue never filled")
}

// sendQueue returns the bytes queued for sending on the daemon's end of
// conn.
func sendQueue(t *testing.T, conn net.Conn) int {
	t.Helper()
	_, q, _ := tcpSocket(t, conn)
	return q
}

// tcpSocket returns the state and send queue of the daemon's end of conn,
// and whether there is one (see unreadconn.ServerEnd).
func tcpSocket(t *testing.T, conn net.Conn) (state string, sendQueue int, found bool) {
	t.Helper()
	state, sendQueue, found, err := unreadconn.ServerEnd(conn)
	require.NoError(t, err)
	return state, sendQueue, found
}

// TestShutdownUnreadStreams pins that streams whose clients read nothing do
// not hold Shutdown until its deadline (`conch serve` then exited 1 after
// 30 s).
func TestShutdownUnreadStreams(t *testing.T) {
	t.Parallel()
	d, served := serveOwn(t)
	srv := d.srv

	id := bulky(t, d)
	for range 3 {
		waitStuck(t, openUnread(t, d.addr, id))
	}
	sctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(sctx))
	require.NoError(t, <-served)
}

// TestUnreadStreamDropped pins that a stream whose client reads nothing is
// let go once an event has waited the write timeout to reach it.
func TestUnreadStreamDropped(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetWriteTimeout(d.srv, 50*time.Millisecond)
	id := bulky(t, d)
	conn := openUnread(t, d.addr, id)
	// Reading would let the writer go on: the daemon's socket tells.
	require.Eventually(t, func() bool {
		state, _, found := tcpSocket(t, conn)
		return !found || state != unreadconn.Established
	}, 20*time.Second, 10*time.Millisecond, "the daemon never closed the stream")
	rest, err := io.ReadAll(conn)
	require.NoError(t, err, "the daemon closed the connection")
	require.NotContains(t, string(rest), "event: eof")
}

// TestStreamResumedAfterItsReaderStalled: the daemon lets go a stream
// whose reader took no event within the write timeout (conch run or logs -f
// piped into a pager that waits); the Go client resumes it after the last
// frame it got, so its reader gets every byte once, the state and eof, and
// no error. conch run and logs -f exited 125 with the command still running.
func TestStreamResumedAfterItsReaderStalled(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetWriteTimeout(d.srv, 50*time.Millisecond)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return unreadconn.Dial(ctx, addr) // small buffers: the stall blocks the daemon's writes soon
	}}
	defer tr.CloseIdleConnections()
	c, err := client.New(d.url, testToken, client.WithHTTPClient(&http.Client{Transport: tr}))
	require.NoError(t, err)
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "head -c 3000000 /dev/zero; exit 3"})
	require.NoError(t, err)
	_, _, err = d.c.Wait(ctx(t), p.ID, 0) // every frame is retained: 3 MB is under the retention
	require.NoError(t, err)
	got, events := 0, []string{}
	var state *client.WaitResult
	for ev, err := range c.Stream(ctx(t), p.ID, client.StreamOptions{}) {
		require.NoError(t, err)
		if len(events) == 0 {
			time.Sleep(time.Second) // the daemon lets the stream go meanwhile
		}
		if len(events) == 0 || events[len(events)-1] != ev.Type {
			events = append(events, ev.Type)
		}
		switch ev.Type {
		case client.EventLog:
			b, err := ev.Frame.Bytes()
			require.NoError(t, err)
			got += len(b)
		case client.EventState:
			state = ev.State
		}
	}
	require.Equal(t, []string{client.EventLog, client.EventState, client.EventEOF}, events)
	require.Equal(t, 3000000, got, "every byte, once")
	require.NotNil(t, state.ExitCode)
	require.Equal(t, 3, *state.ExitCode)
}

// TestStreamLeavesNoDeadline pins that a stream that ended leaves its
// connection fit for the next request, however long that one takes.
func TestStreamLeavesNoDeadline(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetWriteTimeout(d.srv, 50*time.Millisecond)
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c, err := client.New(d.url, testToken, client.WithHTTPClient(&http.Client{Transport: tr}))
	require.NoError(t, err)
	r := d.run(t, client.StartOptions{Cmd: "echo a"})
	req, err := http.NewRequestWithContext(ctx(t), "GET", d.url+"/v1/processes/"+r.ProcessID+"/logs/stream", nil)
	require.NoError(t, err)
	req.Header = authed()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends cleanly")
	require.Contains(t, string(body), "event: eof")
	resp.Body.Close()
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "sleep 0.5"})
	require.NoError(t, err)
	_, _, err = c.Wait(ctx(t), p.ID, 0)
	require.NoError(t, err, "the answer comes after the stream's last deadline, on its connection")
}

// TestUnreadAnswerDropped pins that an answer whose client reads none of it
// is let go once a write has waited the write timeout: a logs page, and a
// run's answer, whose keepLogs none log the handler holds until the answer
// is written. Both held their handler (and that log) for as long as the
// client kept its connection open.
func TestUnreadAnswerDropped(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetWriteTimeout(d.srv, 50*time.Millisecond)
	id := bulky(t, d)
	run := `{"cmd":"head -c 3000000 /dev/zero","keepLogs":"none","outputLimit":8000000}`
	for _, req := range []string{
		"GET /v1/processes/" + id + "/logs?limit=1000000 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n",
		"POST /v1/processes/run HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: " + strconv.Itoa(len(run)) + "\r\n\r\n" + run,
	} {
		conn := dialSmall(t, d.addr)
		fmt.Fprintf(conn, req, d.addr, testToken)
		require.Eventually(t, func() bool {
			state, _, found := tcpSocket(t, conn)
			return !found || state != unreadconn.Established
		}, 20*time.Second, 10*time.Millisecond, "the daemon never let the answer go: %.30s", req)
	}
}
