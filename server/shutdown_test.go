package server_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
)

func TestShutdownEndsEverything(t *testing.T) {
	t.Parallel()
	d, served := serveOwn(t)
	srv := d.srv
	c := ctx(t)

	var pids []int
	exec, err := d.c.Start(c, client.StartOptions{Cmd: "setsid sleep 300 & echo $!; wait"})
	require.NoError(t, err)
	pids = append(pids, exec.PID, d.firstLine(t, exec.ID))
	pty, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: "trap '' TERM; sleep 300"})
	require.NoError(t, err)
	pids = append(pids, pty.PID)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	r := d.runIn(t, s.ID, "setsid sleep 300 >/dev/null 2>&1 & echo $!")
	bg, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	require.NoError(t, err)
	pids = append(pids, s.PID, bg)
	running, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "sleep 300"})
	require.NoError(t, err)

	// A stream and a wait in progress end with the daemon.
	streamDone := make(chan error, 1)
	go func() {
		var last error
		for _, err := range d.c.Stream(c, running.ID, client.StreamOptions{}) {
			last = err
		}
		streamDone <- last
	}()

	ps := proctree.IdentsOf(pids...)
	sctx, cancel := context.WithTimeout(c, 30*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(sctx))
	require.NoError(t, <-served)
	for _, p := range ps {
		requireGone(t, p)
	}
	require.Error(t, <-streamDone)
	_, err = d.c.Health(c)
	require.Error(t, err, "the daemon no longer listens")
	require.NoError(t, srv.Shutdown(sctx), "a second Shutdown is harmless")
}

// TestShutdownClosesTricklingClients: a client that sends its request's
// body a byte at a time (to /livez, which needs no token) does not hold
// the shutdown: once every process has ended, the connections still open
// are closed. Before, Shutdown waited for it until its context ran out,
// and conch serve exited 1 ("context deadline exceeded") 30 s later.
func TestShutdownClosesTricklingClients(t *testing.T) {
	t.Parallel()
	d, served := serveOwn(t)
	for _, path := range []string{"/livez", "/v1/processes"} {
		conn, err := net.Dial("tcp", d.addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n{", path, testToken)
		require.NoError(t, err)
		go func() {
			for range 200 {
				time.Sleep(100 * time.Millisecond)
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the requests are read, their bodies trickle
	sctx, cancel := context.WithTimeout(ctx(t), 15*time.Second)
	defer cancel()
	require.NoError(t, d.srv.Shutdown(sctx))
	require.NoError(t, <-served)
}
