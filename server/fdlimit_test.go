package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/fdtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/server"
)

// A daemon whose work has taken every descriptor it may open still
// answers a client that connects: it lets go of a spare descriptor to
// accept the connection, answers it once and closes it, which takes the
// spare back (a connection that sends nothing is answered 429 and closed
// within a second, so that it cannot keep the spare). Without it, the client waited in the accept queue, never
// answered, even to delete the sessions that held the descriptors, and
// /healthz went unanswered.
//
// The descriptors are counted out in a process of the test's own: the
// limit applies to the whole process, the client's sockets included.
func TestAcceptOutOfDescriptors(t *testing.T) {
	t.Parallel()
	out := reapertest.RunChild(t, "TestAcceptOutOfDescriptorsChild", "CONCH_TEST_FD_CHILD=1")
	require.Contains(t, out, "--- PASS: TestAcceptOutOfDescriptorsChild", "%s", out)
}

func TestAcceptOutOfDescriptorsChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_FD_CHILD") == "" {
		t.Skip("run by TestAcceptOutOfDescriptors")
	}
	d := start(t, server.Options{})
	sess, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	d.c.CloseIdleConnections()

	// fill holds every descriptor this process may open but the few the
	// test lets go of.
	var fill []int
	defer func() { fdtest.Close(fill) }()
	// dial connects to the daemon with one descriptor free, which the
	// client's socket takes: the daemon has none for the accept. A
	// descriptor this process let go of since (a connection of the
	// readiness check that closed late, on a busy machine) is taken first.
	// Not after the dial: that would race the daemon's accept for the
	// descriptor its spare lets go of.
	dial := func() net.Conn {
		t.Helper()
		fill = append(fill, fdtest.Fill(t)...)
		syscall.Close(fill[len(fill)-1])
		fill = fill[:len(fill)-1]
		conn, err := net.Dial("tcp", d.addr)
		require.NoError(t, err)
		return conn
	}
	// ask sends one request on conn and reads its answer.
	ask := func(conn net.Conn, method, path string) *http.Response {
		t.Helper()
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second))) // hang guard
		_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", method, path, d.addr, testToken)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%s %s with no descriptor free: no answer", method, path)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// The daemon idle: its check that a shell starts over, the client's
	// connections closed.
	require.Eventually(t, func() bool {
		status, _ := d.raw(t, "GET", "/readyz", "", nil)
		return status == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond)
	d.c.CloseIdleConnections()
	var before map[string]string
	require.Eventually(t, func() bool {
		was := before
		before = fdtest.Open(t)
		return maps.Equal(was, before)
	}, 20*time.Second, 100*time.Millisecond)
	restore := fdtest.LimitAbove(t, 32)

	// A connection on the spare that sends nothing does not keep it:
	// it is answered 429 and closed.
	quiet := dial()
	require.NoError(t, quiet.SetDeadline(time.Now().Add(20*time.Second))) // hang guard
	resp, err := http.ReadResponse(bufio.NewReader(quiet), nil)
	require.NoError(t, err, "a connection that sent nothing on the spare descriptor: no answer")
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "limit of open files")
	quiet.Close()
	require.Eventually(t, func() bool { return server.SpareHeld(d.srv) }, 20*time.Second, time.Millisecond)

	resp = ask(dial(), "GET", "/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, resp.Close, "a connection on the spare descriptor answers once")
	// The spare is back once that connection closed, for the next one.
	require.Eventually(t, func() bool { return server.SpareHeld(d.srv) }, 20*time.Second, time.Millisecond)
	// A request whose headers' end comes in a read of its own, served
	// for longer than a connection on the spare has to send its headers,
	// is answered, not cut off by that bound's 429 while it is served.
	split := dial()
	func() {
		defer split.Close()
		require.NoError(t, split.SetDeadline(time.Now().Add(20*time.Second))) // hang guard
		head := fmt.Sprintf("GET /v1/processes/%s/wait?timeout=2500 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", sess.ID, d.addr, testToken)
		_, err := io.WriteString(split, head[:len(head)-1])
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond) // for the last byte to come in a read of its own
		_, err = io.WriteString(split, head[len(head)-1:])
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(split), nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
		require.True(t, resp.Close, "a connection on the spare descriptor answers once")
	}()
	require.Eventually(t, func() bool { return server.SpareHeld(d.srv) }, 20*time.Second, time.Millisecond)
	resp = ask(dial(), "DELETE", "/v1/sessions/"+sess.ID)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	fdtest.Close(fill)
	fill = nil
	restore()
	s2, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err, "a session after the descriptors came back")
	r, _, err := d.c.RunCommand(ctx(t), s2.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo ok"}})
	require.NoError(t, err)
	require.Equal(t, "ok\n", r.Output)
	require.NoError(t, d.c.DeleteSession(ctx(t), s2.ID))
	d.c.CloseIdleConnections()
	// Nothing left open, and the spare held again: as many /dev/null as
	// before, and nothing else that was not open before but the client's
	// sockets.
	nulls := func(fds map[string]string) (n int) {
		for _, what := range fds {
			if what == os.DevNull {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool {
		after := fdtest.Open(t)
		for n, what := range after {
			if what != os.DevNull && what != before[n] && !strings.HasPrefix(what, "socket:") {
				return false
			}
		}
		return nulls(after) == nulls(before)
	}, 20*time.Second, 10*time.Millisecond, "descriptors before: %v, after: %v", before, fdtest.Open(t))
}

// The bound of the API's connections fits the daemon's limit of open
// files: at half of it, one past it closes the connection idle longest
// rather than wait unanswered, every connection answered as any is (not
// on the spare descriptor, answered once and closed). At the default
// bound (4096) and a limit of 256, idle connections, which need no token
// to open, took every descriptor the daemon had, and nothing answered
// until they went.
//
// The daemon runs in a process of its own, under the lowered limit; the
// connections are this process's.
func TestConnectionsFitDescriptorLimit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConnectionsFitDescriptorLimitChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CONCH_TEST_FD_SERVE=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	require.NoError(t, proctree.Start(cmd))
	lines := bufio.NewScanner(stdout)
	addr := ""
	var out []string
	for addr == "" && lines.Scan() {
		out = append(out, lines.Text())
		if _, a, ok := strings.Cut(lines.Text(), "addr="); ok {
			addr = strings.Fields(a)[0]
		}
	}
	require.NotEmpty(t, addr, "the daemon's address: %s %s", out, errOut.String())

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// livez asks on conn, and says whether it was answered 200 with the
	// connection kept open; false: it was closed before it could ask.
	livez := func(i int, conn net.Conn) bool {
		_, err := fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		if err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "connection %d: no answer", i+1)
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "connection %d: %s", i+1, body)
		require.False(t, resp.Close, "connection %d answered once and closed: the daemon is out of descriptors", i+1)
		return true
	}
	for i := range 256 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, conn)
		require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second))) // hang guard
		require.True(t, livez(i, conn), "connection %d closed before its request", i+1)
	}
	// Half the limit of 256 stay open, the last ones; the others were
	// closed to make room. A connection counts idle from when its
	// server goroutine marks it so after its answer, which on a busy
	// machine may come after the next connection's: the last few may
	// go in another order.
	open := 0
	for i, conn := range conns {
		if livez(i, conn) {
			open++
			require.GreaterOrEqual(t, i, len(conns)-128-8, "connection %d of %d is open", i+1, len(conns))
		}
	}
	require.Equal(t, 128, open, "connections open")
	stdin.Close()
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	require.NoError(t, proctree.Wait(cmd), "%s %s", out, errOut.String())
	require.Contains(t, strings.Join(out, "\n"), "--- PASS: TestConnectionsFitDescriptorLimitChild")
}

func TestConnectionsFitDescriptorLimitChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_FD_SERVE") == "" {
		t.Skip("run by TestConnectionsFitDescriptorLimit")
	}
	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 256, Max: rl.Max}))
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	d := start(t, server.Options{})
	fmt.Printf("\naddr=%s\n", d.addr)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test is done with it
}
