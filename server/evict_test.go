package server

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEvictionSparesUnreadRequest: a listener that closes its idlest
// connection to make room does not close one whose request has come but
// is not served yet: not read from its socket, or read and not yet parsed.
// A flood of connections that sent nothing, thousands a second, had such
// probes closed before net/http had read them: a connection counted idle
// from its accept until its request's headers were parsed. Nothing serves
// the connections here, so the requests stay where they are.
func TestEvictionSparesUnreadRequest(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	l := jsonErrorListener{Listener: ln, max: metricsMaxConnections, open: new(connCount), idle: newIdleConns(true), full: "full"}
	// connect opens a connection that sends nothing, and returns it with
	// the listener's side of it.
	connect := func() (client, served net.Conn) {
		client, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { client.Close() })
		require.NoError(t, client.SetDeadline(time.Now().Add(30*time.Second))) // a hang guard
		served, err = l.Accept()
		require.NoError(t, err)
		t.Cleanup(func() { served.Close() })
		return client, served
	}
	// open says whether the listener holds the connection open: what
	// it is sent reaches it. Else it was closed.
	open := func(client, served net.Conn) bool {
		if _, err := served.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n")); err != nil {
			// The client sees it end (a reset, when what it sent
			// was unread), not the hang guard.
			_, err := client.Read(make([]byte, 1))
			require.Error(t, err)
			require.NotErrorIs(t, err, os.ErrDeadlineExceeded)
			return false
		}
		_, err := client.Read(make([]byte, 1))
		require.NoError(t, err)
		return true
	}

	type pair struct{ client, served net.Conn }
	var first, more []pair
	for range metricsMaxConnections {
		client, served := connect()
		first = append(first, pair{client, served})
	}
	request := []byte("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	probe, served := connect()
	_, err = probe.Write(request)
	require.NoError(t, err)
	raw := served.(*jsonErrorConn).NetConn().(syscall.Conn)
	require.Eventually(t, func() bool { return requestWaiting(raw, make([]byte, 4<<10)) }, 30*time.Second, time.Millisecond)
	// This one's request is read, as net/http reads it before it parses
	// it and calls the connection active.
	probeRead, servedRead := connect()
	_, err = probeRead.Write(request)
	require.NoError(t, err)
	_, err = io.ReadFull(servedRead, make([]byte, len(request)))
	require.NoError(t, err)

	for range 20 {
		client, served := connect()
		more = append(more, pair{client, served})
	}
	require.True(t, open(probe, served), "a connection whose request is unread was closed to make room")
	require.True(t, open(probeRead, servedRead), "a connection whose request is read, not parsed, was closed to make room")
	// The others went, the idlest first.
	for i, c := range first {
		require.False(t, open(c.client, c.served), "connection %d of the first", i)
	}
	for i, c := range more {
		require.Equal(t, i >= len(more)-(metricsMaxConnections-2), open(c.client, c.served), "connection %d of those after the probes", i)
	}
}

// TestEvictionSparesRequestBeingRead: a connection whose request a read
// has just taken from its socket, and not yet noted, is not closed to make
// room. The request was then neither in the socket nor noted as come, and
// under load a wait sent as more connections came was closed unanswered.
func TestEvictionSparesRequestBeingRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	l := jsonErrorListener{Listener: ln, max: 1, open: new(connCount), idle: newIdleConns(false), full: "full"}
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	require.NoError(t, client.SetDeadline(time.Now().Add(30*time.Second))) // a hang guard
	served, err := l.Accept()
	require.NoError(t, err)
	defer served.Close()
	require.NoError(t, served.SetDeadline(time.Now().Add(30*time.Second)))

	// The read that takes the request stops there until released.
	taken, release := make(chan struct{}), make(chan struct{})
	hook := func(c *jsonErrorConn) {
		if c == served.(*jsonErrorConn) {
			close(taken)
			<-release
		}
	}
	requestSeenHook.Store(&hook)
	defer requestSeenHook.Store(nil)
	request := []byte("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(served, make([]byte, len(request)))
		read <- err
	}()
	_, err = client.Write(request)
	require.NoError(t, err)
	<-taken
	closed := make(chan bool, 1)
	go func() { closed <- l.idle.closeIdlest() }()
	// A while for a look at the connection that does not wait for the
	// read to note what it took to close it; one that waits returns once
	// released.
	time.Sleep(50 * time.Millisecond)
	close(release)
	require.False(t, <-closed, "the connection whose request was being read was closed to make room")
	require.NoError(t, <-read)
}
