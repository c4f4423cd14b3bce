package server_test

import (
	"strings"
	"testing"

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
