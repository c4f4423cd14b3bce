package server_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// runIn runs cmd in the session to its end.
func (d *daemon) runIn(t *testing.T, session, cmd string) *client.RunResult {
	t.Helper()
	r, p, err := d.c.RunCommand(ctx(t), session, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: cmd}})
	require.NoError(t, err)
	require.Nil(t, p)
	return r
}

func TestSession(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	dir := t.TempDir()
	s, err := d.c.CreateSession(c, client.SessionOptions{Name: "main", Cwd: dir, Env: map[string]string{"GREETING": "hi"}})
	require.NoError(t, err)
	require.Equal(t, process.KindSession, s.Kind)
	require.Equal(t, process.Running, s.State)
	require.True(t, s.System)
	require.Equal(t, s.ID, s.SessionID)
	require.Equal(t, "main", s.Name)
	require.Equal(t, dir, s.Cwd)
	require.NotZero(t, s.PID)
	require.True(t, strings.HasPrefix(s.ResolvedShell, "/"), s.ResolvedShell)

	r := d.runIn(t, s.ID, "cd /; export X=42; f() { echo fn $1; }; echo $GREETING")
	require.Equal(t, 0, exitCode(t, r.WaitResult))
	require.Equal(t, "hi\n", r.Stdout)
	require.Equal(t, "/", r.Cwd, "a command's result has the cwd it left the shell in")
	r = d.runIn(t, s.ID, "echo $X; f a; pwd; exit_with() { return $1; }; exit_with 9")
	require.Equal(t, "42\nfn a\n/\n", r.Stdout)
	require.Equal(t, 9, exitCode(t, r.WaitResult))

	got, err := d.c.Session(c, s.ID)
	require.NoError(t, err)
	require.Equal(t, "/", got.Cwd, "a session's cwd follows its shell")

	cmd, err := d.c.Get(c, r.ProcessID)
	require.NoError(t, err)
	require.Equal(t, process.KindSession, cmd.Kind)
	require.False(t, cmd.System)
	require.Equal(t, s.ID, cmd.SessionID)
	require.Contains(t, cmd.ShellCommand, "exit_with 9")

	// Commands queue: the second waits for the first.
	first, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "sleep 0.3; echo first"})
	require.NoError(t, err)
	second, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "echo second", Name: "2nd"})
	require.NoError(t, err)
	require.Equal(t, "2nd", second.Name)
	require.Contains(t, []process.State{process.Starting, process.Running}, second.State)
	wr, _, err := d.c.Wait(c, second.ID, 0)
	require.NoError(t, err)
	require.Equal(t, 0, exitCode(t, *wr))
	f, err := d.c.Get(c, first.ID)
	require.NoError(t, err)
	require.Equal(t, process.Terminal, f.State)

	ss, err := d.c.Sessions(c)
	require.NoError(t, err)
	require.Len(t, ss, 1)
	require.Equal(t, s.ID, ss[0].ID)

	var inSession []string
	for p, err := range d.c.Processes(c, client.ListOptions{SessionID: s.ID}) {
		require.NoError(t, err)
		inSession = append(inSession, p.ID)
	}
	require.Len(t, inSession, 5, "the shell and its four commands")

	require.NoError(t, d.c.DeleteSession(c, s.ID))
	_, err = d.c.Session(c, s.ID)
	requireCode(t, err, client.CodeNotFound)
	_, err = d.c.Get(c, first.ID)
	requireCode(t, err, client.CodeNotFound) // command records go with their session
	requireCode(t, d.c.DeleteSession(c, s.ID), client.CodeNotFound)
	ss, err = d.c.Sessions(c)
	require.NoError(t, err)
	require.Empty(t, ss)
}

func TestSessionRoutes(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{Shell: "dash"})
	require.NoError(t, err)
	require.Equal(t, "dash", s.Shell)

	t.Run("wait runs out", func(t *testing.T) {
		r, p, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{
			CommandOptions: client.CommandOptions{Cmd: "sleep 30"},
			Timeout:        client.Millis(50 * time.Millisecond),
		})
		require.NoError(t, err)
		require.Equal(t, process.Running, p.State)
		require.Empty(t, r.Output)
		require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "INT"}))
		wr, _, err := d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		require.Equal(t, process.Signaled, wr.Reason)
		require.Equal(t, "INT", wr.Signal)
	})
	t.Run("stdin", func(t *testing.T) {
		p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "read x; echo got $x", Stdin: process.StdinOpen})
		require.NoError(t, err)
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("line\n"), true))
		_, _, err = d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Equal(t, "got line\n", page.Items[0].Data)
	})
	t.Run("bad command options", func(t *testing.T) {
		_, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "true", Stdin: "maybe"})
		requireCode(t, err, client.CodeInvalidArgument)
		_, err = d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "true", KeepLogs: "always"})
		requireCode(t, err, client.CodeInvalidArgument)
	})
	t.Run("a command id is not a session", func(t *testing.T) {
		r := d.runIn(t, s.ID, "true")
		_, err := d.c.Session(c, r.ProcessID)
		requireCode(t, err, client.CodeNotFound)
		requireCode(t, d.c.DeleteSession(c, r.ProcessID), client.CodeNotFound)
		_, err = d.c.Submit(c, r.ProcessID, client.CommandOptions{Cmd: "true"})
		requireCode(t, err, client.CodeNotFound)
	})
	t.Run("ended session", func(t *testing.T) {
		r := d.runIn(t, s.ID, "exit 3")
		require.Equal(t, 3, exitCode(t, r.WaitResult))
		require.Eventually(t, func() bool {
			got, err := d.c.Session(c, s.ID)
			return err == nil && got.State == process.Terminal
		}, 10*time.Second, 10*time.Millisecond)
		_, err = d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "true"})
		requireCode(t, err, client.CodeUnsupportedOperation)
		_, _, err = d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true"}})
		requireCode(t, err, client.CodeUnsupportedOperation)
		require.NoError(t, d.c.DeleteSession(c, s.ID))
	})
}

func TestSessionEndsItsProcesses(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{LeasePort: true})
	require.NoError(t, err)
	require.Len(t, s.Ports, 1)
	port := s.Ports[0]
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err, "the leased port is free to bind")
	require.NoError(t, ln.Close())

	r := d.runIn(t, s.ID, "sleep 300 >/dev/null 2>&1 & echo $!; setsid sleep 300 >/dev/null 2>&1 & echo $!")
	var pids []int
	for _, f := range strings.Fields(r.Stdout) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Len(t, pids, 2)
	busy, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "sleep 300"})
	require.NoError(t, err)

	// Deleting the process of the shell is deleting the session.
	ps := proctree.IdentsOf(append(pids, s.PID)...)
	require.NoError(t, d.c.Delete(c, s.ID))
	for _, p := range ps {
		requireGone(t, p)
	}
	_, err = d.c.Get(c, busy.ID)
	requireCode(t, err, client.CodeNotFound)
	_, err = d.c.Session(c, s.ID)
	requireCode(t, err, client.CodeNotFound)
}

func TestDeleteStubbornCommand(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	// A builtin loop that ignores INT and TERM runs in the shell itself: it
	// cannot be stopped without ending the session.
	p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "trap '' INT TERM; echo trapped; while :; do :; done"})
	require.NoError(t, err)
	require.Equal(t, "trapped\n", text(collectUntil(t, d, p.ID, 1)))
	requireCode(t, d.c.Delete(c, p.ID), client.CodeUnsupportedOperation)
	_, err = d.c.Get(c, p.ID)
	require.NoError(t, err, "a command that was not deleted keeps its record")
	require.NoError(t, d.c.DeleteSession(c, s.ID))
	_, err = d.c.Get(c, p.ID)
	requireCode(t, err, client.CodeNotFound)
}

// A kill that ends a session fails its queued commands at once: with a
// signal its shell ignores (QUIT, to an interactive shell), the queue ran on
// until the escalation, and queued commands ran and reported success while
// the session was being ended.
func TestSessionKillFailsItsQueueAtOnce(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	dir := t.TempDir()
	running, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "sleep 300"}) // QUIT ends it, not the shell
	require.NoError(t, err)
	var queued []*client.Process
	for i := range 10 {
		p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "touch " + filepath.Join(dir, strconv.Itoa(i))})
		require.NoError(t, err)
		queued = append(queued, p)
	}
	require.Eventually(t, func() bool {
		p, err := d.c.Get(c, running.ID)
		return err == nil && p.State == "running"
	}, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, d.c.Kill(c, s.ID, client.KillOptions{Signal: "QUIT", EscalateAfter: client.Millis(time.Second)}))
	for _, p := range queued {
		r, _, err := d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		require.Equal(t, process.Failed, r.Reason, "a queued command: %+v", r)
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "queued commands ran while the session ended")
}

// A port lease that fails is answered as what it is, not as a bug (500
// internal, which it was): no free port is 429 resource_exhausted, as the
// daemon's other limits are; a lease directory the daemon cannot use is 400
// unsupported_operation, as limits its host cannot apply are. The message
// says why, and no session is left.
func TestLeasePortRefused(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	for _, tc := range []struct {
		err    error
		status int
		code   client.Code
	}{
		{fmt.Errorf("lease port: %w in 128 tries (last: busy)", portlease.ErrNoFreePort), http.StatusTooManyRequests, client.CodeResourceExhausted},
		{fmt.Errorf("lease port: %w: /tmp/conch-ports is not writable", portlease.ErrLockDir), http.StatusBadRequest, client.CodeUnsupportedOperation},
	} {
		server.SetLeasePort(d.srv, func() (*portlease.Lease, error) { return nil, tc.err })
		_, err := d.c.CreateSession(c, client.SessionOptions{LeasePort: true})
		requireCode(t, err, tc.code)
		var e *client.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, tc.status, e.Status)
		require.Contains(t, e.Message, tc.err.Error())
		sessions, err := d.c.Sessions(c)
		require.NoError(t, err)
		require.Empty(t, sessions)
	}
}
