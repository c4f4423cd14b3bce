package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// streamAnswer is the head of a log stream's answer, whose body runs
// until the connection closes.
const streamAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"

// logEvent is a log event of one frame at cursor.
func logEvent(cursor, data string) string {
	return fmt.Sprintf("event: log\nid: %s\ndata: {\"cursor\":%q,\"channel\":\"stdout\",\"data\":%q}\n\n", cursor, cursor, data)
}

// quietClients are the two ways a Client sends its requests to the stub at
// ln, their streams waiting idle on the daemon at most.
func quietClients(t *testing.T, ln net.Listener, idle time.Duration) map[string]*Client {
	direct, err := New("http://"+ln.Addr().String(), "token", WithStreamIdleTimeout(idle))
	require.NoError(t, err)
	viaHTTP, err := New("http://"+ln.Addr().String(), "token", WithStreamIdleTimeout(idle),
		WithHTTPClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}))
	require.NoError(t, err)
	t.Cleanup(direct.CloseIdleConnections)
	t.Cleanup(viaHTTP.CloseIdleConnections)
	return map[string]*Client{"direct": direct, "net/http": viaHTTP}
}

// TestStreamQuietDaemon: a daemon that sends nothing more, not even a
// heartbeat, for the stream idle timeout (frozen: SIGSTOP, or gone behind a
// network that holds the connection) ends the stream with an error that
// says so, once, without a new connection: it was waited on for good. So
// does one that never sends the head of its answer.
func TestStreamQuietDaemon(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]func(c net.Conn){
		"after a frame": func(c net.Conn) {
			fmt.Fprint(c, streamAnswer+logEvent("1", "one\n"))
		},
		"before its answer": func(c net.Conn) {},
	} {
		var conns atomic.Int32
		ln := serveScript(t, nil, func(c net.Conn, req *http.Request) bool {
			conns.Add(1)
			script(c)
			io.Copy(io.Discard, c) // silent, until the client lets go
			return false
		})
		for way, c := range quietClients(t, ln, 300*time.Millisecond) {
			conns.Store(0)
			ctx := guard(t)
			var types []string
			var end error
			for ev, err := range c.Stream(ctx, "p", StreamOptions{}) {
				if err != nil {
					end = err
					break
				}
				types = append(types, ev.Type)
			}
			require.NoError(t, ctx.Err(), "%s, %s: ended by the hang guard", name, way)
			require.ErrorIs(t, end, context.DeadlineExceeded, "%s, %s", name, way)
			require.ErrorContains(t, end, "not even a heartbeat", "%s, %s", name, way)
			require.Equal(t, int32(1), conns.Load(), "%s, %s: not resumed", name, way)
			if name == "after a frame" {
				require.Equal(t, []string{EventLog}, types, way)
			}
		}
	}
}

// TestStreamHeartbeatsAndSlowReader: heartbeats keep a stream open past
// its idle timeout, and the time its reader holds an event is not the
// daemon's: a reader that holds one twice as long misses nothing.
// Heartbeats come sixty times as often as the timeout, which is seconds
// long, for a loaded machine's sake (at one second, a test binary starved
// that long among the others of a test run failed); each reader streams at
// once, on its own connection.
func TestStreamHeartbeatsAndSlowReader(t *testing.T) {
	t.Parallel()
	const idle = 3 * time.Second
	ln := serveScript(t, nil, func(c net.Conn, req *http.Request) bool {
		fmt.Fprint(c, streamAnswer+logEvent("1", "one\n"))
		// Twice the idle timeout and more of heartbeats.
		for end := time.Now().Add(2*idle + idle/5); time.Now().Before(end); {
			time.Sleep(idle / 60)
			if _, err := fmt.Fprint(c, ": ping\n\n"); err != nil {
				return true
			}
		}
		fmt.Fprint(c, logEvent("2", "two\n")+"event: eof\nid: 2\ndata: {}\n\n")
		return true
	})
	for way, c := range quietClients(t, ln, idle) {
		for _, hold := range []time.Duration{0, 2 * idle} {
			t.Run(fmt.Sprintf("%s/holding %s", way, hold), func(t *testing.T) {
				t.Parallel()
				ctx := guard(t)
				var types []string
				for ev, err := range c.Stream(ctx, "p", StreamOptions{}) {
					require.NoError(t, err)
					types = append(types, ev.Type)
					if ev.ID == "1" {
						time.Sleep(hold)
					}
				}
				require.Equal(t, []string{EventLog, EventLog, EventEOF}, types)
			})
		}
	}
}
