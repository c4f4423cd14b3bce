package server_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/tracetest"
	"github.com/conchsh/conch/server"
)

// TestRequestsCallAroundTheScheduler: the daemon reads requests and writes
// answers with raw calls, never through the scheduler, whose first call
// after the daemon was idle wakes the Go runtime's monitor thread. It
// counts, in the runtime's trace of 50 session commands over HTTP, the
// socket reads and writes the daemon's side made through the scheduler.
func TestRequestsCallAroundTheScheduler(t *testing.T) { // not parallel: the trace is the whole process's
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	opts := client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true"}}
	runs := func(n int) {
		for range n {
			r, _, err := d.c.RunCommand(c, s.ID, opts)
			require.NoError(t, err)
			require.Equal(t, 0, *r.ExitCode)
		}
	}
	runs(10)
	const n = 50
	calls := map[string]int{}
	for _, stack := range tracetest.Syscalls(t, func() { runs(n) }) {
		socket, daemon, client := "", false, false
		for _, fn := range stack {
			if fn == "net.(*conn).Read" || fn == "net.(*conn).Write" {
				socket = fn
			}
			daemon = daemon || strings.HasPrefix(fn, "net/http.(*conn)") || strings.HasPrefix(fn, "net/http.(*connReader)") ||
				strings.HasPrefix(fn, "net/http.(*response)") || strings.HasPrefix(fn, "net/http.checkConnErrorWriter")
			client = client || strings.Contains(fn, "persistConn")
		}
		if socket != "" && daemon && !client {
			calls[socket]++
		}
	}
	t.Logf("the daemon's socket calls through the scheduler in %d commands: %v", n, calls)
	require.Empty(t, calls)
}

// TestHungUp: the daemon tells a client that closed its connection from a
// live one without reading what it sent, however much of it waits unread.
func TestHungUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer peer.Close()
	c, err := ln.Accept()
	require.NoError(t, err)
	defer c.Close()
	_, err = peer.Write(make([]byte, 64<<10))
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	require.False(t, server.HungUp(c), "a live peer with input unread")
	require.NoError(t, peer.Close())
	require.Eventually(t, func() bool { return server.HungUp(c) }, 5*time.Second, 10*time.Millisecond,
		"a peer that closed, its input unread")
}
