package server_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/server"
)

// serveOn is a command line that serves HTTP on port until killed, with
// its output dropped.
func serveOn(port int) string {
	return fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1 --directory / >/dev/null 2>&1", port)
}

// unusedPort returns a loopback port that nothing listened on a moment ago.
func unusedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serverOn waits until something listens on port (a hang guard of 20 s)
// and returns the python3 process of serveOn that does, which is killed
// at the test's end if it still runs.
func serverOn(t *testing.T, port int) proctree.Ident {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %d: %v", port, err)
		}
	}
	// The port number is a word of the server's command line only: the
	// shells that started it show their own.
	var found []proctree.Ident
	for _, pid := range containmenttest.Running(strconv.Itoa(port)) {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && string(comm) == "python3\n" {
			found = append(found, proctree.IdentOf(pid))
		}
	}
	require.Len(t, found, 1, "the server on %d", port)
	server := found[0]
	t.Cleanup(func() {
		if server.Alive() {
			_ = syscall.Kill(server.PID, syscall.SIGKILL)
		}
	})
	return server
}

// A server that a session command detached from the shell — its parent,
// a subshell, exited before it, and the daemon, the subreaper, adopted it
// — is not the command's: the command's processes are the shell's
// children it started and their descendants, which no longer reach it.
// So ready answers that the command ended first while the server listens,
// and the command's kill does not reach it, nor does its DELETE; DELETE of
// the session ends it, with containment (its cgroup) and without (its
// process group, or its tag after setsid). The same server started as a job
// of the command (`&`, with nohup or not) is the command's, and ready
// finds it. This pins what docs/api.md says under ready: telling such an
// orphan's command would cost every command a record of what it started.
func TestReadyDoesNotCountADetachedServer(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name string
		opts func(t *testing.T) server.Options
	}{
		{"no containment", func(*testing.T) server.Options {
			return server.Options{Containment: containment.Open(containment.Config{Disabled: true})}
		}},
		{"containment", func(t *testing.T) server.Options {
			return server.Options{Containment: containmenttest.Root(t, containment.Limits{})}
		}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			d := start(t, mode.opts(t))
			for _, tc := range []struct {
				name, how string
				stop      string // "kill" or "delete" the command while it runs, or nothing
			}{
				{"double fork", "( %s & )", ""},
				{"setsid nohup in a subshell", "(setsid nohup %s &)", ""},
				{"double fork, the command killed", "( %s & ); sleep 30", "kill"},
				{"double fork, the command deleted", "( %s & ); sleep 30", "delete"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
					require.NoError(t, err)
					defer d.c.DeleteSession(ctx(t), s.ID)
					port := unusedPort(t)
					cmd, err := d.c.Submit(ctx(t), s.ID, client.CommandOptions{Cmd: fmt.Sprintf(tc.how, serveOn(port))})
					require.NoError(t, err)
					srv := serverOn(t, port)
					switch tc.stop {
					case "kill":
						require.NoError(t, d.c.Kill(ctx(t), cmd.ID, client.KillOptions{Signal: "TERM"}))
					case "delete":
						require.NoError(t, d.c.Delete(ctx(t), cmd.ID))
						require.True(t, srv.Alive(), "the command's DELETE ended the server it detached")
						requireServes(t, port)
					}
					if tc.stop != "delete" {
						_, still, err := d.c.Wait(ctx(t), cmd.ID, 20*time.Second)
						require.NoError(t, err)
						require.Nil(t, still, "the command did not end")
						require.True(t, srv.Alive(), "the command's end (or kill) ended the server it detached")
						r, still, err := d.c.Ready(ctx(t), cmd.ID, client.ReadyOptions{Port: strconv.Itoa(port), Timeout: 20 * time.Second})
						require.NoError(t, err)
						require.Nil(t, still, "the wait ran out")
						require.False(t, r.Ready, "the detached server was found as the command's")
						require.NotNil(t, r.Result, "ended first, with the command's result")
						requireServes(t, port)
					}
					require.NoError(t, d.c.DeleteSession(ctx(t), s.ID))
					requireGone(t, srv)
				})
			}
			for _, job := range []struct{ name, how string }{
				{"job", "%s &"},
				{"nohup job", "nohup %s &"},
			} {
				t.Run(job.name, func(t *testing.T) {
					t.Parallel()
					s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
					require.NoError(t, err)
					defer d.c.DeleteSession(ctx(t), s.ID)
					port := unusedPort(t)
					cmd, _, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
						CommandOptions: client.CommandOptions{Cmd: fmt.Sprintf(job.how, serveOn(port))},
					})
					require.NoError(t, err)
					r, still, err := d.c.Ready(ctx(t), cmd.ProcessID, client.ReadyOptions{Port: strconv.Itoa(port), Timeout: 20 * time.Second})
					require.NoError(t, err)
					require.Nil(t, still, "the wait ran out")
					require.True(t, r.Ready, "ended first: %+v", r.Result)
					srv := serverOn(t, port)
					require.NoError(t, d.c.DeleteSession(ctx(t), s.ID))
					requireGone(t, srv)
				})
			}
		})
	}
}
