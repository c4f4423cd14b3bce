package server

import (
	"bytes"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/fdtest"
	"github.com/conchsh/conch/internal/reapertest"
)

// TestSpareHeldWhileNoConnectionWaits: with no descriptor free, an accept
// fails at once whether a connection waits or not. The listener let go of
// its spare then, and waited for a connection with it let go of; the
// close of a connection on the spare, which takes it back, had come
// before, and none came after: the next connection found no descriptor,
// once other work took the one let go of. The spare is let go of once a
// connection waits.
//
// In a process of the test's own: the limit applies to the whole process.
func TestSpareHeldWhileNoConnectionWaits(t *testing.T) {
	t.Parallel()
	out := reapertest.RunChild(t, "TestSpareHeldWhileNoConnectionWaitsChild", "CONCH_TEST_SPARE_CHILD=1")
	require.Contains(t, out, "--- PASS: TestSpareHeldWhileNoConnectionWaitsChild", "%s", out)
}

func TestSpareHeldWhileNoConnectionWaitsChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_SPARE_CHILD") == "" {
		t.Skip("run by TestSpareHeldWhileNoConnectionWaits")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := jsonErrorListener{Listener: ln, spare: newSpareFD()}
	defer l.Close()
	require.True(t, l.spare.held())
	restore := fdtest.LimitAbove(t, 32)
	defer restore()
	fill := fdtest.Fill(t)
	defer func() { fdtest.Close(fill) }()

	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	// The accept waits for a connection: in the poller, or polling the
	// listener's socket.
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		for _, g := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
			if bytes.Contains(g, []byte("jsonErrorListener.acceptOne")) &&
				(bytes.Contains(g, []byte("[IO wait")) || bytes.Contains(g, []byte("server.connWaiting"))) {
				return true
			}
		}
		return false
	}, 20*time.Second, time.Millisecond)
	require.True(t, l.spare.held(), "the spare was let go of while no connection waited")

	// A connection comes: the spare lets it in.
	syscall.Close(fill[len(fill)-1])
	fill = fill[:len(fill)-1]
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	select {
	case c := <-accepted:
		require.NotNil(t, c)
		require.NotNil(t, c.(*jsonErrorConn).spare, "accepted on the spare")
		c.Close()
	case <-time.After(20 * time.Second): // a hang guard
		t.Fatal("the connection was not accepted")
	}
}
