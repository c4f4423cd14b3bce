package server_test

import (
	"bytes"
	"io"
	rtrace "runtime/trace"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/exp/trace"

	"github.com/conchsh/conch/client"
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
	var buf bytes.Buffer
	require.NoError(t, rtrace.Start(&buf))
	const n = 50
	runs(n)
	rtrace.Stop()
	rd, err := trace.NewReader(&buf)
	require.NoError(t, err)
	calls := map[string]int{}
	for {
		ev, err := rd.ReadEvent()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		if _, to := st.Goroutine(); to != trace.GoSyscall {
			continue
		}
		socket, daemon, client := "", false, false
		for f := range st.Stack.Frames() {
			if f.Func == "net.(*conn).Read" || f.Func == "net.(*conn).Write" {
				socket = f.Func
			}
			daemon = daemon || strings.HasPrefix(f.Func, "net/http.(*conn)") || strings.HasPrefix(f.Func, "net/http.(*connReader)") ||
				strings.HasPrefix(f.Func, "net/http.(*response)") || strings.HasPrefix(f.Func, "net/http.checkConnErrorWriter")
			client = client || strings.Contains(f.Func, "persistConn")
		}
		if socket != "" && daemon && !client {
			calls[socket]++
		}
	}
	t.Logf("the daemon's socket calls through the scheduler in %d commands: %v", n, calls)
	require.Empty(t, calls)
}
